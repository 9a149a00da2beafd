"""``rdss trace MESSAGE_ID``: where a message went, from what the deployment keeps.

Exit codes: 0 something was found; 1 nothing was found; 2 usage, or the deployment unreachable.
"""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from botocore.exceptions import BotoCoreError, ClientError

from rdss.cli.common import INVALID, USAGE, AwsDeployment, CommandError, aws_deployment, print_json
from rdss.cli.options import add_json_option, deployment_command
from rdss.host.display import printable
from rdss.model import timestamps

if TYPE_CHECKING:
    from rdss.deployment.topology import Deployment


def register(commands: Any) -> None:
    trace = deployment_command(
        commands, "trace", run_trace, help="where did a message go: its timeline, from the deployment"
    )
    trace.add_argument(
        "message_id",
        metavar="MESSAGE_ID",
        help="a messageId, or one input record as SHARD/SEQUENCE (shardId-000000000000/4960...: the streamRecords "
        "rdss local demo reports, the identity the archive keeps), for a record no messageId names",
    )
    trace.add_argument(
        "--since",
        metavar="T",
        help="RFC 3339: read the channels from then and the archives around then (default: the last 24 hours)",
    )
    add_json_option(trace, "one JSON object instead of the timeline")
    trace.add_argument(
        "--application",
        action="append",
        default=[],
        metavar="NAME",
        help="also show this application's entries in its own Local Data Repository (repeatable; see --ldr)",
    )
    trace.add_argument(
        "--ldr",
        action="append",
        default=[],
        metavar="URL",
        help="where the --application entries are kept, as the gateway's ldr=: dynamodb://TABLE, "
        "sqlite:///path; one for all applications, or one per --application in order (default: the URL's "
        "ldr=, else the gateway's SQLite file on this host)",
    )
    trace.add_argument(
        "--audit-bucket", metavar="NAME", help="default: from the broker function, else rdss-<env>-audit"
    )
    trace.add_argument(
        "--errors-bucket", metavar="NAME", help="default: from the broker function, else rdss-<env>-errors"
    )


def run_trace(args: argparse.Namespace) -> int:
    """Follow MESSAGE_ID through a Kinesis deployment: the records on its channels (input, the
    routed channels, sequence, invalid, error), the broker's claims, the applications' own Local
    Data Repositories (--application, --ldr), the sequence it is part of, and the audit and errors
    archive objects that hold it (listed by the hour prefixes around when it entered). Exit 1 if
    nothing is found."""
    from rdss.trace.tracer import Tracer

    target = aws_deployment(args.url, "trace")
    url, deployment = target.url, target.deployment
    try:
        since = timestamps.parse(args.since) if args.since else None
    except ValueError as error:
        raise CommandError(f"--since: {error}") from error
    try:
        tracer = Tracer(_named(args, target), target.client)
        # after the deployment's clients: a client that cannot be made is the first thing said
        tracer.repositories = _repositories(args, url, deployment, lambda: target.client("dynamodb"))
        timeline = tracer.trace(args.message_id, since=since)
    except ClientError as error:
        details = error.response.get("Error", {})
        raise CommandError(f"{details.get('Code', 'error')}: {details.get('Message', error)}", USAGE) from error
    except BotoCoreError as error:
        raise CommandError(str(error), USAGE) from error
    if args.json:
        print_json(timeline.as_dict(), indent=True)
    else:
        # each line escaped at the printing edge: a generator holding a newline must not forge a
        # line of the timeline, nor an ANSI escape in a message reach the terminal
        print("\n".join(printable(line) for line in timeline.lines()))
    return 0 if timeline.found else INVALID


def _named(args: argparse.Namespace, target: AwsDeployment) -> Deployment:
    """The deployment, its archives in the buckets --audit-bucket and --errors-bucket name; else
    in those the deployed broker was told (:func:`rdss.processors.redrive.deployed_names`:
    CloudFormation names the buckets in AWS); else the local runtime's."""
    from rdss.processors.redrive import deployed_names

    given = {name: value for name, value in (("audit", args.audit_bucket), ("errors", args.errors_bucket)) if value}
    deployment = target.deployment
    if len(given) < 2:
        with contextlib.suppress(BotoCoreError):  # no client can be made: the trace's own clients say why
            deployment = deployed_names(deployment, target.client("lambda"))
    return deployment._replace(bucket_names={**deployment.bucket_names, **given})


def _repositories(args: argparse.Namespace, url: Any, deployment: Any, dynamodb: Any) -> dict[str, Any]:
    """application -> its Local Data Repository (``--application`` with ``--ldr``): each
    gateway keeps its entries in a store of its own, never in the deployment's tables."""
    from rdss.gateway.backend import state_directory
    from rdss.repository.stores import open_repository

    applications: list[str] = args.application
    stores: list[str] = args.ldr
    if stores and not applications:
        raise CommandError("--ldr says where an --application's entries are: give --application too")
    if len(stores) > 1 and len(stores) != len(applications):
        raise CommandError(f"{len(stores)} --ldr for {len(applications)} --application: give one, or one each")
    if not stores:  # as the gateway itself chooses (rdss.gateway.log.kinesis)
        default = f"{state_directory()}/kinesis-{deployment.prefix}-{deployment.environment}.sqlite"
        stores = [url.param("ldr") or f"sqlite://{default}"]
    found = {}
    paired = stores * len(applications) if len(stores) == 1 else stores
    for application, store in zip(applications, paired, strict=True):
        if store.lower().startswith("sqlite:") and not _sqlite_path(store).exists():
            # reading must not create an empty store where the gateway never ran
            if args.ldr:
                raise CommandError(f"--ldr {store}: no such file")
            continue
        try:
            found[application] = open_repository(store, application, dynamodb=dynamodb)
        except ValueError as error:
            raise CommandError(f"--ldr: {error}") from error
    return found


def _sqlite_path(url: str) -> Path:
    parts = urlsplit(url)
    return Path(parts.netloc + parts.path).expanduser()
