"""A local Kinesis event source mapping with Lambda's semantics.

For each shard of a stream, in order: read a batch (up to ``batch_size`` records, waiting up
to ``batching_window`` seconds for a full one), invoke the handler with a real Kinesis event,
and act on the answer the way Lambda does:

* ``batchItemFailures`` absent or empty: checkpoint after the batch;
* some failures: checkpoint before the failed record with the lowest sequence number and retry
  from it (the retry counts against ``max_retries``); an item without an ``itemIdentifier``, an
  empty one, or one naming no record of the batch fails the whole batch (:func:`retry_from`);
* the function raised: retry the batch, bisecting it first when ``bisect_on_error`` is set
  (halves do not count against the retry limit);
* a batch failing more than ``max_retries`` times, or older than ``max_record_age``: Lambda's
  invocation record for it (:class:`FailedBatch`: shard, first and last sequence number - a
  pointer, not the records) goes to the on-failure destination and the shard moves on;
  ``rdss redrive`` (:mod:`rdss.processors.redrive`) follows the pointer and puts the records back.

Checkpoints are kept in memory by default; pass a ``checkpoints`` dict to share or persist them.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, MutableMapping
from dataclasses import KW_ONLY, dataclass, field
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from rdss.aws.failures import aws_code
from rdss.local.events import esm_event

Handler = Callable[[dict[str, Any], Any], Any]

_log = logging.getLogger(__name__)

#: Seconds between two listings of a stream's shards (a shard found closed lists them at once).
SHARD_SYNC = 10.0


@dataclass
class FailedBatch:
    """What the on-failure destination receives: Lambda's invocation record for a Kinesis batch
    it gave up on (a pointer to the records, not the records; ``rdss redrive`` follows it)."""

    stream_arn: str
    shard_id: str
    start_sequence_number: str
    end_sequence_number: str
    batch_size: int
    condition: str
    approximate_arrival_of_first_record: float | None
    approximate_arrival_of_last_record: float | None = None
    function_arn: str = ""
    invocations: int = 0
    #: ``Unhandled`` when the function raised; absent when it returned batch item failures.
    function_error: str | None = None
    timestamp: float = field(default_factory=time.time)
    request_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    def as_dict(self) -> dict[str, Any]:
        response: dict[str, Any] = {"statusCode": 200, "executedVersion": "$LATEST"}
        if self.function_error is not None:
            response["functionError"] = self.function_error
        return {
            "requestContext": {
                "requestId": self.request_id,
                "functionArn": self.function_arn,
                "condition": self.condition,
                "approximateInvokeCount": self.invocations,
            },
            "responseContext": response,
            "version": "1.0",
            "timestamp": _iso(self.timestamp),
            "KinesisBatchInfo": {
                "shardId": self.shard_id,
                "startSequenceNumber": self.start_sequence_number,
                "endSequenceNumber": self.end_sequence_number,
                "approximateArrivalOfFirstRecord": _iso(self.approximate_arrival_of_first_record),
                "approximateArrivalOfLastRecord": _iso(self.approximate_arrival_of_last_record),
                "batchSize": self.batch_size,
                "streamArn": self.stream_arn,
            },
        }


def _iso(moment: float | None) -> str | None:
    """Lambda's timestamps: ISO 8601, milliseconds, UTC (``2026-11-21T09:14:03.021Z``)."""
    if moment is None:
        return None
    return datetime.fromtimestamp(moment, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _arrival(record: dict[str, Any]) -> float | None:
    arrival = record.get("ApproximateArrivalTimestamp")
    if isinstance(arrival, datetime):
        return arrival.astimezone(UTC).timestamp()
    return None if arrival is None else float(arrival)


def retry_from(response: Any, batch: list[dict[str, Any]]) -> int | None:
    """Lambda's reading of a function's partial batch response (ReportBatchItemFailures): None
    for a complete success (no response, no ``batchItemFailures`` or an empty list), else the
    index in ``batch`` to retry from - the record with the lowest sequence number among the
    failures, or 0 (the whole batch: a complete failure) when an item's ``itemIdentifier`` is
    missing, empty or names no record of the batch."""
    if not isinstance(response, dict):
        return None
    failures = response.get("batchItemFailures")
    if not failures:
        return None
    if not isinstance(failures, list):
        return 0
    positions = {record["SequenceNumber"]: index for index, record in enumerate(batch)}
    found: list[int] = []
    for failure in failures:
        identifier = failure.get("itemIdentifier") if isinstance(failure, dict) else None
        if not isinstance(identifier, str) or identifier not in positions:
            return 0
        found.append(positions[identifier])
    return min(found, key=lambda index: int(batch[index]["SequenceNumber"]))


@dataclass
class MappingStats:
    invocations: int = 0
    records: int = 0
    retries: int = 0
    bisections: int = 0
    function_errors: int = 0
    failed_batches: list[FailedBatch] = field(default_factory=list)


@dataclass(eq=False)
class EventSourceMapping:
    """Polls one stream and invokes one handler, shard by shard, with Lambda's semantics."""

    kinesis: Any
    stream: str
    handler: Handler
    _: KW_ONLY
    region: str
    batch_size: int = 100
    batching_window: float = 0.0
    max_retries: int = 3
    bisect_on_error: bool = True
    max_record_age: float | None = None
    on_failure: Callable[[FailedBatch], None] | None = None
    #: Default (empty): a function named after the stream, in the region.
    function_arn: str = ""
    #: shard -> the last sequence number processed (kept by the caller across restarts).
    checkpoints: MutableMapping[str, str] = field(default_factory=dict)
    clock: Callable[[], float] = time.time
    stats: MappingStats = field(default_factory=MappingStats, init=False)

    def __post_init__(self) -> None:
        if not self.function_arn:
            self.function_arn = f"arn:aws:lambda:{self.region}:000000000000:function:{self.stream}-consumer"
        self._arn: str | None = None
        #: shard -> (the checkpoint it continues from, the NextShardIterator of the last read):
        #: reused while the checkpoint is where that read left it, as Lambda keeps its iterators
        #: (a fresh GetShardIterator per poll doubles an idle shard's calls)
        self._iterators: dict[str, tuple[str | None, str]] = {}
        #: the shards last listed, and when: listed again every :data:`SHARD_SYNC` seconds, or at
        #: once when a shard is found closed (a reshard), not on every pass
        self._shards: list[str] = []
        self._listed = float("-inf")

    @property
    def stream_arn(self) -> str:
        if self._arn is None:
            self._arn = self.kinesis.describe_stream_summary(StreamName=self.stream)["StreamDescriptionSummary"][
                "StreamARN"
            ]
        return self._arn

    def shards(self) -> list[str]:
        """The stream's shards: listed at most every :data:`SHARD_SYNC` seconds (Lambda and the
        KCL sync their shard lists on a period and on a closed shard, not on each read)."""
        if self._shards and self.clock() - self._listed < SHARD_SYNC:
            return self._shards
        self._shards, self._listed = self._list_shards(), self.clock()
        return self._shards

    def _list_shards(self) -> list[str]:
        shards: list[str] = []
        kwargs: dict[str, Any] = {"StreamName": self.stream}
        while True:
            response = self.kinesis.list_shards(**kwargs)
            shards.extend(s["ShardId"] for s in response["Shards"])
            token = response.get("NextToken")
            if not token:
                return shards
            kwargs = {"NextToken": token}

    def poll(self) -> int:
        """One pass over every shard: handle what is there. Returns the records handled."""
        handled = 0
        for shard in self.shards():
            handled += self._poll_shard(shard)
        return handled

    def drain(self, idle_passes: int = 1) -> int:
        """Poll until ``idle_passes`` consecutive passes find nothing. Returns records handled."""
        total, idle = 0, 0
        while idle < idle_passes:
            handled = self.poll()
            total += handled
            idle = idle + 1 if handled == 0 else 0
        return total

    # -- one shard -----------------------------------------------------------------------------
    def _poll_shard(self, shard: str) -> int:
        handled = 0
        while True:
            records = self._read(shard)
            if not records:
                return handled
            self._deliver(shard, records)
            handled += len(records)

    def _read(self, shard: str) -> list[dict[str, Any]]:
        checkpoint = self.checkpoints.get(shard)
        response = self._first_read(shard, checkpoint)
        records: list[dict[str, Any]] = list(response["Records"])
        iterator = response.get("NextShardIterator")
        deadline = self.clock() + self.batching_window
        # the batching window: wait for a full batch, but no longer than the window
        while iterator and len(records) < self.batch_size and self.clock() < deadline:
            time.sleep(min(0.05, max(0.0, deadline - self.clock())))
            response = self.kinesis.get_records(ShardIterator=iterator, Limit=self.batch_size - len(records))
            records.extend(response["Records"])
            iterator = response.get("NextShardIterator")
        if iterator:
            self._iterators[shard] = (records[-1]["SequenceNumber"] if records else checkpoint, iterator)
        else:  # the shard is closed (split or merged): its children are listed on the next pass
            self._listed = float("-inf")
        return records

    def _first_read(self, shard: str, checkpoint: str | None) -> dict[str, Any]:
        """GetRecords from the checkpoint: on the last read's iterator when the checkpoint is
        where that read left it, else (a retry, a restart, an expired iterator) a new one."""
        kept = self._iterators.pop(shard, None)
        if kept is not None and kept[0] == checkpoint:
            try:
                return dict(self.kinesis.get_records(ShardIterator=kept[1], Limit=self.batch_size))
            except ClientError as error:
                if aws_code(error) != "ExpiredIteratorException":
                    raise
                # older than five minutes: start again from the checkpoint
        kwargs: dict[str, Any] = {"StreamName": self.stream, "ShardId": shard}
        if checkpoint is None:
            kwargs["ShardIteratorType"] = "TRIM_HORIZON"
        else:
            kwargs["ShardIteratorType"] = "AFTER_SEQUENCE_NUMBER"
            kwargs["StartingSequenceNumber"] = checkpoint
        iterator = self.kinesis.get_shard_iterator(**kwargs)["ShardIterator"]
        return dict(self.kinesis.get_records(ShardIterator=iterator, Limit=self.batch_size))

    def _deliver(self, shard: str, records: list[dict[str, Any]]) -> None:
        """Handle one batch to completion (success, or the on-failure destination)."""
        queue: list[tuple[list[dict[str, Any]], int]] = [(records, 0)]
        while queue:
            batch, attempts = queue.pop(0)
            if self._too_old(batch):
                self._give_up(shard, batch, "RecordAgeExceeded", attempts)
                continue
            self.stats.invocations += 1
            self.stats.records += len(batch)
            try:
                response = self.handler(esm_event(self.stream_arn, shard, batch, self.region), None)
            except KeyboardInterrupt:
                raise
            except BaseException:  # in Lambda anything that ends an invocation is a function error
                self.stats.function_errors += 1
                _log.warning("handler raised on %d record(s) of %s/%s", len(batch), self.stream, shard, exc_info=True)
                if self.bisect_on_error and len(batch) > 1:
                    self.stats.bisections += 1
                    middle = len(batch) // 2
                    queue[:0] = [(batch[:middle], attempts), (batch[middle:], attempts)]
                    continue
                if attempts >= self.max_retries:
                    self._give_up(shard, batch, "RetryAttemptsExhausted", attempts + 1, "Unhandled")
                    continue
                self.stats.retries += 1
                queue.insert(0, (batch, attempts + 1))
                continue
            index = retry_from(response, batch)
            if index is None:
                self.checkpoints[shard] = batch[-1]["SequenceNumber"]
                continue
            if index > 0:
                self.checkpoints[shard] = batch[index - 1]["SequenceNumber"]
            remainder = batch[index:]
            if attempts >= self.max_retries:
                self._give_up(shard, remainder, "RetryAttemptsExhausted", attempts + 1)
                continue
            self.stats.retries += 1
            queue.insert(0, (remainder, attempts + 1))

    def _too_old(self, batch: list[dict[str, Any]]) -> bool:
        if self.max_record_age is None:
            return False
        arrival = _arrival(batch[0])
        return arrival is not None and self.clock() - arrival > self.max_record_age

    def _give_up(
        self,
        shard: str,
        batch: list[dict[str, Any]],
        condition: str,
        invocations: int,
        function_error: str | None = None,
    ) -> None:
        failed = FailedBatch(
            stream_arn=self.stream_arn,
            shard_id=shard,
            start_sequence_number=batch[0]["SequenceNumber"],
            end_sequence_number=batch[-1]["SequenceNumber"],
            batch_size=len(batch),
            condition=condition,
            approximate_arrival_of_first_record=_arrival(batch[0]),
            approximate_arrival_of_last_record=_arrival(batch[-1]),
            function_arn=self.function_arn,
            invocations=invocations,
            function_error=function_error,
            timestamp=self.clock(),
        )
        self.stats.failed_batches.append(failed)
        _log.error(
            "%s: %d record(s) of %s/%s sent to the on-failure destination (%s..%s)",
            condition,
            len(batch),
            self.stream,
            shard,
            failed.start_sequence_number,
            failed.end_sequence_number,
        )
        if self.on_failure is not None:
            self.on_failure(failed)
        self.checkpoints[shard] = batch[-1]["SequenceNumber"]
