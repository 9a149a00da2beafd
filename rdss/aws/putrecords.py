"""Delivering records to Kinesis: PutRecords batching with per-record retry.

Every producer in the system (the AMGI server's ``message.send``, the gateway's ``send``)
goes through :class:`PutRecordsBatcher`: records are grouped per stream into calls of at most
500 records and 5 MiB, and when a call reports some entries failed (throttling, an internal
error) only those entries are retried, after the spec's exponential backoff. A record that
still fails after the last retry is reported, never silently dropped.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import KW_ONLY, InitVar, dataclass, field
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from rdss.aws.failures import TRANSIENT_CODES, aws_code, transient
from rdss.model.errors import ErrorCode
from rdss.model.retry import Backoff

#: PutRecords limits (Kinesis Data Streams quotas).
MAX_RECORDS_PER_CALL = 500
MAX_BYTES_PER_CALL = 5 * 1024 * 1024
#: Largest record a stream accepts unless it opted in to larger ones (data + partition key).
MAX_RECORD_BYTES = 1024 * 1024
#: The data a record can surely carry: room is left for the longest partition key (256 characters).
MAX_RECORD_DATA = MAX_RECORD_BYTES - 256

#: Retrying inside a Lambda invocation must fit its time budget: 6 retries, at most 3.2 s each.
DEFAULT_BACKOFF = Backoff(max_retries=6, cap=3.2)

_log = logging.getLogger(__name__)


@dataclass
class Record:
    """One record to put. ``token`` is the caller's handle for it, returned in the report."""

    stream: str
    data: bytes
    partition_key: str
    explicit_hash_key: str | None = None
    token: Any = None

    @property
    def size(self) -> int:
        return len(self.data) + len(self.partition_key.encode("utf-8"))


@dataclass
class Delivered:
    """A record Kinesis accepted, and where it went."""

    record: Record
    shard_id: str
    sequence_number: str


@dataclass
class Failed:
    """A record Kinesis refused for good, and why."""

    record: Record
    error_code: str
    error_message: str
    #: True when the failure was transient and every retry was spent (the spec's GENERR005).
    retries_exhausted: bool = False


@dataclass
class DeliveryReport:
    """What one :meth:`PutRecordsBatcher.flush` did with each record."""

    delivered: list[Delivered] = field(default_factory=list)
    failed: list[Failed] = field(default_factory=list)
    #: PutRecords calls made (retries included): the unit the data-plane budget counts.
    calls: int = 0

    @property
    def ok(self) -> bool:
        return not self.failed


@dataclass(eq=False)
class PutRecordsBatcher:
    """Puts records with as few PutRecords calls as the limits allow, retrying failed entries."""

    client: Any
    _: KW_ONLY
    backoff: Backoff = DEFAULT_BACKOFF
    sleep: Callable[[float], None] = time.sleep
    max_record_bytes: int = MAX_RECORD_BYTES
    logger: InitVar[logging.Logger | None] = None
    #: Which failures of a whole call are worth another attempt (default
    #: :func:`rdss.aws.failures.transient`; a gateway adds a connection lost after its endpoint
    #: answered, :class:`rdss.aws.failures.Answered`).
    retry_on: Callable[[BaseException], bool] = transient
    log: logging.Logger = field(init=False)

    def __post_init__(self, logger: logging.Logger | None) -> None:
        self.log = logger or _log

    def put(self, records: Iterable[Record]) -> DeliveryReport:
        """Deliver ``records``; the report names each one's outcome.

        Records for one stream keep their relative order in the calls (per-shard order for a
        shared partition key), except that a retried record lands after the ones that did not
        need a retry.
        """
        report = DeliveryReport()
        by_stream: dict[str, list[Record]] = defaultdict(list)
        for record in records:
            if record.size > self.max_record_bytes:
                report.failed.append(
                    Failed(record, "RecordTooLarge", f"{record.size:,} bytes exceeds {self.max_record_bytes:,}")
                )
            else:
                by_stream[record.stream].append(record)
        for stream, pending in by_stream.items():
            self._put_stream(stream, pending, report)
        return report

    def _put_stream(self, stream: str, records: list[Record], report: DeliveryReport) -> None:
        delays = self.backoff.delays()
        attempt = 1
        while True:
            retry: list[tuple[Record, str, str]] = []
            for chunk in _chunks(records):
                retry.extend(self._call(stream, chunk, report))
            if not retry:
                return
            delay = next_delay(delays, self.log, f"{len(retry)} record(s) for {stream}", attempt, retry[0][1])
            if delay is None:
                report.failed.extend(Failed(record, code, message, True) for record, code, message in retry)
                return
            self.sleep(delay)
            attempt += 1
            records = [record for record, _, _ in retry]

    def _call(self, stream: str, chunk: Sequence[Record], report: DeliveryReport) -> list[tuple[Record, str, str]]:
        """One PutRecords call; returns the retryable failures, records the rest in the report."""
        entries = []
        for record in chunk:
            entry: dict[str, Any] = {"Data": record.data, "PartitionKey": record.partition_key}
            if record.explicit_hash_key is not None:
                entry["ExplicitHashKey"] = record.explicit_hash_key
            entries.append(entry)
        report.calls += 1
        try:
            response = self.client.put_records(StreamName=stream, Records=entries)
        except (ClientError, BotoCoreError) as error:
            # throttling, 5xx, timeouts are retried; connection refused, no credentials, a missing
            # stream fail the same way every time, so the records fail now (rdss.aws.failures)
            if isinstance(error, ClientError):  # AWS's own words, without botocore's preamble
                code = aws_code(error) or "ClientError"
                message = " ".join(str(error.response.get("Error", {}).get("Message") or error).split())
            else:
                code = type(error).__name__
                message = " ".join(str(error).split())
            if self.retry_on(error):
                return [(record, code, message) for record in chunk]
            report.failed.extend(Failed(record, code, message) for record in chunk)
            return []
        retry = []
        for record, result in zip(chunk, response["Records"], strict=True):
            code = result.get("ErrorCode")
            if code is None:
                report.delivered.append(Delivered(record, result["ShardId"], result["SequenceNumber"]))
            elif code in TRANSIENT_CODES:
                retry.append((record, code, result.get("ErrorMessage", "")))
            else:
                report.failed.append(Failed(record, code, result.get("ErrorMessage", "")))
        return retry


def next_delay(
    delays: Iterator[float], log: logging.Logger, failed: str, attempt: int, error_code: str
) -> float | None:
    """The wait before the attempt after ``attempt`` at the records that failed with
    ``error_code`` (``failed`` says which: ``3 record(s) for rdss-prod-input``), logged as a
    warning; None once ``delays`` are spent: the records are given up (GENERR005, logged as an
    error). A batch writer's retry step (PutRecords here, Firehose's PutRecordBatch in
    :mod:`rdss.archive.delivery`)."""
    delay = next(delays, None)
    if delay is None:
        log.error("%s: gave up on %s after %d attempts (%s)", ErrorCode.GENERR005, failed, attempt, error_code)
    else:
        log.warning("%s failed (%s); retrying in %.1f s", failed, error_code, delay)
    return delay


def _chunks(records: Sequence[Record]) -> Iterable[list[Record]]:
    chunk: list[Record] = []
    size = 0
    for record in records:
        if chunk and (len(chunk) == MAX_RECORDS_PER_CALL or size + record.size > MAX_BYTES_PER_CALL):
            yield chunk
            chunk, size = [], 0
        chunk.append(record)
        size += record.size
    if chunk:
        yield chunk
