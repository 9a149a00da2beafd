"""A provisioned deployment in the embedded emulator (or at AWS_ENDPOINT_URL), for tests."""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from rdss.amgi.kinesis import KinesisEventSourceMappingHandler
from rdss.archive.app import ArchiverApp
from rdss.aws.putrecords import PutRecordsBatcher, Record
from rdss.deployment.topology import Deployment, Resolved, from_environment
from rdss.local.accounting import StreamRecord, read_stream, read_stream_records
from rdss.local.emulator import Endpoint, deprovision, provision
from rdss.local.esm import EventSourceMapping
from rdss.model.retry import Backoff
from rdss.processors.broker import Broker
from rdss.processors.sequencer import Sequencer, Sweep

FAST_BACKOFF = Backoff(max_retries=3, base=0.001)


@dataclass
class System:
    endpoint: Endpoint
    deployment: Deployment
    #: per channel, per shard: where its event source mapping has got to (like Lambda's)
    checkpoints: dict[str, dict[str, str]] = field(default_factory=dict)
    #: tables made beside the deployment (a vendor's repository), deleted with it
    own_tables: list[str] = field(default_factory=list)

    @classmethod
    def create(cls, endpoint: Endpoint, shards: int = 1) -> System:
        deployment = Deployment(f"t{uuid.uuid4().hex[:10]}")
        provision(endpoint, deployment, shards=shards)
        return cls(endpoint, deployment)

    def delete(self) -> None:
        """Delete the deployment's streams, tables and buckets, and the tables made beside it."""
        deprovision(self.endpoint, self.deployment)
        dynamodb = self.client("dynamodb")
        for table in self.own_tables:
            with contextlib.suppress(dynamodb.exceptions.ResourceNotFoundException):
                dynamodb.delete_table(TableName=table)

    @property
    def names(self) -> Resolved:
        return from_environment(self.deployment.environment_variables())

    def client(self, service: str) -> Any:
        return self.endpoint.client(service)

    # -- streams -------------------------------------------------------------------------------
    def publish(self, payloads: list[bytes], channel: str = "input", partition_key: str | None = None) -> None:
        stream = self.deployment.stream(channel)
        records = [Record(stream, p, partition_key or uuid.uuid4().hex) for p in payloads]
        report = PutRecordsBatcher(self.client("kinesis"), backoff=FAST_BACKOFF).put(records)
        assert report.ok, report.failed[:1]

    def read(self, channel: str) -> list[bytes]:
        """Every record of a channel, shard by shard, from the start."""
        return read_stream(self.client("kinesis"), self.deployment.stream(channel))

    def records(self, channel: str) -> list[StreamRecord]:
        """Every record of a channel with its partition key (a consumer's move: ``moved:<group>``)."""
        return read_stream_records(self.client("kinesis"), self.deployment.stream(channel))

    # -- processors ----------------------------------------------------------------------------
    def broker(self, *, dynamodb: Any = None, s3: Any = None) -> Broker:
        return Broker(names=self.names, dynamodb=dynamodb or self.client("dynamodb"), s3=s3 or self.client("s3"))

    def sequencer(self, *, clock: Any = None, now: Any = None) -> Sequencer:
        kwargs: dict[str, Any] = {}
        if clock is not None:
            kwargs["clock"] = clock
        if now is not None:
            kwargs["now"] = now
        return Sequencer(names=self.names, dynamodb=self.client("dynamodb"), s3=self.client("s3"), **kwargs)

    def archiver(self, *, firehose: Any = None) -> ArchiverApp:
        """The archiver, writing to ``firehose`` (default: the endpoint's Firehose API)."""
        return ArchiverApp(names=self.names, firehose=firehose or self.client("firehose"), s3=self.client("s3"))

    def sweep(self, *, clock: Any, timeout_seconds: float = 3600) -> Sweep:
        return Sweep(
            names=self.names,
            dynamodb=self.client("dynamodb"),
            s3=self.client("s3"),
            kinesis=self.client("kinesis"),
            timeout_seconds=timeout_seconds,
            clock=clock,
        )

    def handler(self, app: Any, *, kinesis: Any = None) -> KinesisEventSourceMappingHandler:
        return KinesisEventSourceMappingHandler(
            app, kinesis=kinesis or self.client("kinesis"), backoff=FAST_BACKOFF, sleep=lambda s: None
        )

    def route(self) -> None:
        """The broker and the sequencer handle what arrived on ``input`` and ``sequence``, as
        their Lambda functions would (each call goes on from where the last one stopped)."""
        self.mapping("input", self.handler(self.broker())).drain()
        self.mapping("sequence", self.handler(self.sequencer())).drain()

    @contextmanager
    def routing(self, interval: float = 0.05) -> Iterator[None]:
        """The broker and the sequencer at work on a thread while the block runs."""
        mappings = [
            self.mapping("input", self.handler(self.broker())),
            self.mapping("sequence", self.handler(self.sequencer())),
        ]
        stop = threading.Event()

        def pump() -> None:
            while not stop.is_set():
                if not sum(mapping.poll() for mapping in mappings):
                    stop.wait(interval)

        thread = threading.Thread(target=pump, name="routing", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(30)

    def mapping(self, channel: str, handler: Any, **kwargs: Any) -> EventSourceMapping:
        kwargs.setdefault("batch_size", 100)
        kwargs.setdefault("checkpoints", self.checkpoints.setdefault(channel, {}))
        return EventSourceMapping(
            self.client("kinesis"), self.deployment.stream(channel), handler, region=self.endpoint.region, **kwargs
        )
