"""Local Firehose delivery streams: Direct PUT, S3 destination, delivered the way Firehose does.

:class:`LocalFirehose` answers ``put_record_batch`` as the Firehose API does (``FailedPutCount``,
one ``RequestResponses`` entry per record), so the archiver app writes to it exactly as it
writes to Firehose in AWS. Each :class:`DeliveryStream` buffers the records it accepted and
delivers them as one object when the buffer reaches ``buffer_bytes`` or is ``buffer_seconds``
old (Firehose's buffering hints), or when the runtime drains: the records concatenated as they
came (no compression or delimiter of its own - each record is a gzip member, so an object is a
gzip file of several members), named as Firehose names objects (:func:`rdss.archive.entries.object_key`,
``.gz``), under the hour prefix of the oldest record's arrival.

What a delivery stream accepted survives the process: the buffer is kept in the destination
bucket, under ``.firehose/<delivery stream>/`` (outside every archive prefix), one object per
call, and a stream made again over the same bucket delivers what its predecessor left there.
So, as with Firehose, an acknowledged record is never lost, and a crash between delivering an
object and clearing its buffer delivers it twice (readers count an entry's identity once).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import KW_ONLY, dataclass, field
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from rdss.archive import entries as archive
from rdss.local import limits

#: Where a delivery stream keeps its buffer, in its destination bucket.
STAGING_PREFIX = ".firehose/"
#: Firehose's limits on a PutRecordBatch call and on one record (:mod:`rdss.local.limits` checks them all).
MAX_RECORDS_PER_CALL = limits.FIREHOSE_RECORDS
MAX_RECORD_BYTES = limits.FIREHOSE_RECORD


@dataclass
class _Staged:
    key: str
    size: int
    arrived: datetime
    records: int


@dataclass(eq=False)
class DeliveryStream:
    """One Direct PUT delivery stream to ``bucket`` under ``prefix`` (see the module)."""

    s3: Any
    _: KW_ONLY
    name: str
    bucket: str
    prefix: str
    buffer_bytes: int = 5 * 1024 * 1024
    buffer_seconds: float = 60.0
    clock: Callable[[], float] = time.time
    objects_written: int = field(default=0, init=False)
    records_written: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self._staging = f"{STAGING_PREFIX}{self.name}/"
        self._buffer: list[_Staged] = self._recover()
        self._opened_at = self.clock() if self._buffer else 0.0

    # -- the API ---------------------------------------------------------------------------------
    def put(self, records: list[bytes]) -> None:
        """Accept ``records`` (kept durably before this returns)."""
        if not records:
            return
        now = self.clock()
        # keys sort in arrival order (nanoseconds, then a random tail against ties) and count records
        key = f"{self._staging}{time.time_ns():020d}-{uuid.uuid4().hex}-{len(records)}"
        body = b"".join(records)
        self.s3.put_object(Bucket=self.bucket, Key=key, Body=body)
        if not self._buffer:
            self._opened_at = now
        self._buffer.append(_Staged(key, len(body), datetime.fromtimestamp(now, UTC), len(records)))

    # -- delivery --------------------------------------------------------------------------------
    def poll(self) -> int:
        """Deliver the buffer if it is due; returns the records delivered."""
        if self._buffer and (
            self.buffered_bytes >= self.buffer_bytes or self.clock() - self._opened_at >= self.buffer_seconds
        ):
            return self.flush()
        return 0

    def flush(self) -> int:
        """Deliver the buffer now, as one object; returns the records delivered."""
        if not self._buffer:
            return 0
        staged, self._buffer = self._buffer, []
        bodies = [self.s3.get_object(Bucket=self.bucket, Key=s.key)["Body"].read() for s in staged]
        key = archive.object_key(self.prefix, staged[0].arrived, self.name)
        self.s3.put_object(Bucket=self.bucket, Key=key, Body=b"".join(bodies))
        for start in range(0, len(staged), 1000):  # DeleteObjects takes 1,000 keys a call
            chunk = staged[start : start + 1000]
            self.s3.delete_objects(Bucket=self.bucket, Delete={"Objects": [{"Key": s.key} for s in chunk]})
        records = sum(s.records for s in staged)
        self.objects_written += 1
        self.records_written += records
        return records

    @property
    def buffered_bytes(self) -> int:
        return sum(s.size for s in self._buffer)

    @property
    def buffered(self) -> int:
        """Records accepted and not yet delivered."""
        return sum(s.records for s in self._buffer)

    def _recover(self) -> list[_Staged]:
        """What an earlier process accepted and did not deliver."""
        found = []
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=self._staging):
            for entry in page.get("Contents", []):
                modified = entry.get("LastModified")
                arrived = modified.astimezone(UTC) if isinstance(modified, datetime) else datetime.now(UTC)
                records = entry["Key"].rsplit("-", 1)[-1]
                found.append(
                    _Staged(entry["Key"], int(entry["Size"]), arrived, int(records) if records.isdigit() else 1)
                )
        return sorted(found, key=lambda s: s.key)


class LocalFirehose:
    """The Firehose API's ``put_record_batch`` over local :class:`DeliveryStream` objects."""

    def __init__(self, streams: Mapping[str, DeliveryStream]) -> None:
        self.streams = dict(streams)
        #: PutRecordBatch calls answered.
        self.calls = 0

    def put_record_batch(self, *, DeliveryStreamName: str, Records: list[dict[str, bytes]]) -> dict[str, Any]:
        self.calls += 1
        stream = self.streams.get(DeliveryStreamName)
        if stream is None:
            raise _error("ResourceNotFoundException", f"Firehose {DeliveryStreamName} not found")
        try:
            limits.firehose_batch([len(r["Data"]) for r in Records])
        except limits.Refusal as refused:
            raise _error(refused.code, refused.message) from None
        stream.put([r["Data"] for r in Records])
        return {
            "FailedPutCount": 0,
            "Encrypted": False,
            "RequestResponses": [{"RecordId": uuid.uuid4().hex} for _ in Records],
        }

    def poll(self) -> int:
        return sum(stream.poll() for stream in self.streams.values())

    @property
    def buffered(self) -> int:
        """Records accepted by any stream and not yet delivered (a buffer comes due on time)."""
        return sum(stream.buffered for stream in self.streams.values())

    def flush(self) -> int:
        return sum(stream.flush() for stream in self.streams.values())


def _error(code: str, message: str) -> ClientError:
    """The error boto3 raises for a refused PutRecordBatch."""
    return ClientError({"Error": {"Code": code, "Message": message}}, "PutRecordBatch")
