"""``rdss vendor config NAME [--url URL]``: what a vendor configures its Message Gateway with.

Read from the outputs of the stack ``rdss-<env>`` of the deployment ``--url`` names (else
``$RDSS_GATEWAY_URL``, else the running local runtime's), or from the synthesised template in
``cdk.out/`` before deploying. Prints the
gateway URL (region, the vendor's role and external ID, its Local Data Repository ``ldr=``),
the application name its consumer group must be, and the channels it may write and read. Exit 2
when the stack, the template or the vendor is not there.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import orjson

from rdss.cli.common import USAGE, AwsDeployment, CommandError, aws_deployment, vendor_name
from rdss.cli.options import add_group, add_json_option, deployment_command
from rdss.deployment.vendors import check_vendor_name, output_key
from rdss.host.display import PrintableLines
from rdss.host.inputs import InputTooLarge, read_regular_file
from rdss.model.canonical import V3

#: Where ``cdk synth`` writes (``make synth ENV=...``).
CDK_OUT = Path("cdk.out")
#: The files of ``cdk.out/`` read, by the stack's name.
CDK_STACK_FILES = "rdss-ENV.template.json and manifest.json"
#: The most read of a file in ``cdk.out/`` (the template, the manifest): this project's template
#: is a few hundred kilobytes, and CloudFormation takes at most 1 MB; anything past this is no
#: template of it (a log, a link to ``/dev/zero``) and is refused unread.
MAX_CDK_FILE_BYTES = 50 * 1024 * 1024


def register(commands: Any) -> None:
    """What a vendor (a repository or preservation system declared in cdk.json) configures its Message Gateway
    with, from the deployment's stack or the synthesised template."""
    actions = add_group(commands, "vendor", register, help="what a vendor needs to connect its gateway")
    config = deployment_command(actions, "config", run_config, help="print a vendor's gateway configuration")
    config.add_argument("name", metavar="NAME", type=vendor_name)
    config.add_argument(
        "--cdk-out",
        type=Path,
        nargs="?",
        const=CDK_OUT,
        metavar="DIR",
        help="read the synthesised template instead of the deployed stack (default DIR: cdk.out; its "
        f"{CDK_STACK_FILES} must be regular files of at most {MAX_CDK_FILE_BYTES // 1024 // 1024} MiB of JSON)",
    )
    config.add_argument(
        "--account",
        help="with --cdk-out: the account an environment-agnostic template will be deployed to",
    )
    config.add_argument(
        "--ldr",
        metavar="URL",
        help="the gateway's Local Data Repository (ldr= of the URL): default a SQLite file on the gateway's host, "
        f"{default_ldr('ENV')}; a gateway running in AWS names a DynamoDB table of the vendor's own, "
        "dynamodb://TABLE",
    )
    add_json_option(config, "one JSON object instead of shell lines")


@dataclass(frozen=True)
class GatewayConfig:
    """Everything a vendor's gateway is configured with."""

    vendor: str
    environment: str
    url: str
    application: str
    role_arn: str
    external_id: str
    region: str
    #: channel -> stream name
    writes: dict[str, str]
    reads: dict[str, str]
    #: The gateway's Local Data Repository (the URL's ``ldr=``): the vendor's own store, never
    #: the deployment's ``messages`` table, which its role cannot reach.
    ldr: str
    #: The Message API version its application reads (``Gateway(..., reads=)``; cdk.json ``reads``).
    version: str = V3
    #: The tenantJiscID its gateway gives messages translated up to 4.0.0 (None: not set).
    tenant_jisc_id: int | None = None


def default_ldr(environment: str, prefix: str = "rdss") -> str:
    """The SQLite file a gateway outside AWS keeps its Local Data Repository in: the gateway's
    own default (:mod:`rdss.gateway.log.kinesis`) spelt from the home directory of the host it runs on,
    since this command usually runs elsewhere."""
    return f"sqlite://~/.local/state/rdss/kinesis-{prefix}-{environment}.sqlite"


def check_ldr(url: str) -> str:
    """``url`` when it names a store a vendor's gateway can keep its repository in.

    Raises:
        CommandError: not ``dynamodb://TABLE`` nor ``sqlite://PATH`` (usage).
    """
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme == "dynamodb" and parts.netloc and parts.path in ("", "/"):
        return url
    if scheme == "sqlite" and (parts.netloc + parts.path).strip("/"):
        return url
    raise CommandError(
        f"--ldr {url!r}: expected dynamodb://TABLE (a table of the vendor's own, in AWS) or sqlite://PATH "
        "(a file on the gateway's host); a vendor's repository outlives the process, so not memory://",
        USAGE,
    )


def gateway_config(
    name: str, environment: str, outputs: dict[str, str], endpoint: str | None, ldr: str | None = None
) -> GatewayConfig:
    """The configuration of vendor ``name`` from the stack's outputs (key -> value); ``ldr``:
    its Local Data Repository (default :func:`default_ldr`).

    Raises:
        KeyError: the outputs have no vendor ``name``.
    """

    def value(what: str) -> str:
        return outputs[output_key(name, what)]

    role_arn = value("RoleArn")
    channels = {kind: [c for c in value(kind.capitalize()).split(",") if c] for kind in ("writes", "reads")}
    streams = {c: value(f"{c.capitalize()}StreamName") for c in (*channels["writes"], *channels["reads"])}
    params = {"region": value("Region"), "role": role_arn, "external_id": value("ExternalId")}
    # the streams are <prefix>-<env>-<channel>: a prefix other than the default goes in the URL
    any_channel, any_stream = next(iter(streams.items()))
    prefix = any_stream.removesuffix(f"-{environment}-{any_channel}")
    if prefix != "rdss":
        params["prefix"] = prefix
    if endpoint:
        params["endpoint"] = endpoint
    params["ldr"] = ldr or default_ldr(environment, prefix)
    table = urlsplit(params["ldr"]).netloc
    if params["ldr"].startswith("dynamodb:") and table.startswith(f"{prefix}-{environment}-"):
        # the broker claims bare messageIds in the deployment's tables; the role reaches none of them
        raise CommandError(f"--ldr {params['ldr']!r} is the deployment's; name a table of the vendor's own", USAGE)
    query = "&".join(f"{k}={quote(v, safe=':/')}" for k, v in params.items())
    return GatewayConfig(
        vendor=name,
        environment=environment,
        url=f"kinesis://{environment}?{query}",
        application=value("Group"),
        role_arn=role_arn,
        external_id=value("ExternalId"),
        region=value("Region"),
        writes={c: streams[c] for c in channels["writes"]},
        reads={c: streams[c] for c in channels["reads"]},
        ldr=params["ldr"],
        # stacks deployed before versions were declared have neither output: 3.0.2, no tenant
        version=outputs.get(output_key(name, "Version"), V3),
        tenant_jisc_id=int(tenant) if (tenant := outputs.get(output_key(name, "TenantJiscId"))) else None,
    )


def vendor_names(outputs: dict[str, str]) -> list[str]:
    """The vendors a stack's outputs configure, named as ``vendor config`` takes them: each
    vendor's ``Group`` output is its name (its consumer group), kept when the output keys it
    spells back are the vendor's (a key's CamelCase stem is no name: ``Acme`` for ``acme``)."""
    return sorted(
        name
        for key, name in outputs.items()
        if key.startswith("Vendor") and key.endswith("Group") and output_key(name, "Group") == key and _fit(name)
    )


def _fit(name: str) -> bool:
    """Whether ``name`` is one ``vendor config`` takes."""
    try:
        check_vendor_name(name)
    except ValueError:
        return False
    return True


def stack_outputs(stack: str, target: AwsDeployment) -> dict[str, str]:
    """The outputs of a deployed stack."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        described = target.client("cloudformation").describe_stacks(StackName=stack)["Stacks"][0]
    except ClientError as error:
        message = error.response.get("Error", {}).get("Message", str(error))
        raise CommandError(f"stack {stack}: {message} (before deploying, read the template with --cdk-out)") from error
    except BotoCoreError as error:
        raise CommandError(f"stack {stack}: {error}") from error
    return {o["OutputKey"]: o["OutputValue"] for o in described.get("Outputs", [])}


def template_outputs(stack: str, cdk_out: Path, account: str | None = None) -> dict[str, str]:
    """The outputs of a synthesised template, resolved as CloudFormation would resolve them
    (the stack's account and region come from the cloud assembly's manifest; ``account`` fills
    in the account of an environment-agnostic one)."""
    template_file = cdk_out / f"{stack}.template.json"
    template = _json_object(template_file)
    manifest = _json_object(cdk_out / "manifest.json")
    try:
        environment = manifest.get("artifacts", {}).get(stack, {}).get("environment", "")
    except AttributeError:  # artifacts, or the stack's, not an object
        raise CommandError(f"{cdk_out / 'manifest.json'}: not a cloud assembly manifest", USAGE) from None
    match = re.fullmatch(r"aws://([^/]+)/([^/]+)", environment) if isinstance(environment, str) else None
    synthesised_account, region = match.groups() if match else ("unknown-account", "unknown-region")
    if re.fullmatch(r"\d{12}", synthesised_account):
        if account not in (None, synthesised_account):
            raise CommandError(f"{template_file} is for account {synthesised_account}, not {account}")
        account = synthesised_account
    if account is None or not re.fullmatch(r"\d{12}", account) or region.startswith("unknown"):
        raise CommandError(
            f"{template_file} does not say its account and region ({environment or 'none'}): give --account "
            "(synthesise with -c region=... for the region), or read the deployed stack"
        )
    try:
        resolver = _Resolver(template.get("Resources", {}), account, region)
        return {key: resolver.resolve(output["Value"]) for key, output in template.get("Outputs", {}).items()}
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        # a template edited, or not synthesised from this project: whatever its shape, one line
        raise CommandError(
            f"{template_file}: not a template rdss synthesised ({type(error).__name__})", USAGE
        ) from None


def _json_object(path: Path) -> dict[str, Any]:
    """A JSON object in ``cdk.out/``, read from a regular file of at most :data:`MAX_CDK_FILE_BYTES`.

    Raises:
        CommandError: it is not there, not a regular file, too large, not UTF-8 JSON (nested
            deeper than 1,024 levels included) or not an object (usage), naming the file.
    """
    try:
        data = read_regular_file(path, MAX_CDK_FILE_BYTES)
    except InputTooLarge:
        mib = MAX_CDK_FILE_BYTES // 1024 // 1024
        raise CommandError(f"{path}: larger than {mib} MiB, so not a CDK file of rdss", USAGE) from None
    except OSError as error:
        hint = " (make synth ENV=... writes it)" if isinstance(error, FileNotFoundError) else ""
        raise CommandError(f"cannot read {path}: {error.strerror}{hint}", USAGE) from None
    try:
        value = orjson.loads(data)  # bad UTF-8 and nesting past 1,024 levels are JSONDecodeErrors too
    except orjson.JSONDecodeError as error:
        raise CommandError(f"{path}: not JSON: {error}", USAGE) from None
    if not isinstance(value, dict):
        raise CommandError(f"{path}: not a JSON object", USAGE)
    return value


class _Resolver:
    """The intrinsic functions the vendor outputs use: Ref and Fn::GetAtt of roles and
    streams, pseudo parameters, Fn::Join."""

    def __init__(self, resources: dict[str, Any], account: str, region: str) -> None:
        self.resources = resources
        self.pseudo = {
            "AWS::AccountId": account,
            "AWS::Region": region,
            "AWS::Partition": "aws-cn" if region.startswith("cn-") else "aws",
            "AWS::URLSuffix": "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com",
        }

    def resolve(self, value: Any) -> str:
        if isinstance(value, str):
            return value
        if isinstance(value, dict) and "Fn::Join" in value:
            delimiter, items = value["Fn::Join"]
            return str(delimiter).join(self.resolve(item) for item in items)
        if isinstance(value, dict) and "Ref" in value:
            ref = value["Ref"]
            if ref in self.pseudo:
                return self.pseudo[ref]
            return self._name(ref)
        if isinstance(value, dict) and "Fn::GetAtt" in value:
            logical_id, attribute = value["Fn::GetAtt"]
            if attribute == "Arn":
                return self._arn(logical_id)
        raise CommandError(f"cannot resolve {json.dumps(value)} without deploying")

    def _name(self, logical_id: str) -> str:
        resource = self.resources[logical_id]
        names = {"AWS::Kinesis::Stream": "Name", "AWS::IAM::Role": "RoleName", "AWS::DynamoDB::Table": "TableName"}
        name = resource.get("Properties", {}).get(names.get(resource["Type"], ""))
        if not isinstance(name, str):
            raise CommandError(f"{logical_id} has no fixed name: its outputs are known only once deployed")
        return name

    def _arn(self, logical_id: str) -> str:
        partition, region, account = (self.pseudo[k] for k in ("AWS::Partition", "AWS::Region", "AWS::AccountId"))
        kind = self.resources[logical_id]["Type"]
        name = self._name(logical_id)
        if kind == "AWS::IAM::Role":
            path = self.resources[logical_id]["Properties"].get("Path", "/")
            return f"arn:{partition}:iam::{account}:role{path}{name}"
        if kind == "AWS::Kinesis::Stream":
            return f"arn:{partition}:kinesis:{region}:{account}:stream/{name}"
        if kind == "AWS::DynamoDB::Table":
            return f"arn:{partition}:dynamodb:{region}:{account}:table/{name}"
        raise CommandError(f"cannot tell the ARN of {logical_id} ({kind}) without deploying")


def run_config(args: argparse.Namespace) -> int:
    """Print the gateway configuration of vendor NAME (cdk.json: rdss.environments.ENV.vendors.NAME)
    from the outputs of the stack rdss-ENV of the deployment kinesis://ENV, or of the template in
    cdk.out/ before deploying."""
    if args.account is not None and args.cdk_out is None:
        raise CommandError("--account goes with --cdk-out: a deployed stack knows its account")
    target = aws_deployment(args.url, "vendor config")
    environment = target.deployment.environment
    stack = f"rdss-{environment}"
    if args.cdk_out is not None:
        outputs = template_outputs(stack, args.cdk_out, args.account)
    else:
        outputs = stack_outputs(stack, target)
    endpoint = target.url.param("endpoint")
    try:
        config = gateway_config(args.name, environment, outputs, endpoint, check_ldr(args.ldr) if args.ldr else None)
    except KeyError:
        known = vendor_names(outputs)
        raise CommandError(
            f"{stack} has no vendor {args.name!r}" + (f" (its vendors: {', '.join(known)})" if known else ""), USAGE
        ) from None
    if args.json:
        print(json.dumps(asdict(config), indent=2))
        return 0
    out = PrintableLines(sys.stdout)  # what the stack's outputs say, escaped: one line each, no terminal control
    out.write(f"# Message Gateway of vendor {config.vendor} on {stack} ({config.region})\n")
    out.write(f"export RDSS_GATEWAY_URL='{config.url}'\n")
    out.write(f"# application (its consumer group): Gateway(url, application={config.application!r}),\n")
    out.write(f"#   or rdss send/tail/request --application {config.application}\n")
    out.write(f"# role {config.role_arn}, assumed with external ID {config.external_id}\n")
    for kind, channels in (("writes", config.writes), ("reads", config.reads)):
        listed = ", ".join(f"{channel} ({stream})" for channel, stream in channels.items()) or "nothing"
        out.write(f"# {kind}: {listed}\n")
    tenant = "" if config.tenant_jisc_id is None else f", tenant_jisc_id={config.tenant_jisc_id}"
    out.write(f"# reads Message API {config.version}: Gateway(url, ..., reads={config.version!r}{tenant}),\n")
    out.write(f"#   or rdss tail/request --reads {config.version}\n")
    out.write(f"# Local Data Repository: ldr={config.ldr}\n")
    out.write("#   outside AWS a SQLite file on the gateway's host (the default); a gateway running in AWS names\n")
    out.write("#   a DynamoDB table of the vendor's own (--ldr dynamodb://TABLE; partition key messageId, TTL\n")
    out.write("#   attribute expiresAt), reached with the vendor's own credentials, not with this role\n")
    return 0
