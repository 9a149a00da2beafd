"""Vendor roles (cdk.json ``vendors``): exactly the permissions the topology gives a producer and
a consumer, nothing on the broker's state, another channel or another group's checkpoints. A
producer puts records on ``input`` only; a consumer on ``invalid`` and ``error`` only (its moves,
put there by itself as the spec has receivers do); neither on a routed channel or ``sequence``."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from rdss.cli import main
from rdss.deployment.topology import RDSS
from stacks.config import ConfigError, load
from tests.cdk.conftest import CONTEXT, Synthesized
from tests.cdk.support import references

RDSS_CONTEXT = CONTEXT["rdss"]
PRODUCER, CONSUMER = "eprints-repository", "archivematica-preservation"
REGION = "eu-west-2"


def _role(prod: Synthesized, vendor: str) -> str:
    return prod.logical_id(prod.stack.vendors.roles[vendor].role)


def _policy(prod: Synthesized, vendor: str) -> list[dict[str, Any]]:
    """The statements of every identity policy attached to the vendor's role."""
    role = _role(prod, vendor)
    statements = []
    for resource in prod.json["Resources"].values():
        if resource["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy") and {"Ref": role} in resource[
            "Properties"
        ].get("Roles", []):
            statements.extend(resource["Properties"]["PolicyDocument"]["Statement"])
    assert "Policies" not in prod.json["Resources"][role]["Properties"]
    return statements


def _arn(prod: Synthesized, construct: Any) -> dict[str, Any]:
    return {"Fn::GetAtt": [prod.logical_id(construct), "Arn"]}


def _expected(
    prod: Synthesized, *, reads: list[str], group: str, produces: bool = False, moves: bool = False
) -> list[dict[str, Any]]:
    """The statements a vendor producing (``input``), moving (``invalid``, ``error``) and reading
    ``reads`` must have, spelt out."""
    messaging = prod.stack.messaging
    key = _arn(prod, messaging.data_key.key)

    def stream(channel: str) -> dict[str, Any]:
        return _arn(prod, messaging.channels.stream(channel))

    def one(values: list[Any]) -> Any:
        return values[0] if len(values) == 1 else values

    kinesis, dynamodb = f"kinesis.{REGION}.amazonaws.com", f"dynamodb.{REGION}.amazonaws.com"
    statements: list[dict[str, Any]] = []
    for wanted, writes, put, encrypt in (
        (produces, ["input"], "PutRecordsOnInput", "EncryptRecordsForInput"),
        (moves, ["invalid", "error"], "MoveRecordsToInvalidAndError", "EncryptMovedRecords"),
    ):
        if not wanted:
            continue
        statements += [
            {
                "Sid": put,
                "Effect": "Allow",
                "Action": ["kinesis:PutRecord", "kinesis:PutRecords"],
                "Resource": one([stream(c) for c in writes]),
            },
            {
                "Sid": encrypt,
                "Effect": "Allow",
                "Action": "kms:GenerateDataKey",
                "Resource": key,
                "Condition": {
                    "StringEquals": {
                        "kms:ViaService": kinesis,
                        "kms:EncryptionContext:aws:kinesis:arn": one([stream(c) for c in writes]),
                    }
                },
            },
        ]
    statements += [
        {
            "Sid": "ReadChannels",
            "Effect": "Allow",
            "Action": ["kinesis:GetRecords", "kinesis:GetShardIterator", "kinesis:ListShards"],
            "Resource": one([stream(c) for c in reads]),
        },
        {
            "Sid": "DecryptChannelRecords",
            "Effect": "Allow",
            "Action": "kms:Decrypt",
            "Resource": key,
            "Condition": {
                "StringEquals": {
                    "kms:ViaService": kinesis,
                    "kms:EncryptionContext:aws:kinesis:arn": one([stream(c) for c in reads]),
                }
            },
        },
        {
            "Sid": "OwnGroupCheckpoints",
            "Effect": "Allow",
            "Action": ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query", "dynamodb:UpdateItem"],
            "Resource": _arn(prod, messaging.state.table("checkpoints")),
            "Condition": {
                "ForAllValues:StringEquals": {"dynamodb:LeadingKeys": [f"{group}#rdss-prod-{c}" for c in reads]},
                "Null": {"dynamodb:LeadingKeys": "false"},
            },
        },
        {
            "Sid": "CheckpointsTableKey",
            "Effect": "Allow",
            "Action": ["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey"],
            "Resource": key,
            "Condition": {
                "StringEquals": {
                    "kms:ViaService": dynamodb,
                    "kms:EncryptionContext:aws:dynamodb:tableName": "rdss-prod-checkpoints",
                }
            },
        },
        {
            "Sid": "DescribeKeyThroughDynamoDB",
            "Effect": "Allow",
            "Action": "kms:DescribeKey",
            "Resource": key,
            "Condition": {"StringEquals": {"kms:ViaService": dynamodb}},
        },
    ]
    return statements


def _by_sid(statements: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Statements by Sid, with lists of resources in a canonical order (the CDK sorts them)."""
    return {s["Sid"]: _unordered(s) for s in statements}


def _unordered(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _unordered(v) for k, v in value.items()}
    if isinstance(value, list):
        return sorted((_unordered(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True))
    return value


def test_the_producer_may_put_on_input_and_read_responses_only(prod: Synthesized) -> None:
    expected = _expected(prod, produces=True, reads=["responses"], group=PRODUCER)
    assert _by_sid(_policy(prod, PRODUCER)) == _by_sid(expected)


def test_the_consumer_may_read_metadata_and_responses_and_move_to_invalid_and_error_only(prod: Synthesized) -> None:
    # it puts its moves (invalid, expired, poison, refused records) on invalid and error; not input
    expected = _expected(prod, moves=True, reads=["metadata", "responses"], group=CONSUMER)
    assert _by_sid(_policy(prod, CONSUMER)) == _by_sid(expected)


def _actions(statement: dict[str, Any]) -> list[str]:
    action = statement["Action"]
    return action if isinstance(action, list) else [action]


@pytest.mark.parametrize("vendor", [PRODUCER, CONSUMER])
def test_no_vendor_can_write_the_broker_state_another_channel_or_another_group(prod: Synthesized, vendor: str) -> None:
    messaging = prod.stack.messaging
    writable = {prod.logical_id(messaging.channels.stream(c)) for c in ("input", "invalid", "error")}
    routed = {prod.logical_id(messaging.channels.stream(c.name)) for c in RDSS.channels_of("routed")}
    checkpoints = prod.logical_id(messaging.state.table("checkpoints"))
    other_tables = {prod.logical_id(t) for name, t in messaging.state.tables.items() if name != "checkpoints"}
    # the broker's Local Data Repository and the sequencer's state are among them, by name
    broker_state = {prod.logical_id(messaging.state.table(name)) for name in ("messages", "sequences")}
    assert broker_state <= other_tables
    sequence = {prod.logical_id(messaging.channels.stream("sequence"))}
    buckets = {prod.logical_id(b) for b in messaging.buckets.values()}
    for statement in _policy(prod, vendor):
        assert statement["Effect"] == "Allow"
        referenced = references(statement["Resource"])
        actions = _actions(statement)
        # nothing on the messages or sequences tables, nor any bucket, by any action; the
        # sequence channel not at all
        assert not referenced & (other_tables | buckets | sequence), statement
        assert "-messages" not in json.dumps(statement), statement
        assert "-sequences" not in json.dumps(statement), statement
        # no wildcard, in actions or resources
        assert all("*" not in a for a in actions), statement
        assert "*" not in json.dumps(statement["Resource"]), statement
        if any(a in ("kinesis:PutRecord", "kinesis:PutRecords") for a in actions):
            # input (a producer's messages), invalid and error (a consumer's moves); no routed channel
            assert referenced, statement
            assert referenced <= writable, statement
            assert not referenced & routed, statement
        if any(a.startswith("dynamodb:") for a in actions):
            assert referenced == {checkpoints}, statement
            leading = statement["Condition"]["ForAllValues:StringEquals"]["dynamodb:LeadingKeys"]
            assert leading, statement
            assert all(k.startswith(f"{vendor}#") for k in leading), leading
            assert statement["Condition"]["Null"] == {"dynamodb:LeadingKeys": "false"}
        if any(a.startswith("kms:") for a in actions):
            # the key only through Kinesis or DynamoDB, never to decrypt anything directly
            assert statement["Condition"]["StringEquals"]["kms:ViaService"] in (
                f"kinesis.{REGION}.amazonaws.com",
                f"dynamodb.{REGION}.amazonaws.com",
            ), statement


def test_roles_trust_only_the_vendor_with_its_external_id(prod: Synthesized) -> None:
    expected = {
        PRODUCER: ("arn:aws:iam::111122223333:root", "eprints"),  # an account: any principal it allows
        CONSUMER: ("arn:aws:iam::444455556666:role/rdss-gateway", "archivematica"),
    }
    for vendor, (principal, external_id_part) in expected.items():
        role = prod.json["Resources"][_role(prod, vendor)]["Properties"]
        assert role["RoleName"] == f"rdss-prod-vendor-{vendor}"
        assert role["MaxSessionDuration"] == 3600
        (statement,) = role["AssumeRolePolicyDocument"]["Statement"]
        assert statement["Action"] == "sts:AssumeRole"
        assert statement["Principal"] == {"AWS": principal}
        external_id = statement["Condition"]["StringEquals"]["sts:ExternalId"]
        assert external_id_part in external_id
        assert "ManagedPolicyArns" not in role


def test_outputs_name_the_role_streams_and_region(prod: Synthesized) -> None:
    outputs = prod.json["Outputs"]
    assert outputs["VendorArchivematicaPreservationRoleArn"]["Value"] == _arn(
        prod, prod.stack.vendors.roles[CONSUMER].role
    )
    assert outputs["VendorArchivematicaPreservationReads"]["Value"] == "metadata,responses"
    assert outputs["VendorArchivematicaPreservationWrites"]["Value"] == "invalid,error"
    assert outputs["VendorArchivematicaPreservationErrorStreamArn"]["Value"] == _arn(
        prod, prod.stack.messaging.channels.stream("error")
    )
    assert "VendorArchivematicaPreservationInputStreamName" not in outputs
    assert outputs["VendorEprintsRepositoryWrites"]["Value"] == "input"
    assert outputs["VendorEprintsRepositoryInputStreamArn"]["Value"] == _arn(
        prod, prod.stack.messaging.channels.stream("input")
    )
    assert outputs["VendorEprintsRepositoryRegion"]["Value"] == REGION
    assert outputs["VendorArchivematicaPreservationVersion"]["Value"] == "3.0.2"  # cdk.json's reads, by default
    assert "VendorArchivematicaPreservationTenantJiscId" not in outputs  # prod declares no tenant_jisc_id
    assert "VendorEprintsRepositoryMetadataStreamName" not in outputs
    assert not {k for k in outputs if k.startswith("Vendor")} - {
        f"Vendor{camel}{what}"
        for camel in ("EprintsRepository", "ArchivematicaPreservation")
        for what in (
            "RoleArn",
            "ExternalId",
            "Region",
            "Group",
            "Writes",
            "Reads",
            "Version",
            "InputStreamName",
            "InputStreamArn",
            "InvalidStreamName",
            "InvalidStreamArn",
            "ErrorStreamName",
            "ErrorStreamArn",
            "MetadataStreamName",
            "MetadataStreamArn",
            "ResponsesStreamName",
            "ResponsesStreamArn",
        )
    }


def test_environments_without_vendors_have_no_vendor_roles(dev: Synthesized) -> None:
    assert dev.stack.vendors.roles == {}
    assert not [k for k in dev.json.get("Outputs", {}) if k.startswith("Vendor")]


def test_vendor_config_reads_the_synthesised_template(prod: Synthesized, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["vendor", "config", CONSUMER, "--url", "kinesis://prod", "--cdk-out", str(prod.outdir), "--json"]
    assert main(argv) == 2  # environment-agnostic: the account is not in the template
    assert "--account" in capsys.readouterr().err
    assert main([*argv, "--account", "123456789012"]) == 0
    config = json.loads(capsys.readouterr().out)
    role = "arn:aws:iam::123456789012:role/rdss-prod-vendor-archivematica-preservation"
    assert config == {
        "vendor": CONSUMER,
        "environment": "prod",
        "url": f"kinesis://prod?region={REGION}&role={role}&external_id=rdss-prod-archivematica-93a4f2e8"
        "&ldr=sqlite://~/.local/state/rdss/kinesis-rdss-prod.sqlite",
        "application": CONSUMER,
        "role_arn": role,
        "external_id": "rdss-prod-archivematica-93a4f2e8",
        "region": REGION,
        "writes": {"invalid": "rdss-prod-invalid", "error": "rdss-prod-error"},
        "reads": {"metadata": "rdss-prod-metadata", "responses": "rdss-prod-responses"},
        "ldr": "sqlite://~/.local/state/rdss/kinesis-rdss-prod.sqlite",
        "version": "3.0.2",
        "tenant_jisc_id": None,
    }
    # a gateway in AWS names a table of the vendor's own; the deployment's tables are refused
    assert main([*argv, "--account", "123456789012", "--ldr", "dynamodb://archivematica-ldr"]) == 0
    config = json.loads(capsys.readouterr().out)
    assert (config["ldr"], config["url"].endswith("&ldr=dynamodb://archivematica-ldr")) == (
        "dynamodb://archivematica-ldr",
        True,
    )
    assert main([*argv, "--account", "123456789012", "--ldr", "dynamodb://rdss-prod-messages"]) == 2
    assert "the deployment's" in capsys.readouterr().err
    assert main([*argv, "--account", "123456789012", "--ldr", "memory://"]) == 2
    assert "dynamodb://TABLE" in capsys.readouterr().err
    assert (
        main(
            [
                "vendor",
                "config",
                "nobody",
                "--url",
                "kinesis://prod",
                "--cdk-out",
                str(prod.outdir),
                "--account",
                "1" * 12,
            ]
        )
        == 2
    )
    # the vendors named as vendor config takes them, not as the template's output keys spell them
    assert "(its vendors: archivematica-preservation, eprints-repository)" in capsys.readouterr().err


def _with_vendor(**vendor: Any) -> dict[str, Any]:
    context = copy.deepcopy(RDSS_CONTEXT)
    context["environments"]["dev"]["vendors"] = {"acme": vendor}
    return context


@pytest.mark.parametrize(
    ("vendor", "error"),
    [
        ({"principal": "1234", "external_id": "abcdef", "produces": True}, "principal"),
        ({"principal": "123456789012", "external_id": "a", "produces": True}, "external_id"),
        ({"principal": "123456789012", "external_id": "abcdef", "produces": "yes"}, "produces"),
        ({"principal": "123456789012", "external_id": "abcdef", "consumes": ["error"]}, "consumes"),
        ({"principal": "123456789012", "external_id": "abcdef", "consumes": ["input"]}, "consumes"),
        ({"principal": "123456789012", "external_id": "abcdef"}, "neither produces nor consumes"),
        ({"principal": "123456789012", "external_id": "abcdef", "produce": True}, "produce"),
    ],
)
def test_malformed_vendors_fail_with_the_key_named(vendor: dict[str, Any], error: str) -> None:
    with pytest.raises(ConfigError, match=error):
        load(_with_vendor(**vendor), "dev", environ={})


def test_vendor_names_and_principals_are_checked() -> None:
    context = copy.deepcopy(RDSS_CONTEXT)
    context["environments"]["dev"]["vendors"] = {"Acme_Corp": {"principal": "123456789012", "external_id": "abcdef"}}
    with pytest.raises(ConfigError, match="vendor name"):
        load(context, "dev", environ={})
    good = load(
        _with_vendor(principal="arn:aws:iam::123456789012:role/gw", external_id="abc-123", consumes=["metadata"]),
        "dev",
        environ={},
    )
    assert good.vendors["acme"].consumes == ("metadata",)
    assert good.vendors["acme"].account == "123456789012"
