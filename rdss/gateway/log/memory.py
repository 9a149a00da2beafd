"""The memory backend (``memory://<bus>``): the spec's Mock, for application tests.

A bus lives in the process; every gateway opened with the same bus name shares it, so a test
can run a producer, a consumer and a responder side by side, close a consumer and open another
to see it resume, or run competing consumers of one group. Channels are created on first use
with the bus's partition count (``?partitions=N``); a key picks the partition (as Kinesis hashes
a partition key), so per-key order holds and several partitions exercise ordering and
competing consumers. :meth:`MemoryBus.reshard` closes every partition of a channel and opens new
ones whose parents are the old ones, as a Kinesis split or merge does.

Publishing goes through the same :class:`rdss.aws.putrecords.PutRecordsBatcher` as Kinesis (the bus
answers its ``put_records``), so batching, per-record retries, the backoff and the GENERR005
give-up behave the same; :attr:`MemoryBus.fault` can throttle entries to exercise them. There is
no broker function on the bus, so the backend plays its part (:mod:`rdss.gateway.inline_broker`):
a record put on ``input`` stays there as sent (a consumer of ``input`` sees every one) and the bus
copies it, as it lands, to the channel its content routes to (or, invalid, decorated to
``invalid`` or ``error``).
Leases, checkpoints and the Local Data Repository are in memory, on the bus.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rdss.aws.clients import client as aws_client
from rdss.gateway.backend import (
    Backend,
    Outgoing,
    Settings,
    local_data_repository,
)
from rdss.gateway.checkpoints import MemoryLeaseStore
from rdss.gateway.claims import MemoryClaims
from rdss.gateway.inline_broker import INPUT, InlineBroker
from rdss.gateway.leases import PartitionInfo
from rdss.gateway.log.base import LogTransport
from rdss.gateway.streams import LogRecord, ReadResult, StartAt
from rdss.gateway.url import GatewayURL
from rdss.repository.memory import MemoryRepository

#: fault(channel, payload) -> an error code to report for that entry (e.g. throttling), or None.
Fault = Callable[[str, bytes], str | None]
#: broker(channel, key, payload) -> the (channel, key, payload) a record put there is copied to, or
#: None (the key is the broker's: a producer's ``moved:`` key never survives a rejection).
BrokerFunction = Callable[[str, str, bytes], tuple[str, str, bytes] | None]


@dataclass
class _Partition:
    id: str
    parents: tuple[str, ...] = ()
    closed: bool = False
    records: list[LogRecord] = field(default_factory=list)


class MemoryChannel:
    """One channel: partitions of records."""

    def __init__(self, name: str, partitions: int) -> None:
        self.name = name
        self._lock = threading.Lock()
        self._partitions: dict[str, _Partition] = {}
        self._counter = 0
        self._open(partitions, ())

    def _open(self, count: int, parents: tuple[str, ...]) -> None:
        for _ in range(count):
            name = f"partition-{self._counter:06d}"
            self._counter += 1
            self._partitions[name] = _Partition(name, parents)

    def append(self, key: str, payload: bytes) -> tuple[str, str]:
        """Add a record; returns (partition, position)."""
        with self._lock:
            open_ = [p for p in self._partitions.values() if not p.closed]
            digest = int.from_bytes(hashlib.md5(key.encode("utf-8"), usedforsecurity=False).digest()[:8], "big")
            partition = open_[digest % len(open_)]
            position = str(len(partition.records))
            partition.records.append(LogRecord(position, payload, key, time.time()))
            return partition.id, position

    def reshard(self, partitions: int) -> None:
        """Close every open partition; open ``partitions`` new ones, children of all of them."""
        with self._lock:
            parents = tuple(p.id for p in self._partitions.values() if not p.closed)
            for name in parents:
                self._partitions[name].closed = True
            self._open(partitions, parents)

    def listing(self) -> list[PartitionInfo]:
        with self._lock:
            return [PartitionInfo(p.id, p.parents, p.closed) for p in self._partitions.values()]

    def slice(self, partition: str, start: int, limit: int) -> tuple[list[LogRecord], int, bool]:
        """Records from index ``start``; the next index; whether the partition is closed and read."""
        with self._lock:
            found = self._partitions[partition]
            records = found.records[start : start + limit]
            end = start + len(records)
            return records, end, found.closed and end >= len(found.records)

    def size(self, partition: str) -> int:
        with self._lock:
            return len(self._partitions[partition].records)

    def records(self) -> list[LogRecord]:
        """Every record of every partition (partition by partition), for tests."""
        with self._lock:
            return [r for p in self._partitions.values() for r in p.records]


class MemoryBus:
    """Channels, leases, checkpoints and Local Data Repositories of one in-process bus."""

    def __init__(self, name: str, partitions: int = 1) -> None:
        self.name = name
        self.partitions = partitions
        self.fault: Fault | None = None
        #: Plays the broker's part for records put on ``input`` (set by the transport).
        self.broker: BrokerFunction | None = None
        self._channels: dict[str, MemoryChannel] = {}
        self._leases: dict[str, MemoryLeaseStore] = {}
        self._repositories: dict[str, MemoryRepository] = {}
        #: The messageIds published to ``input`` and the message each named first.
        self.claims = MemoryClaims()
        self._lock = threading.Lock()

    def channel(self, name: str) -> MemoryChannel:
        """The channel, created on first use."""
        with self._lock:
            found = self._channels.get(name)
            if found is None:
                found = self._channels[name] = MemoryChannel(name, self.partitions)
            return found

    def leases(self, key: str) -> MemoryLeaseStore:
        with self._lock:
            return self._leases.setdefault(key, MemoryLeaseStore())

    def repository(self, application: str) -> MemoryRepository:
        with self._lock:
            return self._repositories.setdefault(application, MemoryRepository())

    def reshard(self, channel: str, partitions: int) -> None:
        self.channel(channel).reshard(partitions)

    def payloads(self, channel: str) -> list[bytes]:
        """Every payload on a channel, for tests."""
        return [r.payload for r in self.channel(channel).records()]

    # PutRecords, as PutRecordsBatcher calls it
    def put_records(self, StreamName: str, Records: list[dict[str, Any]]) -> dict[str, Any]:
        channel = self.channel(StreamName)
        results: list[dict[str, Any]] = []
        for entry in Records:
            code = self.fault(StreamName, entry["Data"]) if self.fault is not None else None
            if code is not None:
                results.append({"ErrorCode": code, "ErrorMessage": "injected by the memory bus"})
                continue
            partition, position = channel.append(entry["PartitionKey"], entry["Data"])
            results.append({"ShardId": partition, "SequenceNumber": position})
            copy = self.broker(StreamName, entry["PartitionKey"], entry["Data"]) if self.broker else None
            if copy is not None:
                self.channel(copy[0]).append(copy[1], copy[2])
        failed = sum(1 for r in results if "ErrorCode" in r)
        return {"FailedRecordCount": failed, "Records": results}


_BUSES: dict[str, MemoryBus] = {}
_BUSES_LOCK = threading.Lock()


def bus(name: str, partitions: int | None = None) -> MemoryBus:
    """The process's bus of that name, created on first use."""
    with _BUSES_LOCK:
        found = _BUSES.get(name)
        if found is None:
            found = _BUSES[name] = MemoryBus(name, partitions or 1)
        return found


def discard(name: str) -> None:
    """Forget a bus (tests start from an empty one)."""
    with _BUSES_LOCK:
        _BUSES.pop(name, None)


class MemoryLog:
    """A :class:`rdss.gateway.streams.PartitionLog` over a memory channel."""

    concurrent = False

    def __init__(self, channel: MemoryChannel, logical: str) -> None:
        self.memory = channel
        self.channel = logical
        self._next: dict[str, int] = {}

    def partitions(self) -> list[PartitionInfo]:
        return self.memory.listing()

    def open(self, partition: str, start: StartAt) -> None:
        if start.kind == "earliest":
            index = 0
        elif start.kind == "latest":
            index = self.memory.size(partition)
        elif start.kind == "after":
            index = int(start.position or "-1") + 1
        else:
            index = int(start.position or "0")
        self._next[partition] = index

    def read(self, partition: str, limit: int) -> ReadResult:
        records, end, ended = self.memory.slice(partition, self._next.get(partition, 0), limit)
        self._next[partition] = end
        return ReadResult(records, ended)

    def forget(self, partition: str) -> None:
        self._next.pop(partition, None)


class MemoryTransport(LogTransport):
    """The memory bus as a :class:`rdss.gateway.backend.Transport`."""

    scheme = "memory"
    #: The broker function, played on publishing to ``input`` (there is no broker Lambda here).
    inline: InlineBroker

    def __init__(self, memory: MemoryBus, settings: Settings, *, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(settings, memory, clock=clock)
        self.bus = memory
        self.inline = InlineBroker(claims=memory.claims)
        memory.broker = self._broker

    def _broker(self, stream: str, key: str, payload: bytes) -> tuple[str, str, bytes] | None:
        """Where a record put on ``stream`` is copied to, under which key: the broker function for
        ``input`` (a rejection keyed as the broker keys it, never as a consumer's move)."""
        if stream != self.address(INPUT):
            return None
        routed = self.inline.route(Outgoing(INPUT, payload, key))
        return None if routed.channel == INPUT else (self.address(routed.channel), routed.key, routed.payload)

    def address(self, channel: str) -> str:
        return self.settings.channels.get(channel, channel)

    def log(self, address: str, channel: str) -> MemoryLog:
        return MemoryLog(self.bus.channel(address), channel)

    def leases(self, group: str, address: str) -> MemoryLeaseStore:
        return self.bus.leases(f"{group}#{address}")


def open_backend(url: GatewayURL, settings: Settings) -> Backend:
    """The backend for ``memory://<bus>``."""
    partitions = url.param("partitions")
    memory = bus(url.name, int(partitions) if partitions else None)
    repository = local_data_repository(
        url, settings, lambda: memory.repository(settings.application), dynamodb=lambda: aws_client("dynamodb")
    )
    return Backend(MemoryTransport(memory, settings), repository)
