"""``rdss archive [--url URL] --to DIR|s3://BUCKET[/PREFIX]``: the Audit Log where there is no Firehose.

Exit codes: 0 stopped (interrupted, idle, or the count reached); 2 usage, or the messaging system
or the target unreachable at start.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from threading import Event
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from rdss.aws.failures import aws_code
from rdss.cli.common import (
    CommandError,
    configure_service_logging,
    deployment_url,
    file_name,
    number,
    run_service,
    seconds,
    unreachable_is_usage,
)
from rdss.cli.options import add_consumer_group_option, add_number_option, add_service_options, deployment_command

if TYPE_CHECKING:
    from rdss.gateway.wiretap import ArchiverStats


def register(commands: Any) -> None:
    archive = deployment_command(
        commands,
        "archive",
        run_archive,
        help="archive every message of a messaging system (Kinesis, RabbitMQ, memory) to a directory or S3",
    )
    archive.add_argument("--to", dest="target", required=True, metavar="DIR|s3://BUCKET[/PREFIX]", type=file_name)
    add_consumer_group_option(archive, "audit", "the consumer group of the Wire Tap")
    add_number_option(
        archive, "--buffer-seconds", seconds(0, 3600), default=60.0, metavar="S", help="write at least every S s"
    )
    add_number_option(
        archive, "--buffer-mb", number(0, 1024, what="MiB"), default=5.0, help="or when N MiB are buffered"
    )
    add_service_options(archive, idle="without a message")


def run_archive(args: argparse.Namespace) -> int:
    """Read every message dispatched in the messaging system --url names (else $RDSS_GATEWAY_URL, else the running
    local runtime's: kinesis://ENV, amqp://user:password@host/%2F or memory://NAME) from its input channel, under the
    consumer group GROUP (on Kinesis the input stream, read as any consumer group reads it; on RabbitMQ a Wire Tap
    queue of each messageType, bound to both exchanges), and write objects of gzip members of archive entries (each
    record's exact bytes and identity) under audit/year=/month=/day=/hour=/ to a directory or an S3 bucket: what the
    archiver writes through Firehose in a deployment, read by the same readers - where there is no Firehose
    (RabbitMQ, memory), or for a copy of a Kinesis deployment's audit archive elsewhere (on this machine, say).
    Start it before traffic on RabbitMQ: like every consumer group, its queues exist from its first start.
    """
    from rdss.gateway import Gateway
    from rdss.gateway.wiretap import Archiver, S3Sink, open_sink

    configure_service_logging(args, f"rdss-archive-{args.group}")
    try:
        if not args.target.startswith("s3://"):
            Path(args.target).mkdir(parents=True, exist_ok=True)  # a directory it cannot write: say so now
        sink = open_sink(args.target)
        if isinstance(sink, S3Sink):  # a bucket it cannot reach: say so now, not at the first write
            _reachable(sink)
    except OSError as error:
        raise CommandError(f"--to {args.target}: {error.strerror or error}") from error
    except (ValueError, BotoCoreError, ClientError) as error:
        raise CommandError(f"--to {args.target}: {error}") from error
    url = deployment_url(args.url)
    with unreachable_is_usage():
        gateway = Gateway(url, application=args.group)
    with gateway:
        with unreachable_is_usage():
            archiver = Archiver(
                gateway.transport,
                sink,
                group=args.group,
                buffer_bytes=int(args.buffer_mb * 1024 * 1024),
                buffer_seconds=args.buffer_seconds,
            )

        def archive(stop: Event) -> ArchiverStats:
            try:
                return archiver.run(stop=stop, idle_timeout=args.idle, max_records=args.count)
            except (ClientError, BotoCoreError, OSError) as error:
                raise CommandError(f"cannot write to {sink}: {error}") from error

        return run_service(
            args,
            f"archiving every message of {url} to {sink}",
            archive,
            lambda stats: f"archived {stats.records} record(s) in {stats.objects} object(s)",
        )


def _reachable(sink: Any) -> None:
    """Raises what HeadBucket raises for a bucket that is not there, or no credentials or endpoint;
    a refusal (403) is not fatal: a role may put objects without the right to look at the bucket."""
    try:
        sink.s3.head_bucket(Bucket=sink.bucket)
    except ClientError as error:
        if aws_code(error) not in ("403", "AccessDenied", "Forbidden"):
            raise
