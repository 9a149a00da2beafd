"""The Audit Log where there is no Firehose (RabbitMQ, the memory bus): a Wire Tap archiver.

The spec's Audit Log is the component "through which every Message dispatched into the system
will be routed", persisted to S3. On Kinesis every message enters through ``input`` and a
Firehose delivery stream archives that channel. On RabbitMQ the exchanges route, so the
archiver is a consumer of ``input`` - there, a Wire Tap of every channel (its own durable queues,
bound to both exchanges) - under the consumer group ``audit``, and it writes what the archiver
processor writes through Firehose (:mod:`rdss.archive.entries`): objects of gzip members of archive
entries under ``audit/year=/month=/day=/hour=/`` prefixes of the arrival hour, to a directory
or an S3 bucket, so every reader reads either archive unchanged. An entry's identity comes
from the transport: the channel's name as its stream, the delivery's partition (queue, or
the memory bus's partition) as its shard and its position as its sequence number. (On
RabbitMQ a position names one delivery: a message redelivered after a crash is a new
delivery, so it may be archived again under another identity.)

Like every RabbitMQ consumer group, its queues exist from its first start (or from
``gateway.transport.declare("input", "audit")``): start it before traffic. Records are settled
only once the object that holds them is written, so a crash archives a buffer again rather
than losing it (at least once, as Firehose is).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from rdss.archive import entries as archive
from rdss.gateway.backend import Consumer, Delivery, Transport

_log = logging.getLogger(__name__)

#: The consumer group whose queues are the Wire Tap.
AUDIT_GROUP = "audit"


class Sink(Protocol):
    """Where archive objects go."""

    def put(self, key: str, body: bytes) -> None:
        """Store ``body`` under ``key`` durably (raise if it could not be)."""
        ...


@dataclass(frozen=True)
class DirectorySink:
    """Archive objects as files under ``root`` (the key's slashes make the folders)."""

    root: Path

    def put(self, key: str, body: bytes) -> None:
        path = self.root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(path.name + ".partial")
        partial.write_bytes(body)
        partial.replace(path)  # whole or absent: a reader never sees half an object

    def __str__(self) -> str:
        return str(self.root)


@dataclass(frozen=True)
class S3Sink:
    """Archive objects in an S3 bucket, under ``prefix``."""

    s3: Any
    bucket: str
    prefix: str = ""

    def put(self, key: str, body: bytes) -> None:
        self.s3.put_object(Bucket=self.bucket, Key=self.prefix + key, Body=body)

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"


def open_sink(target: str, *, s3: Any = None) -> Sink:
    """``s3://BUCKET[/PREFIX]`` or a directory path."""
    if target.startswith("s3://"):
        parts = urlsplit(target)
        if not parts.netloc:
            raise ValueError(f"{target!r}: expected s3://BUCKET[/PREFIX]")
        prefix = parts.path.lstrip("/")
        if prefix and not prefix.endswith("/"):
            prefix += "/"
        if s3 is None:
            from rdss.aws.clients import client

            s3 = client("s3")
        return S3Sink(s3, parts.netloc, prefix)
    return DirectorySink(Path(target))


@dataclass(frozen=True)
class Buffering:
    """When the buffer becomes an object: it holds ``size`` bytes, or its first record is
    ``seconds`` old (Firehose's size and interval buffering hints)."""

    size: int
    seconds: float

    def due(self, size: int, age: float) -> bool:
        return size >= self.size or age >= self.seconds


@dataclass
class ArchiverStats:
    records: int = 0
    objects: int = 0
    keys: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"records": self.records, "objects": self.objects, "keys": list(self.keys)}


class Archiver:
    """Reads every message dispatched into a messaging system and archives it (see the module)."""

    def __init__(
        self,
        transport: Transport,
        sink: Sink,
        *,
        group: str = AUDIT_GROUP,
        prefix: str = "audit/",
        name: str = "rdss-audit",
        buffer_bytes: int = 5 * 1024 * 1024,
        buffer_seconds: float = 60.0,
        batch_size: int = 500,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """
        Args:
            prefix: the archive's prefix, as the Firehose delivery stream's (``audit/``).
            name: names the objects, as a delivery stream's name does in Firehose's keys.
            buffer_bytes, buffer_seconds: an object is written when the buffer holds this much
                or is this old (Firehose's size and interval hints).
        """
        self.consumer: Consumer = transport.consumer("input", group=group, start="earliest")
        self.sink = sink
        self.prefix = prefix
        self.name = name
        self.buffering = Buffering(buffer_bytes, buffer_seconds)
        self.batch_size = batch_size
        self.clock = clock
        self.stats = ArchiverStats()
        self._buffer: list[Delivery] = []
        self._size = 0
        self._opened = 0.0

    def step(self, wait: float = 0.0) -> int:
        """Read what is there; write an object when one is due. Returns the records read."""
        deliveries = self.consumer.poll(self.batch_size, wait=wait)
        for delivery in deliveries:
            if not self._buffer:
                self._opened = self.clock()
            self._buffer.append(delivery)
            self._size += len(delivery.payload)
        if self._buffer and self.buffering.due(self._size, self.clock() - self._opened):
            self.flush()
        return len(deliveries)

    def flush(self) -> None:
        """Write the buffer as one object now, then settle its records."""
        if not self._buffer:
            return
        moment = datetime.fromtimestamp(self._opened or self.clock(), UTC)
        key = archive.object_key(self.prefix, moment, self.name)
        entries = [
            archive.frame(
                d.payload,
                stream=d.channel,
                shard=d.partition,
                sequence_number=d.position,
                partition_key=d.key,
                arrival=d.arrived,
            )
            for d in self._buffer
        ]
        self.sink.put(key, b"".join(member.data for member in archive.pack(entries)))
        self.consumer.settle(self._buffer)
        self.consumer.commit()
        self.stats.records += len(self._buffer)
        self.stats.objects += 1
        self.stats.keys.append(key)
        _log.info("archived %d record(s) in %s", len(self._buffer), key)
        self._buffer, self._size = [], 0

    def run(
        self,
        *,
        stop: threading.Event | None = None,
        idle_timeout: float | None = None,
        max_records: int | None = None,
        poll_interval: float = 0.5,
    ) -> ArchiverStats:
        """Archive until ``stop`` is set, nothing arrived for ``idle_timeout`` seconds or
        ``max_records`` were archived; what is buffered is written before returning."""
        stop = stop or threading.Event()
        idle_since = time.monotonic()
        try:
            while not stop.is_set():
                if self.step(wait=poll_interval):
                    idle_since = time.monotonic()
                elif idle_timeout is not None and time.monotonic() - idle_since >= idle_timeout:
                    break
                if max_records is not None and self.stats.records + len(self._buffer) >= max_records:
                    break
        finally:
            try:
                self.flush()
            finally:  # a write that failed still gives the group's leases back: a restart reads at once
                self.consumer.close()
        return self.stats
