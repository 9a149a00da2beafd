"""A local Firehose delivery stream: Kinesis source, S3 destination, written the way Firehose
writes (see :mod:`rdss.archive`).

Records are buffered in arrival order and delivered as one gzip object per buffer, each record
followed by a newline, under the hour prefix of the oldest record's arrival time. A buffer is
delivered when it reaches ``buffer_bytes`` or is ``buffer_seconds`` old - Firehose's size and
interval hints - or when the runtime drains.
"""

from __future__ import annotations

import time
from collections.abc import Callable, MutableMapping
from dataclasses import KW_ONLY, dataclass, field
from datetime import UTC, datetime
from typing import Any

from rdss import archive


@dataclass(eq=False)
class FirehoseBridge:
    """One delivery stream: a Kinesis stream's records into gzip objects under ``prefix``."""

    kinesis: Any
    s3: Any
    _: KW_ONLY
    stream: str
    bucket: str
    prefix: str
    delivery_stream: str
    buffer_bytes: int = 5 * 1024 * 1024
    buffer_seconds: float = 60.0
    #: shard -> the last sequence number delivered (kept by the runtime across restarts).
    checkpoints: MutableMapping[str, str] = field(default_factory=dict)
    clock: Callable[[], float] = time.time
    objects_written: int = field(default=0, init=False)
    records_written: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self._buffer: list[bytes] = []
        self._buffered_bytes = 0
        self._oldest: datetime | None = None
        self._opened_at = 0.0
        self._pending_checkpoints: dict[str, str] = {}

    def poll(self) -> int:
        """Read what arrived on every shard into the buffer; deliver it if due. Returns records read."""
        read = 0
        for shard in self._shards():
            read += self._read_shard(shard)
        if self._buffer and (
            self._buffered_bytes >= self.buffer_bytes or self.clock() - self._opened_at >= self.buffer_seconds
        ):
            self.flush()
        return read

    def flush(self) -> None:
        """Deliver the buffer now (one object), then commit the positions it covered."""
        if not self._buffer:
            return
        moment = self._oldest or datetime.now(UTC)
        key = archive.object_key(self.prefix, moment, self.delivery_stream)
        self.s3.put_object(Bucket=self.bucket, Key=key, Body=archive.encode(self._buffer))
        self.objects_written += 1
        self.records_written += len(self._buffer)
        # positions advance only once the records are durable in S3, so a crash re-reads them
        self.checkpoints.update(self._pending_checkpoints)
        self._pending_checkpoints.clear()
        self._buffer, self._buffered_bytes, self._oldest = [], 0, None

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    def _shards(self) -> list[str]:
        return [s["ShardId"] for s in self.kinesis.list_shards(StreamName=self.stream)["Shards"]]

    def _read_shard(self, shard: str) -> int:
        position = self._pending_checkpoints.get(shard) or self.checkpoints.get(shard)
        kwargs: dict[str, Any] = {"StreamName": self.stream, "ShardId": shard}
        if position is None:
            kwargs["ShardIteratorType"] = "TRIM_HORIZON"
        else:
            kwargs.update(ShardIteratorType="AFTER_SEQUENCE_NUMBER", StartingSequenceNumber=position)
        iterator = self.kinesis.get_shard_iterator(**kwargs)["ShardIterator"]
        read = 0
        while iterator:
            response = self.kinesis.get_records(ShardIterator=iterator, Limit=1000)
            records = response["Records"]
            if not records:
                break
            for record in records:
                if not self._buffer:
                    self._opened_at = self.clock()
                arrival = record.get("ApproximateArrivalTimestamp")
                if self._oldest is None and isinstance(arrival, datetime):
                    self._oldest = arrival
                self._buffer.append(record["Data"])
                self._buffered_bytes += len(record["Data"])
            self._pending_checkpoints[shard] = records[-1]["SequenceNumber"]
            read += len(records)
            iterator = response.get("NextShardIterator")
        return read
