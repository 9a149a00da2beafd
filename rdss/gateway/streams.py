"""A consumer over a partitioned log: written once, used by the Kinesis and memory transports.

A log transport supplies a :class:`PartitionLog` (list partitions, position a cursor, read); this
module turns it into a :class:`rdss.gateway.backend.Consumer`:

* per-partition order: each partition is read in order, and a partition's deliveries are handed
  out in that order (reads of several partitions run in parallel threads when the log allows:
  the spec wants each shard polled in its own thread);
* checkpoints: a partition's recorded position only moves past a delivery once it *and every
  earlier delivery of the partition* are settled - so a part held while its sequence is
  incomplete keeps the checkpoint behind it, and a restart reads it again;
* competing consumers: with a group, the partitions read are those this worker leases
  (:mod:`rdss.gateway.leases`); a lost lease drops the partition at once;
* resharding: a child partition is read only after its parents are finished (``SHARD_END``);
* redelivery: the partition is rewound to the earliest delivery to retry; the deliveries after
  it that were settled already (acknowledged, moved to invalid or error, dropped) are read again
  but not handed out again - settled is final, and a move must not be made twice;
* failed attempts at a delivery are counted on the partition's lease row, so a consumer
  restarted between attempts goes on counting (poison messages, ``max_attempts``).

Without a group (a browser) nothing is recorded; partitions are followed in the same order.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Literal, Protocol

from rdss.gateway.backend import Delivery, StartPosition
from rdss.gateway.checkpoints import LATEST, SHARD_END, TRIM_HORIZON
from rdss.gateway.leases import LeaseCoordinator, PartitionInfo

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LogRecord:
    """One record of a partition."""

    position: str
    payload: bytes
    key: str | None = None
    arrived: float | None = None


@dataclass(frozen=True, slots=True)
class ReadResult:
    records: list[LogRecord]
    #: The partition is closed and every record in it has now been read.
    ended: bool = False


@dataclass(frozen=True, slots=True)
class StartAt:
    """Where to position a partition's cursor."""

    kind: Literal["earliest", "latest", "after", "at"]
    position: str | None = None

    @classmethod
    def from_checkpoint(cls, checkpoint: str) -> StartAt:
        if checkpoint == TRIM_HORIZON:
            return cls("earliest")
        if checkpoint == LATEST:
            return cls("latest")
        if checkpoint == SHARD_END:
            raise ValueError("a finished partition has nothing left to read")
        return cls("after", checkpoint)


class PartitionLog(Protocol):
    """What a log transport supplies for one channel."""

    #: The logical channel name (for deliveries).
    channel: str
    #: Distinct partitions may be read from parallel threads.
    concurrent: bool

    def partitions(self) -> list[PartitionInfo]:
        """The channel's partitions now (one call to the messaging system)."""
        ...

    def open(self, partition: str, start: StartAt) -> None:
        """Position the partition's cursor (eagerly: ``latest`` means latest *now*)."""
        ...

    def read(self, partition: str, limit: int) -> ReadResult:
        """Up to ``limit`` records after the cursor, advancing it."""
        ...

    def forget(self, partition: str) -> None:
        """Drop the partition's cursor."""
        ...


@dataclass
class _Cursor:
    #: position -> settled, in delivery order, for deliveries not yet behind the checkpoint
    pending: OrderedDict[str, bool] = field(default_factory=OrderedDict)
    #: furthest position with every delivery up to it settled, and the last one recorded
    position: str | None = None
    written: str | None = None
    ended: bool = False
    #: bumped by every rewind: a read started before it is discarded
    epoch: int = 0
    #: positions settled before a rewind and not yet read again: when read, settled at once
    settled_ahead: set[str] = field(default_factory=set)


class PartitionedConsumer:
    """A :class:`rdss.gateway.backend.Consumer` over a :class:`PartitionLog`."""

    def __init__(
        self,
        log: PartitionLog,
        *,
        coordinator: LeaseCoordinator | None = None,
        start: StartPosition = "earliest",
        background: bool = True,
        refresh_interval: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """
        Args:
            coordinator: the group's lease coordinator; None browses (no leases, no checkpoints).
            start: for a browser, where to begin (``latest`` is pinned now).
            background: renew leases on a background thread (tests with a fake clock pass False).
            refresh_interval: how often a browser re-lists partitions (to find children).
        """
        self.log = log
        self.channel = log.channel
        self.coordinator = coordinator
        self.start = start
        self.refresh_interval = refresh_interval
        self.clock = clock
        self._cursors: dict[str, _Cursor] = {}
        self._finished: set[str] = set()
        self._attempts: dict[str, tuple[str, int]] = {}
        self._lock = threading.RLock()
        self._executor: ThreadPoolExecutor | None = None
        self._next_refresh = 0.0
        if coordinator is not None:
            coordinator.tick()
            if background:
                coordinator.start_background()
        else:
            self._browse(self.log.partitions(), initial=True)

    # -- Consumer ------------------------------------------------------------------------------
    def partitions(self) -> list[str]:
        if self.coordinator is None:
            if self.clock() >= self._next_refresh:
                with self._lock:  # a browser finds children soon after a parent is finished
                    self._browse(self.log.partitions(), initial=False)
            with self._lock:
                return list(self._cursors)
        held = self.coordinator.held()  # not those lost or being handed over: stop delivering them
        with self._lock:
            return [name for name in self._cursors if name in held]

    def poll(self, max_messages: int = 100, *, partition: str | None = None, wait: float = 0.0) -> list[Delivery]:
        self._maintain()
        with self._lock:
            wanted = [partition] if partition is not None else list(self._cursors)
            targets = [(p, self._cursors[p].epoch) for p in wanted if p in self._cursors and not self._cursors[p].ended]
        results = self._read(targets, max_messages)
        deliveries: list[Delivery] = []
        with self._lock:
            for (name, epoch), result in results:
                cursor = self._cursors.get(name)
                if cursor is None or cursor.epoch != epoch:
                    continue  # lost, or rewound while this read was under way: read again later
                for record in result.records:
                    if record.position in cursor.settled_ahead:  # settled before a rewind: done
                        cursor.settled_ahead.discard(record.position)
                        cursor.pending[record.position] = True
                        continue
                    cursor.pending[record.position] = False
                    deliveries.append(
                        Delivery(self.channel, name, record.position, record.payload, record.key, record.arrived)
                    )
                cursor.ended = cursor.ended or result.ended
        self._finish_ended()
        return deliveries

    def settle(self, deliveries: Sequence[Delivery]) -> None:
        with self._lock:
            for delivery in deliveries:
                cursor = self._cursors.get(delivery.partition)
                if cursor is not None and delivery.position in cursor.pending:
                    cursor.pending[delivery.position] = True

    def redeliver(self, deliveries: Sequence[Delivery]) -> None:
        with self._lock:
            by_partition: dict[str, set[str]] = {}
            for delivery in deliveries:
                by_partition.setdefault(delivery.partition, set()).add(delivery.position)
            for name, positions in by_partition.items():
                cursor = self._cursors.get(name)
                if cursor is None:
                    continue
                order = list(cursor.pending)
                index = next((i for i, position in enumerate(order) if position in positions), None)
                if index is None:
                    continue
                for position in order[index:]:
                    if cursor.pending.pop(position) and position not in positions:
                        cursor.settled_ahead.add(position)
                cursor.ended = False
                cursor.epoch += 1
                self.log.open(name, StartAt("at", order[index]))

    def record_failure(self, delivery: Delivery) -> int:
        if self.coordinator is not None:  # on the partition's row: a restart goes on counting
            return self.coordinator.store.count_attempt(delivery.partition, delivery.position)
        with self._lock:  # a browser has no group state: its counts last as long as it does
            failed_at, attempts = self._attempts.get(delivery.partition, ("", 0))
            attempts = attempts + 1 if failed_at == delivery.position else 1
            self._attempts[delivery.partition] = (delivery.position, attempts)
            return attempts

    def commit(self) -> None:
        with self._lock:
            for name in list(self._cursors):
                self._commit(name)

    def close(self) -> None:
        try:
            self.commit()
        finally:
            if self.coordinator is not None:
                self.coordinator.close()
            if self._executor is not None:
                self._executor.shutdown(wait=False)
            with self._lock:
                for name in list(self._cursors):
                    self.log.forget(name)
                self._cursors.clear()

    # -- partitions ----------------------------------------------------------------------------
    def _maintain(self) -> None:
        if self.coordinator is None:
            if self.clock() >= self._next_refresh:
                with self._lock:
                    self._browse(self.log.partitions(), initial=False)
            return
        self.coordinator.maybe_tick()
        with self._lock:
            for name in self.coordinator.handoffs():
                if name in self._cursors:
                    self._commit(name)  # everything settled so far, then let the asker have it
                if name in self._cursors:
                    del self._cursors[name]
                    self.log.forget(name)
                self.coordinator.release(name)
            held = self.coordinator.held()
            for name in [n for n in self._cursors if n not in held]:
                _log.info("%s: no longer reading %s (lease gone)", self.channel, name)
                del self._cursors[name]
                self.log.forget(name)
            for name, lease in held.items():
                if name not in self._cursors and not lease.finished:
                    cursor = self._cursors[name] = _Cursor()
                    if lease.checkpoint not in (TRIM_HORIZON, LATEST):
                        cursor.position = cursor.written = lease.checkpoint
                    self.log.open(name, StartAt.from_checkpoint(lease.checkpoint))

    def _browse(self, listed: list[PartitionInfo], *, initial: bool) -> None:
        """A browser follows every partition, parents before children."""
        self._next_refresh = self.clock() + self.refresh_interval
        names = {info.id for info in listed}
        for info in listed:
            if info.id in self._cursors or info.id in self._finished:
                continue
            if initial and self.start == "latest" and info.closed:
                self._finished.add(info.id)  # history: behind a browser that starts now
                continue
            if not all(parent in self._finished or parent not in names for parent in info.parents):
                continue
            self._cursors[info.id] = _Cursor()
            is_child = any(parent in names for parent in info.parents)
            pinned = initial and self.start == "latest" and not is_child
            self.log.open(info.id, StartAt("latest") if pinned else StartAt("earliest"))

    def _read(self, targets: list[tuple[str, int]], limit: int) -> list[tuple[tuple[str, int], ReadResult]]:
        if not targets:
            return []
        failures: list[BaseException] = []

        def one(target: tuple[str, int]) -> tuple[tuple[str, int], ReadResult] | None:
            try:
                return target, self.log.read(target[0], limit)
            except Exception as error:
                _log.warning("%s: reading %s failed: %s", self.channel, target[0], error)
                failures.append(error)
                return None

        if self.log.concurrent and len(targets) > 1:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=32, thread_name_prefix=f"read-{self.channel}")
            outcomes = list(self._executor.map(one, targets))
        else:
            outcomes = [one(target) for target in targets]
        results = [outcome for outcome in outcomes if outcome is not None]
        if failures and not results:
            raise failures[0]
        return results

    # -- checkpoints ---------------------------------------------------------------------------
    def _finish_ended(self) -> None:
        with self._lock:
            for name in [n for n, c in self._cursors.items() if c.ended and not c.pending]:
                self._commit(name)

    def _commit(self, name: str) -> None:
        cursor = self._cursors[name]
        while cursor.pending:
            position, settled = next(iter(cursor.pending.items()))
            if not settled:
                break
            cursor.pending.popitem(last=False)
            cursor.position = position
        if cursor.ended and not cursor.pending:
            self._finish(name)
            return
        if self.coordinator is None or cursor.position is None or cursor.position == cursor.written:
            return
        if self.coordinator.checkpoint(name, cursor.position):
            cursor.written = cursor.position
        else:
            del self._cursors[name]
            self.log.forget(name)

    def _finish(self, name: str) -> None:
        """Every record of a closed partition is settled: finish it, so its children are read."""
        del self._cursors[name]
        self.log.forget(name)
        self._finished.add(name)
        self._next_refresh = 0.0
        if self.coordinator is not None and self.coordinator.checkpoint(name, SHARD_END):
            _log.info("%s: finished %s (SHARD_END)", self.channel, name)
