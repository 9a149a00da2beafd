"""``rdss redrive``: put the batches the processors' event source mappings parked back on their channel."""

from __future__ import annotations

import argparse
import os
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from rdss.awserrors import describe
from rdss.cli.common import INVALID, CommandError, add_command
from rdss.display import printable
from rdss.topology import RDSS, Deployment


def register(commands: Any) -> None:
    parser = add_command(
        commands, "redrive", run, help="put the batches Lambda parked in the on-failure queues back on their channel"
    )
    parser.add_argument(
        "--env", default=os.environ.get("RDSS_ENV"), required="RDSS_ENV" not in os.environ, help="the deployment"
    )
    parser.add_argument("--prefix", default="rdss", help="resource name prefix (default rdss)")
    parser.add_argument(
        "--processor",
        action="append",
        choices=[p.name for p in RDSS.processors if p.sources],
        help="only this processor's queue (repeatable; default: all)",
    )
    parser.add_argument("--dry-run", action="store_true", help="list what would be redriven; change nothing")
    parser.add_argument("--endpoint", help="AWS endpoint URL (default: $AWS_ENDPOINT_URL, else AWS itself)")
    parser.add_argument("--region", help="AWS region (default: boto3's)")


def run(args: argparse.Namespace) -> int:
    """Reads each processor's SQS on-failure queue, fetches the records each pointer names from its stream (or, past
    the stream's retention, the audit archive), puts them back on their channel (the archiver's: archives them) and
    deletes the pointer once they are accepted. Repeating it is harmless: the broker de-duplicates, readers of the
    archive count a record once. Exit 1 when anything could not be recovered.
    """
    from rdss.aws import client
    from rdss.redrive import Redriver

    kwargs: dict[str, Any] = {}
    if args.endpoint:
        kwargs["endpoint_url"] = args.endpoint
    if args.region:
        kwargs["region_name"] = args.region

    def clients(service: str) -> Any:
        return client(service, **kwargs)

    try:
        deployment = _deployment(args.env, args.prefix, clients)
        redriver = Redriver(
            deployment,
            sqs=clients("sqs"),
            kinesis=clients("kinesis"),
            s3=clients("s3"),
            dynamodb=clients("dynamodb"),
            firehose=clients("firehose"),
        )
        report = redriver.run(args.processor, dry_run=args.dry_run)
    except LookupError as error:
        raise CommandError(str(error.args[0])) from error
    except (ClientError, BotoCoreError) as error:
        raise CommandError(describe(error)) from error
    for line in report.lines():
        print(printable(line))
    return 0 if report.ok else INVALID


def _deployment(environment: str, prefix: str, clients: Any) -> Deployment:
    """The deployment's names. CloudFormation names the buckets, so their names are read from a
    processor's configuration (the variables the functions get); without one (the embedded
    emulator) the topology's own names stand."""
    deployment = Deployment(environment, prefix=prefix)
    try:
        configuration = clients("lambda").get_function_configuration(FunctionName=deployment.function("broker"))
    except (ClientError, BotoCoreError):
        return deployment
    variables = (configuration.get("Environment") or {}).get("Variables") or {}
    buckets = {
        b.name: variables[f"RDSS_BUCKET_{b.name.upper()}"]
        for b in RDSS.buckets
        if f"RDSS_BUCKET_{b.name.upper()}" in variables
    }
    return Deployment(environment, prefix=prefix, bucket_names=buckets)
