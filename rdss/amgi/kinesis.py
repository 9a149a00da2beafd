"""An AMGI server for AWS Lambda's Kinesis event source mapping.

``KinesisEventSourceMappingHandler(app)`` is a Lambda handler. Each invocation's records are
grouped by (stream, shard) and handed to the app as one ``message`` scope per group, in shard
order: address = stream name, receive id = sequence number, bindings
``{"kinesis": {partition_key, sequence_number, shard_id, approximate_arrival_timestamp}}``.

What comes back to Lambda is a ReportBatchItemFailures response: every record the app nacked
or left unacknowledged is a batch item failure (Lambda then retries from the earliest of
them). ``message.send`` events are buffered and delivered with batched PutRecords calls (see
:mod:`rdss.aws.putrecords`); before an ack is accepted every earlier send is delivered, so an acked
record's outputs are never lost. Apps that want per-message outcomes use the
``message.send.flush`` extension, which reports undelivered sends in :class:`SendFailed`.

Lifespan runs once per execution environment: on the first invocation (startup) and on
:meth:`close` (shutdown). Nothing here knows about RDSS; any AMGI app can run behind it.

Failures, the Lambda way: a record nacked (or left unacknowledged) is retried by the event
source mapping, which after its ``MaximumRetryAttempts`` parks the batch in its on-failure queue
and moves on (``rdss redrive`` puts it back) - Lambda's own poison-message limit, kept as it is.
Given ``rejections`` (where a deployment's ``invalid`` and ``error`` channels are and how to
decorate for them), the server also advertises the ``message.nack.error_code`` extension: a nack
carrying ``error_code`` refuses the record with that code - it is put, decorated, on the code's
channel and acknowledged, not retried.
"""

from __future__ import annotations

import base64
import contextlib
import gc
import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rdss.amgi.server import Lifespan, run_scope
from rdss.amgi.types import Application, MessageSendEvent, SendFailed
from rdss.model.errors import ErrorCode

if TYPE_CHECKING:
    import asyncio  # imported with the first batch (see rdss.amgi.server)

    from rdss.aws.putrecords import PutRecordsBatcher, Record  # with the first send, not at a cold import
    from rdss.model.rejection import Rejector  # the processors' own; an app that never rejects loads none
    from rdss.model.retry import Backoff

_log = logging.getLogger(__name__)

#: Buffered sends are delivered early once a stream has this many (one full PutRecords call).
_AUTO_FLUSH_RECORDS = 500


@dataclass(frozen=True, eq=False)  # compared by identity: a service, not a value
class Rejections:
    """Where a nack with an ``error_code`` moves a record: the stream of each channel kind
    (``{"invalid": "rdss-dev-invalid", "error": "rdss-dev-error"}``) and the reject path that
    decorates it (or claim-checks it when too large)."""

    streams: Mapping[str, str]
    rejector: Rejector


@dataclass
class _KinesisRecord:
    """One record of the event, as the app is handed it and as a nack moves it."""

    sequence_number: str
    partition_key: str
    data: bytes
    shard_id: str
    arrival: float | None


class KinesisEventSourceMappingHandler:
    """A Lambda handler serving an AMGI app from Kinesis event-source-mapping events."""

    def __init__(
        self,
        app: Application,
        *,
        kinesis: Any = None,
        client_factory: Callable[[], Any] | None = None,
        backoff: Backoff | None = None,
        sleep: Callable[[float], None] | None = None,
        logger: logging.Logger | None = None,
        pause_gc: bool = True,
        rejections: Rejections | None = None,
    ) -> None:
        """
        Args:
            app: any AMGI application.
            kinesis: a boto3 Kinesis client for ``message.send`` (default: created on first use,
                honouring ``AWS_ENDPOINT_URL``).
            client_factory: builds that client lazily instead (e.g. a counting client).
            backoff: retries of failed PutRecords entries (default: rdss.aws.putrecords.DEFAULT_BACKOFF).
            pause_gc: pause the cyclic garbage collector while a batch is handled. A batch
                allocates hundreds of thousands of short-lived objects (parsed messages) that
                reference counting frees; letting the collector walk them as they pile up cost
                a third of the broker's time. It runs again as soon as the batch is done.
            rejections: where a nack carrying an error code moves its record (None: such nacks
                are retried like any other, and the extension is not advertised).
        """
        self.app = app
        self._kinesis = kinesis
        self._client_factory = client_factory
        self._backoff = backoff
        self._sleep = sleep
        self.log = logger or _log
        self._loop: asyncio.AbstractEventLoop | None = None
        self._state: dict[str, Any] = {}
        self._lifespan: Lifespan | None = None
        self._pause_gc = pause_gc
        #: Where a nack with an error code moves its record (None: such nacks retry like any).
        self.rejections = rejections

    # -- Lambda entry point --------------------------------------------------------------------
    def __call__(self, event: dict[str, Any], context: Any = None) -> dict[str, Any]:
        loop = self._event_loop()
        if self._lifespan is None:
            self._lifespan = Lifespan(self.app, self._state, self.log)
            loop.run_until_complete(self._lifespan.startup())
        paused = self._pause_gc and gc.isenabled()
        if paused:
            gc.disable()
        try:
            failures = loop.run_until_complete(self.handle(event))
        finally:
            if paused:
                gc.enable()
        return {"batchItemFailures": [{"itemIdentifier": sequence} for sequence in failures]}

    def close(self) -> None:
        """Run lifespan shutdown (the local runtime calls this; Lambda just freezes the process)."""
        if self._loop is None:
            return
        if self._lifespan is not None:
            self._loop.run_until_complete(self._lifespan.shutdown())
        self._loop.close()
        self._loop = None

    def __del__(self) -> None:
        # Lambda simply freezes and discards the process; elsewhere (tests, the local runtime)
        # a handler that was never closed leaves its lifespan task pending: cancel it quietly.
        loop = self._loop
        if loop is None or loop.is_closed() or loop.is_running():
            return
        task = self._lifespan.task if self._lifespan is not None else None
        if task is not None and not task.done():
            import asyncio

            task.cancel()
            with contextlib.suppress(BaseException):
                loop.run_until_complete(asyncio.gather(task, return_exceptions=True))
        loop.close()

    # -- batches -------------------------------------------------------------------------------
    async def handle(self, event: dict[str, Any]) -> list[str]:
        """Serve one event; returns the sequence numbers of records that must be retried."""
        groups: dict[tuple[str, str], list[_KinesisRecord]] = {}
        for raw in event.get("Records", []):
            kinesis = raw["kinesis"]
            shard_id = raw.get("eventID", "").split(":", 1)[0]
            record = _KinesisRecord(
                sequence_number=kinesis["sequenceNumber"],
                partition_key=kinesis["partitionKey"],
                data=base64.b64decode(kinesis["data"]),
                shard_id=shard_id,
                arrival=kinesis.get("approximateArrivalTimestamp"),
            )
            groups.setdefault((raw["eventSourceARN"], shard_id), []).append(record)
        failures: list[str] = []
        for (arn, _shard), records in groups.items():
            failures.extend(await self._serve(_stream_name(arn), records))
        return failures

    async def _serve(self, stream: str, records: list[_KinesisRecord]) -> list[str]:
        events = [
            {
                "type": "message.receive",
                "id": record.sequence_number,
                "headers": [],
                "payload": record.data,
                "bindings": {
                    "kinesis": {
                        "partition_key": record.partition_key,
                        "sequence_number": record.sequence_number,
                        "shard_id": record.shard_id,
                        "approximate_arrival_timestamp": record.arrival,
                    }
                },
            }
            for record in records
        ]
        outbox = _Outbox(self._batcher())
        result = await run_scope(
            self.app,
            events,
            address=stream,
            state=self._state,
            outbox=outbox,
            log=self.log,
            nack_error_codes=self.rejections is not None,
        )
        if result.undelivered:
            # outputs sent after the last ack did not all arrive: retry the whole batch rather
            # than lose them (the app's de-duplication absorbs the repeats)
            return [r.sequence_number for r in records]
        settled = result.settled
        by_id = {r.sequence_number: r for r in records}
        for sequence_number, (code, why) in result.nacked.items():
            if code is not None and self._moved(outbox, by_id[sequence_number], code, why):
                settled.add(sequence_number)
        return [r.sequence_number for r in records if r.sequence_number not in settled]

    # -- refusals ------------------------------------------------------------------------------
    def _moved(self, outbox: _Outbox, record: _KinesisRecord, code: str, why: str) -> bool:
        """Put a refused record, decorated with ``code``, on the code's channel; False (it is then
        retried like any nacked record) when the code is not the spec's or the move failed."""
        assert self.rejections is not None
        try:
            rejection = self.rejections.rejector.reject(record.data, ErrorCode(code), why or None)
            moved = outbox.record(
                self.rejections.streams[rejection.channel], rejection.record, record.partition_key, token=record
            )
            report = outbox.batcher.put([moved])
        except Exception as error:  # an unknown code, no claim-check store, the stream refused
            self.log.error("message %s could not be refused with %s: %s", record.sequence_number, code, error)
            return False
        if report.failed:
            self.log.error("message %s could not be moved to %s", record.sequence_number, rejection.channel)
            return False
        return True

    # -- plumbing ------------------------------------------------------------------------------
    def _batcher(self) -> PutRecordsBatcher:
        from rdss.aws.putrecords import DEFAULT_BACKOFF, PutRecordsBatcher

        if self._kinesis is None:
            if self._client_factory is not None:
                self._kinesis = self._client_factory()
            else:
                import boto3

                self._kinesis = boto3.client("kinesis")
        kwargs: dict[str, Any] = {"backoff": self._backoff or DEFAULT_BACKOFF, "logger": self.log}
        if self._sleep is not None:
            kwargs["sleep"] = self._sleep
        return PutRecordsBatcher(self._kinesis, **kwargs)

    def _event_loop(self) -> asyncio.AbstractEventLoop:
        import asyncio  # with the first batch, not at import (see rdss.amgi.server)

        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        return self._loop


class _Outbox:
    """Buffered ``message.send`` events, delivered in PutRecords batches."""

    def __init__(self, batcher: PutRecordsBatcher) -> None:
        from rdss.aws.putrecords import Record

        self.batcher = batcher
        #: :class:`rdss.aws.putrecords.Record`, loaded with the first batch rather than at import
        self.record = Record
        self.pending: list[Record] = []
        self.per_stream: dict[str, int] = {}

    def add(self, message: MessageSendEvent) -> None:
        payload = message.get("payload") or b""
        binding = (message.get("bindings") or {}).get("kinesis", {})
        record = self.record(
            stream=message["address"],
            data=payload,
            partition_key=str(binding.get("partition_key") or uuid.uuid4().hex),
            explicit_hash_key=binding.get("explicit_hash_key"),
            token=message,
        )
        self.pending.append(record)
        count = self.per_stream[record.stream] = self.per_stream.get(record.stream, 0) + 1
        if count >= _AUTO_FLUSH_RECORDS:  # a full call's worth for one stream: send just those
            self.flush(record.stream)

    def flush(self, stream: str | None = None) -> None:
        """Deliver what is buffered (for one stream, or all). Raises SendFailed naming the sends
        that did not arrive."""
        if stream is None:
            records, self.pending, self.per_stream = self.pending, [], {}
        else:
            records = [r for r in self.pending if r.stream == stream]
            self.pending = [r for r in self.pending if r.stream != stream]
            self.per_stream.pop(stream, None)
        if not records:
            return
        report = self.batcher.put(records)
        if report.failed:
            failed = [f.record.token for f in report.failed]
            raise SendFailed(
                f"{len(failed)} of {len(records)} message(s) not delivered: {report.failed[0].error_code}", failed
            )


def _stream_name(arn: str) -> str:
    """``arn:aws:kinesis:<region>:<account>:stream/<name>`` -> ``<name>``."""
    return arn.rsplit("/", 1)[-1] if "/" in arn else arn


__all__ = ["KinesisEventSourceMappingHandler", "Rejections", "SendFailed"]
