"""What ``rdss trace`` reads a deployment from: its channels (Kinesis), its tables (DynamoDB),
its archives (S3) and the applications' own Local Data Repositories. The timeline is built from
these by :mod:`rdss.trace.findings`; :class:`rdss.trace.tracer.Tracer` is the trace over them."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError

from rdss.archive.listing import Archived, ArchiveListing, hour_prefixes
from rdss.deployment.topology import Deployment
from rdss.model import timestamps
from rdss.repository.entries import Repository
from rdss.trace.timeline import Record

__all__ = ["ARCHIVE_AFTER", "ARCHIVE_BEFORE", "DEFAULT_WINDOW", "Archived", "Sources", "hour_prefixes"]

#: How far before an anchor moment the archives are listed (Firehose buffers up to 15 minutes;
#: a producer's clock may run late) and how far after.
ARCHIVE_BEFORE = timedelta(hours=1)
ARCHIVE_AFTER = timedelta(hours=2)
#: Without --since and without any anchor, the last day is searched.
DEFAULT_WINDOW = timedelta(hours=24)


class Sources:
    """One Kinesis deployment's sources, as the trace reads them."""

    def __init__(
        self,
        deployment: Deployment,
        client: Callable[[str], Any],
        *,
        repositories: Mapping[str, Repository] | None = None,
        now: datetime | None = None,
    ) -> None:
        """
        Args:
            deployment: its names, the archives' buckets among them (``Deployment.bucket``).
            client: service name -> boto3 client (kinesis, dynamodb and s3 are made at once).
            repositories: application -> its Local Data Repository, whose entries for the
                message join the timeline.
        """
        self.deployment = deployment
        self.kinesis = client("kinesis")
        self.dynamodb = client("dynamodb")
        self.s3 = client("s3")
        self.listing = ArchiveListing.of(deployment, self.s3)
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
        return self.listing.keys(bucket, prefix)

    def archive_entries(self, window: tuple[datetime, datetime]) -> Iterator[Archived]:
        """Every entry of the audit and errors archives under the hour prefixes of ``window``;
        an object that cannot be read is passed over (the trace shows what can be read)."""
        return self.listing.entries(window)
