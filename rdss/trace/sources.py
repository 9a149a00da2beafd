"""What ``rdss trace`` reads a deployment from: its channels (Kinesis), its tables (DynamoDB),
its archives (S3) and the applications' own Local Data Repositories. The timeline is built from
these by :mod:`rdss.trace.findings`; :class:`rdss.trace.tracer.Tracer` is the trace over them."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError

from rdss.archive import entries as archive_entries
from rdss.deployment.topology import Deployment
from rdss.model import timestamps
from rdss.repository.entries import Repository
from rdss.trace.timeline import Record

#: How far before an anchor moment the archives are listed (Firehose buffers up to 15 minutes;
#: a producer's clock may run late) and how far after.
ARCHIVE_BEFORE = timedelta(hours=1)
ARCHIVE_AFTER = timedelta(hours=2)
#: Without --since and without any anchor, the last day is searched.
DEFAULT_WINDOW = timedelta(hours=24)


@dataclass(frozen=True)
class Archived:
    """One archive entry, and where it lies."""

    #: ``audit`` or ``errors``
    archive: str
    bucket: str
    key: str
    #: When its object was written.
    written: datetime | None
    #: Its place in the object (1: the first entry).
    line: int
    entry: archive_entries.Entry


class Sources:
    """One Kinesis deployment's sources, as the trace reads them."""

    def __init__(
        self,
        deployment: Deployment,
        *,
        kinesis: Any,
        dynamodb: Any,
        s3: Any,
        buckets: Mapping[str, str] | None = None,
        repositories: Mapping[str, Repository] | None = None,
        now: datetime | None = None,
    ) -> None:
        """
        Args:
            repositories: application -> its Local Data Repository, whose entries for the
                message join the timeline.
        """
        self.deployment = deployment
        self.kinesis = kinesis
        self.dynamodb = dynamodb
        self.s3 = s3
        self.buckets = {name: deployment.bucket(name) for name in ("audit", "errors")} | dict(buckets or {})
        self.repositories = dict(repositories or {})
        self.now = now or timestamps.now()

    def read(self, channel: str, start: datetime) -> Iterator[Record]:
        """Every record of ``channel`` that arrived from ``start`` on (none if the stream is gone)."""
        stream = self.deployment.stream(channel)
        try:
            shards = self.kinesis.list_shards(StreamName=stream)["Shards"]
        except ClientError:
            return
        for shard in shards:
            iterator = self.kinesis.get_shard_iterator(
                StreamName=stream, ShardId=shard["ShardId"], ShardIteratorType="AT_TIMESTAMP", Timestamp=start
            )["ShardIterator"]
            while iterator:
                response = self.kinesis.get_records(ShardIterator=iterator, Limit=10_000)
                for r in response["Records"]:
                    arrival = r.get("ApproximateArrivalTimestamp")
                    arrived = arrival.astimezone(UTC) if isinstance(arrival, datetime) else None
                    yield Record(
                        channel, shard["ShardId"], r["SequenceNumber"], arrived, r["Data"], r.get("PartitionKey", "")
                    )
                if not response["Records"] and not response.get("MillisBehindLatest"):
                    break
                iterator = response.get("NextShardIterator")

    def keys(self, bucket: str, prefix: str) -> list[tuple[str, datetime | None]]:
        """The objects under one hour prefix, and when each was written."""
        keys: list[tuple[str, datetime | None]] = []
        try:
            for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
                for entry in page.get("Contents", []):
                    written = entry.get("LastModified")
                    keys.append((entry["Key"], written.astimezone(UTC) if isinstance(written, datetime) else None))
        except ClientError:
            return []
        return keys

    def archive_entries(self, window: tuple[datetime, datetime]) -> Iterator[Archived]:
        """Every entry of the audit and errors archives under the hour prefixes of ``window``;
        an object that cannot be read is passed over (the trace shows what can be read)."""
        for kind, base in (("audit", "audit/"), ("errors", "errors/")):
            bucket = self.buckets[kind]
            for prefix in hour_prefixes(base, *window, errors=kind == "errors"):
                for key, written in self.keys(bucket, prefix):
                    try:
                        entries = archive_entries.read(self.s3.get_object(Bucket=bucket, Key=key)["Body"].read())
                    except (ClientError, OSError, EOFError):
                        continue
                    for number, entry in enumerate(entries, 1):
                        yield Archived(kind, bucket, key, written, number, entry)


def hour_prefixes(base: str, start: datetime, end: datetime, *, errors: bool) -> list[str]:
    """The hour prefixes from ``start`` to ``end`` (for errors: under invalid/ and error/)."""
    bases = [f"{base}invalid/", f"{base}error/"] if errors else [base]
    hour = start.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    prefixes: list[str] = []
    while hour <= end:
        prefixes.extend(archive_entries.hour_prefix(b, hour) for b in bases)
        hour += timedelta(hours=1)
    return prefixes
