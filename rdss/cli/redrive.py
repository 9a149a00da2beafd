"""``rdss redrive``: put the batches the processors' event source mappings parked back on their channel."""

from __future__ import annotations

import argparse
from typing import Any

from rdss.cli.common import INVALID, AwsDeployment, CommandError, aws_deployment, aws_failures_are_usage
from rdss.cli.options import deployment_command
from rdss.deployment.topology import RDSS, Deployment
from rdss.host.display import printable


def register(commands: Any) -> None:
    parser = deployment_command(
        commands, "redrive", run, help="put the batches Lambda parked in the on-failure queues back on their channel"
    )
    parser.add_argument(
        "--processor",
        action="append",
        choices=[p.name for p in RDSS.processors if p.sources],
        help="only this processor's queue (repeatable; default: all)",
    )
    parser.add_argument("--dry-run", action="store_true", help="list what would be redriven; change nothing")


def run(args: argparse.Namespace) -> int:
    """Reads each processor's SQS on-failure queue, fetches the records each pointer names from its stream (or, past
    the stream's retention, the audit archive), puts them back on their channel (the archiver's: archives them) and
    deletes the pointer once they are accepted. A record goes back as a new record: what its first delivery left in
    the broker's claims is settled first (rdss.processors.redrive_claims). Repeating it is harmless: a record put back
    is noted, the broker de-duplicates, readers of the archive count a record once. Exit 1 when anything could not be
    recovered.
    """
    from rdss.processors.redrive import Redriver

    target = aws_deployment(args.url, "redrive")
    try:
        with aws_failures_are_usage():
            deployment = deployment_names(target)
            redriver = Redriver(
                deployment,
                sqs=target.client("sqs"),
                kinesis=target.client("kinesis"),
                s3=target.client("s3"),
                dynamodb=target.client("dynamodb"),
                firehose=target.client("firehose"),
            )
            report = redriver.run(args.processor, dry_run=args.dry_run)
    except LookupError as error:
        raise CommandError(str(error.args[0])) from error
    for line in report.lines():
        print(printable(line))
    return 0 if report.ok else INVALID


def deployment_names(target: AwsDeployment) -> Deployment:
    """The deployment's names, its buckets' as its functions were told (CloudFormation names
    them on AWS; rdss.processors.redrive.deployed_names, which the console reads them with too)."""
    from rdss.processors.redrive import deployed_names

    return deployed_names(target.deployment, target.client("lambda"))
