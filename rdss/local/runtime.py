"""The local runtime: the deployed system, minus AWS.

One :class:`Runtime` provisions a deployment in the emulator from the topology and runs what
AWS would run around it:

* an event source mapping per processor and source channel (broker on ``input``, sequencer on
  ``sequence``, archiver on ``input``, ``invalid`` and ``error``), invoking the real Lambda
  handlers with real Kinesis events and Lambda's retry, bisect and on-failure semantics
  (:mod:`rdss.local.esm`); failed batches are parked as Lambda parks them, as invocation
  records in the processor's SQS on-failure queue (the deployed queue's name), where
  ``rdss redrive`` finds them;
* a Direct PUT delivery stream per archived channel (:mod:`rdss.local.firehose`), which the
  archiver writes with PutRecordBatch as it writes Firehose in AWS;
* the sweep, on a timer.

``step()`` makes one pass over all of them; ``drain()`` steps until nothing moves;
``start()`` runs passes on a background thread (``rdss local up``): on the embedded emulator an
idle runtime waits for its next change (a write) rather than polling, so it costs next to nothing
idle; elsewhere it backs off to one pass a second. Pollers keep their positions in
:class:`~rdss.local.positions.Positions` (on disk for ``rdss local up``), each under a name that
stays the same across restarts.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from rdss.amgi.kinesis import KinesisEventSourceMappingHandler
from rdss.archive.app import ArchiverApp
from rdss.aws.putrecords import PutRecordsBatcher, Record
from rdss.deployment.topology import RDSS, Deployment, Resolved, from_environment
from rdss.local.emulator import Endpoint, deprovision, provision
from rdss.local.esm import EventSourceMapping, FailedBatch
from rdss.local.firehose import DeliveryStream, LocalFirehose
from rdss.local.positions import Positions
from rdss.local.vendor_stack import LocalVendor, deprovision_vendors, provision_vendors
from rdss.model.errors import ErrorCode
from rdss.processors.broker import Broker
from rdss.processors.sequencer import Sequencer, Sweep

_log = logging.getLogger(__name__)

ClientFactory = Callable[[str, str], Any]  # (processor, service) -> boto3 client


@dataclass
class Settings:
    environment: str = "local"
    shards: int = 2
    batch_size: int = 100
    #: The archiver's batches: larger, for larger gzip members (cdk.json's ``archive.batch_size``).
    archive_batch_size: int = 1000
    batching_window: float = 0.0
    max_retries: int = 10
    bisect_on_error: bool = True
    max_record_age: float | None = None
    firehose_buffer_seconds: float = 1.0
    firehose_buffer_bytes: int = 5 * 1024 * 1024
    sweep_interval: float = 10.0
    sequence_timeout: float = 300.0
    #: Pause between passes while records are moving or a delivery stream holds a buffer.
    poll_interval: float = 0.1
    #: An idle runtime waits for the embedded emulator's next change, and otherwise backs off
    #: to one pass per ``idle_interval`` (Lambda polls an idle shard about once a second).
    idle_interval: float = 1.0
    #: Vendors let in, each with a role as the CDK app makes one (``rdss vendor config`` reads them).
    vendors: Mapping[str, LocalVendor] = field(default_factory=dict)


@dataclass
class Published:
    """One record put on a channel: its bytes and where Kinesis put it, or why it did not."""

    payload: bytes
    shard_id: str = ""
    sequence_number: str = ""
    #: (the spec's error code, the reason) when the stream did not take the record: GENERR006
    #: for a refusal (a record over Kinesis' 1 MiB), GENERR005 when retries ran out.
    refused: tuple[str, str] | None = None

    @property
    def record(self) -> str:
        """The record's identity as the broker's Local Data Repository names it ("" if refused)."""
        return f"{self.shard_id}/{self.sequence_number}" if self.refused is None else ""


def partition_key(payload: bytes, index: int) -> str:
    """The key a producer puts a record under: the sequence id for a part of a sequence (all
    parts on one shard, in order), the messageId for a whole message (copies of a message on
    one shard, in order), a position for anything else."""
    try:
        header = orjson.loads(payload)["messageHeader"]
        sequence = header.get("messageSequence") or {}
        key = sequence.get("sequence") if sequence.get("total", 1) != 1 else header.get("messageId")
    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
        key = None
    return key if isinstance(key, str) and key else f"record-{index:08d}"


@dataclass
class _Pumps:
    mappings: dict[str, EventSourceMapping] = field(default_factory=dict)
    firehose: LocalFirehose = field(default_factory=lambda: LocalFirehose({}))


def mapping_name(processor: str, source: str, sources: tuple[str, ...]) -> str:
    """How :attr:`Runtime.mappings` names a mapping: the processor's name when it has one source
    (``broker``), else ``<processor>/<channel>`` (``archiver/invalid``)."""
    return processor if len(sources) == 1 else f"{processor}/{source}"


class Runtime:
    def __init__(
        self,
        endpoint: Endpoint,
        settings: Settings | None = None,
        *,
        clients: ClientFactory | None = None,
        positions: Positions | None = None,
    ):
        self.endpoint = endpoint
        self.settings = settings or Settings()
        #: Where each poller has got to (on disk for ``rdss local up``; see :mod:`rdss.local.positions`).
        self.positions = positions or Positions()
        self.deployment = Deployment(self.settings.environment)
        self.names: Resolved = from_environment(self.deployment.environment_variables())
        self._clients = clients or (lambda processor, service: endpoint.client(service))
        self._pumps = _Pumps()
        self._failures: dict[str, str] = {}
        self._last_sweep = 0.0
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.sweep: Sweep | None = None
        self.handlers: dict[str, KinesisEventSourceMappingHandler] = {}

    # -- set-up --------------------------------------------------------------------------------
    def provision(self) -> None:
        """Create the deployment's resources and wire every pump (idempotent resources)."""
        provision(self.endpoint, self.deployment, shards=self.settings.shards)
        if self.settings.vendors:
            provision_vendors(self.endpoint, self.deployment, self.settings.vendors)
        sqs = self.endpoint.client("sqs")
        kinesis = self.endpoint.client("kinesis")
        s3 = self.endpoint.client("s3")
        self._pumps.firehose = LocalFirehose(
            {
                self.deployment.delivery_stream(channel.name): DeliveryStream(
                    s3,
                    name=self.deployment.delivery_stream(channel.name),
                    bucket=self.deployment.bucket(RDSS.archive_bucket(channel.name)),
                    prefix=channel.archive or "",
                    buffer_bytes=self.settings.firehose_buffer_bytes,
                    buffer_seconds=self.settings.firehose_buffer_seconds,
                )
                for channel in RDSS.archived()
            }
        )
        for processor in RDSS.processors:
            if not processor.sources:
                continue
            queue = self.deployment.on_failure_queue(processor.name)
            self._failures[processor.name] = sqs.create_queue(QueueName=queue)["QueueUrl"]
            self.handlers[processor.name] = KinesisEventSourceMappingHandler(
                self._app(processor.name), kinesis=self._clients(processor.name, "kinesis")
            )
            batch_size = self.settings.archive_batch_size if processor.archives else self.settings.batch_size
            for source in processor.sources:
                self._pumps.mappings[mapping_name(processor.name, source, processor.sources)] = EventSourceMapping(
                    kinesis,
                    self.deployment.stream(source),
                    self.handlers[processor.name],
                    region=self.endpoint.region,
                    batch_size=batch_size,
                    batching_window=self.settings.batching_window,
                    max_retries=self.settings.max_retries,
                    bisect_on_error=self.settings.bisect_on_error,
                    max_record_age=self.settings.max_record_age,
                    on_failure=self._on_failure(sqs, self._failures[processor.name]),
                    checkpoints=self.positions.of(f"mapping:{mapping_name(processor.name, source, processor.sources)}"),
                    function_arn=f"arn:aws:lambda:{self.endpoint.region}:000000000000:function:"
                    f"{self.deployment.function(processor.name)}",
                )
        self.sweep = Sweep(
            names=self.names,
            dynamodb=self._clients("sweep", "dynamodb"),
            s3=self._clients("sweep", "s3"),
            kinesis=self._clients("sweep", "kinesis"),
            timeout_seconds=self.settings.sequence_timeout,
        )

    def _app(self, processor: str) -> Any:
        dynamodb, s3 = self._clients(processor, "dynamodb"), self._clients(processor, "s3")
        if processor == "broker":
            return Broker(names=self.names, dynamodb=dynamodb, s3=s3)
        if processor == "sequencer":
            return Sequencer(names=self.names, dynamodb=dynamodb, s3=s3)
        if processor == "archiver":  # Firehose is the local delivery streams, here as in AWS
            return ArchiverApp(names=self.names, firehose=self.firehose, s3=s3)
        raise ValueError(f"no local app for processor {processor!r}")

    @staticmethod
    def _on_failure(sqs: Any, queue_url: str) -> Callable[[FailedBatch], None]:
        def send(failed: FailedBatch) -> None:
            sqs.send_message(QueueUrl=queue_url, MessageBody=orjson.dumps(failed.as_dict()).decode())

        return send

    # -- publishing ----------------------------------------------------------------------------
    def publish(self, payloads: list[bytes], *, partition_keys: list[str] | None = None) -> list[Published]:
        """Put records on ``input`` as a producer would; returns where each landed, or why the
        stream did not take it (a record over 1 MiB: the others go anyway).

        Default partition keys follow producers' conventions (:func:`partition_key`)."""
        keys = partition_keys or [partition_key(payload, index) for index, payload in enumerate(payloads)]
        records = [
            Record(self.deployment.stream("input"), payload, key, token=index)
            for index, (payload, key) in enumerate(zip(payloads, keys, strict=True))
        ]
        report = PutRecordsBatcher(self.endpoint.client("kinesis")).put(records)
        published = {d.record.token: Published(d.record.data, d.shard_id, d.sequence_number) for d in report.delivered}
        for failed in report.failed:
            code = ErrorCode.GENERR005 if failed.retries_exhausted else ErrorCode.GENERR006
            reason = f"{failed.error_code}: {failed.error_message}"
            _log.info("record %d not published: %s %s", failed.record.token, code, reason)  # the caller reports it
            published[failed.record.token] = Published(failed.record.data, refused=(str(code), reason))
        return [published[i] for i in range(len(payloads))]

    # -- running -------------------------------------------------------------------------------
    def step(self) -> int:
        """One pass over every mapping and delivery stream (and the sweep when due)."""
        with self._lock:
            moved = 0
            for mapping in self._pumps.mappings.values():
                moved += mapping.poll()
            moved += self._pumps.firehose.poll()
            return moved + self._sweep_when_due()

    def _sweep_when_due(self) -> int:
        if self.sweep is None or time.monotonic() - self._last_sweep < self.settings.sweep_interval:
            return 0
        self._last_sweep = time.monotonic()
        return int(self.sweep.run()["count"])

    def drain(self, *, idle_passes: int = 2, timeout: float = 300.0) -> None:
        """Step until ``idle_passes`` passes in a row move nothing, then deliver the archives."""
        deadline = time.monotonic() + timeout
        idle = 0
        while idle < idle_passes:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the runtime did not settle within {timeout:.0f} s")
            idle = idle + 1 if self.step() == 0 else 0
        with self._lock:
            self._pumps.firehose.flush()

    def start(self) -> None:
        """Run passes on a background thread until :meth:`stop`."""
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="rdss-local-runtime", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        changes = self.endpoint.changes
        idle = self.settings.poll_interval
        pumps = True
        while not self._stop.is_set():
            seen = changes.version if changes is not None else 0
            try:
                if pumps:
                    moved = self.step()
                else:
                    with self._lock:
                        moved = self._sweep_when_due()
            except Exception:  # keep serving: a pass that failed is retried on the next one
                _log.exception("a runtime pass failed")
                moved = 0
            pumps = True
            if moved:
                idle = self.settings.poll_interval
            elif self._pumps.firehose.buffered:
                self._stop.wait(self.settings.poll_interval)  # a buffer comes due on time
            elif changes is not None:
                # Nothing moves until something is written: wait for that. Woken by the clock
                # alone, only the sweep has anything to do (a pass over every shard would cost
                # dozens of requests and find nothing).
                pumps = changes.wait(seen, self._until_sweep())
            else:
                idle = min(idle * 2, self.settings.idle_interval)
                self._stop.wait(idle)

    def _until_sweep(self) -> float:
        due = self._last_sweep + self.settings.sweep_interval - time.monotonic()
        return max(self.settings.poll_interval, due)

    def stop(self) -> None:
        if self._thread is not None:
            self._stop.set()
            if self.endpoint.changes is not None:
                self.endpoint.changes.wake()
            self._thread.join(timeout=30)
            self._thread = None
        with self._lock:
            self._pumps.firehose.flush()
        for handler in self.handlers.values():
            handler.close()

    def deprovision(self) -> None:
        """Delete what :meth:`provision` created: streams, tables, buckets, failure queues, and
        the vendors' stack and key alias."""
        self.stop()
        sqs = self.endpoint.client("sqs")
        # by name, not by what this runtime made: another runtime of the deployment may have made them
        for processor in RDSS.processors:
            if processor.sources:
                with contextlib.suppress(sqs.exceptions.QueueDoesNotExist):
                    url = sqs.get_queue_url(QueueName=self.deployment.on_failure_queue(processor.name))["QueueUrl"]
                    sqs.delete_queue(QueueUrl=url)
        if self.settings.vendors:
            deprovision_vendors(self.endpoint, self.deployment)
        deprovision(self.endpoint, self.deployment)

    # -- inspection ----------------------------------------------------------------------------
    @property
    def mappings(self) -> dict[str, EventSourceMapping]:
        """Every event source mapping, named by :func:`mapping_name`."""
        return dict(self._pumps.mappings)

    @property
    def firehose(self) -> LocalFirehose:
        """The delivery streams, by name (``rdss-<env>-input``...)."""
        return self._pumps.firehose

    def failed_batches(self) -> dict[str, int]:
        """Messages waiting in each processor's on-failure queue."""
        sqs = self.endpoint.client("sqs")
        counts = {}
        for processor, url in self._failures.items():
            attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
            counts[processor] = int(attributes["Attributes"]["ApproximateNumberOfMessages"])
        return counts
