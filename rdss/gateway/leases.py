"""Competing consumers over shards: the lease protocol (the Kinesis Client Library's, simplified).

Every worker of a consumer group runs a :class:`LeaseCoordinator`. On each tick it

1. renews the leases it holds (a conditional write bumping ``leaseCounter``); a renewal that
   fails means another worker took the lease, and the shard is dropped at once;
2. adds a row for every shard the stream lists and the table lacks;
3. notes every row's counter: a lease whose counter has not moved for ``lease_duration`` (by
   this worker's own clock, so clocks need not agree) belongs to a dead worker and has expired;
4. balances: the target is ceil(shards / live workers). Below it, a worker takes expired or
   free leases; if there are none, it asks the most loaded worker for one, but only when that
   worker holds at least two more than it does (so two workers never trade a lease back and
   forth). A worker above the target gives nothing up unasked.

Asking is a *graceful hand-off* (as in recent versions of the KCL): the asker sets ``handoffTo``
on the lease; the owner sees it at its next renewal, stops reading the shard, finishes the
message in hand, checkpoints and releases; the asker then takes the free lease and resumes
exactly after the owner's checkpoint. Stealing outright would let both read the same records
for a while and deliver them twice. An owner that does not answer within two lease durations
(stuck, or an older worker) has its lease taken anyway.

Resharding: a child shard is *eligible* only when all its parents are finished (their rows say
``SHARD_END``), so a key's records are always processed parent first. Parents that no longer
exist (trimmed after the retention period) count as finished.

Ticks run on a background thread (so a slow handler does not lose its leases) and whenever the
consumer asks; a lock serialises them with checkpoints, which are conditional writes too.
"""

from __future__ import annotations

import logging
import math
import os
import random
import socket
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from rdss.gateway.checkpoints import LATEST, SHARD_END, TRIM_HORIZON, Lease, LeaseStore

_log = logging.getLogger(__name__)


def worker_id() -> str:
    """A consumer worker's unique id: host, process and a random suffix."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    """A partition as the channel lists it."""

    id: str
    parents: tuple[str, ...] = ()
    #: No more records will be added (a shard split or merged away).
    closed: bool = False


class LeaseCoordinator:
    """One worker's view of its group's leases on one channel."""

    def __init__(
        self,
        store: LeaseStore,
        worker: str,
        partitions: Callable[[], list[PartitionInfo]],
        *,
        lease_duration: float = 10.0,
        start: str = TRIM_HORIZON,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
    ) -> None:
        """
        Args:
            store: the rows of this group on this channel.
            worker: this worker's unique id (host, process, random suffix).
            partitions: lists the channel's partitions (called on every tick).
            lease_duration: a lease not renewed for this long is taken over.
            start: checkpoint of rows created for a new group: ``TRIM_HORIZON`` or ``LATEST``.
        """
        if start not in (TRIM_HORIZON, LATEST):
            raise ValueError(f"start must be {TRIM_HORIZON} or {LATEST}")
        self.store = store
        self.worker = worker
        self.list_partitions = partitions
        self.lease_duration = lease_duration
        self.renew_interval = lease_duration / 3
        self.start = start
        self.clock = clock
        self.rng = rng or random.Random()
        self._held: dict[str, Lease] = {}
        self._releasing: set[str] = set()  # held, but asked for: to be released after a commit
        self._requested: dict[str, float] = {}  # leases this worker asked for -> when
        self._observed: dict[str, tuple[int, str | None, float]] = {}
        self._lock = threading.RLock()
        self._next_tick = -math.inf
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- what the consumer uses ----------------------------------------------------------------
    def held(self) -> dict[str, Lease]:
        """The leases this worker holds and should read now (not those being handed off)."""
        with self._lock:
            return {p: lease for p, lease in self._held.items() if p not in self._releasing}

    def handoffs(self) -> set[str]:
        """Partitions another worker asked for: commit them, then :meth:`release` them."""
        with self._lock:
            return self._releasing & set(self._held)

    def release(self, partition: str) -> None:
        """Give a held partition up (after its last checkpoint), e.g. to the worker that asked."""
        with self._lock:
            lease = self._held.pop(partition, None)
            self._releasing.discard(partition)
            if lease is not None and self.store.release(lease) is not None:
                _log.info("handed the lease on %s over (asked for by %s)", partition, lease.handoff or "nobody")

    def maybe_tick(self) -> None:
        """Tick if a renewal is due."""
        if self.clock() >= self._next_tick:
            self.tick()

    def tick_soon(self) -> None:
        """Make the next :meth:`maybe_tick` run (e.g. a parent just finished: take its children)."""
        self._next_tick = -math.inf

    def checkpoint(self, partition: str, position: str) -> bool:
        """Record ``position`` for a held partition (``SHARD_END`` finishes it and lets it go).

        Returns False when the lease was lost: the partition must be dropped unprocessed.
        """
        with self._lock:
            lease = self._held.get(partition)
            if lease is None:
                return False
            updated = self.store.checkpoint(lease, position)
            if updated is None:
                _log.warning("lease on %s lost to another worker before checkpoint %s", partition, position)
                del self._held[partition]
                return False
            if position == SHARD_END:
                del self._held[partition]
                self._releasing.discard(partition)
                self.tick_soon()
            else:
                self._held[partition] = updated
            return True

    def start_background(self) -> None:
        """Renew and balance on a daemon thread every third of the lease duration."""
        if self._thread is not None:
            return

        def run() -> None:
            while not self._stop.wait(self.renew_interval):
                try:
                    self.tick()
                except Exception:  # the next tick retries; the consumer's own ticks surface errors
                    _log.warning("lease renewal failed", exc_info=True)

        self._thread = threading.Thread(target=run, name=f"leases-{self.worker}", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop renewing and release every held lease, so other workers take over at once."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.renew_interval + 5)
            self._thread = None
        with self._lock:
            for lease in list(self._held.values()):
                try:
                    self.store.release(lease)
                except Exception:
                    _log.warning("could not release the lease on %s (it will expire)", lease.partition, exc_info=True)
            self._held.clear()
            self._releasing.clear()

    # -- the protocol --------------------------------------------------------------------------
    def tick(self) -> None:
        """Renew, discover, observe, balance (see the module docstring)."""
        with self._lock:
            now = self.clock()
            self._next_tick = now + self.renew_interval
            self._renew()
            rows = self._rows()
            self._observe(rows, now)
            self._balance(rows, now)

    def _renew(self) -> None:
        for partition, lease in list(self._held.items()):
            renewed = self.store.renew(lease)
            if renewed is None:
                _log.info("lease on %s taken over by another worker", partition)
                del self._held[partition]
                self._releasing.discard(partition)
                continue
            self._held[partition] = renewed
            if renewed.handoff and renewed.handoff != self.worker and partition not in self._releasing:
                _log.info("%s asked for the lease on %s: handing it over", renewed.handoff, partition)
                self._releasing.add(partition)

    def _rows(self) -> dict[str, Lease]:
        listed = self.list_partitions()
        rows = {lease.partition: lease for lease in self.store.leases()}
        missing = [info for info in listed if info.id not in rows]
        if not missing:
            return rows
        new_group = not rows
        listed_ids = {info.id for info in listed}
        for info in missing:
            is_child = any(parent in listed_ids or parent in rows for parent in info.parents)
            if new_group and self.start == LATEST:
                # a group starting from now: history (closed shards) is already behind it
                checkpoint = SHARD_END if info.closed else LATEST
            elif is_child:
                checkpoint = TRIM_HORIZON  # a child is always read from its first record
            else:
                checkpoint = self.start if new_group else TRIM_HORIZON
            self.store.create(Lease(info.id, None, 0, checkpoint, info.parents))
        return {lease.partition: lease for lease in self.store.leases()}

    def _observe(self, rows: dict[str, Lease], now: float) -> None:
        for partition, lease in rows.items():
            seen = self._observed.get(partition)
            if seen is None or seen[0] != lease.counter or seen[1] != lease.owner:
                self._observed[partition] = (lease.counter, lease.owner, now)
            held = self._held.get(partition)
            if held is not None and (lease.owner != self.worker or lease.counter != held.counter):
                _log.info("lease on %s no longer ours", partition)
                del self._held[partition]
                self._releasing.discard(partition)
            elif held is not None and lease.handoff and lease.handoff != self.worker:
                self._releasing.add(partition)

    def _expired(self, lease: Lease, now: float) -> bool:
        if lease.owner is None:
            return True
        if lease.owner == self.worker:  # ours in the table but not held (a lost write): take it back
            return lease.partition not in self._held
        return now - self._observed[lease.partition][2] > self.lease_duration

    def _balance(self, rows: dict[str, Lease], now: float) -> None:
        finished = {p for p, lease in rows.items() if lease.finished}
        eligible = [
            lease
            for lease in rows.values()
            if not lease.finished and all(parent in finished or parent not in rows for parent in lease.parents)
        ]
        for partition in list(self._requested):  # forget requests answered or overtaken
            row = rows.get(partition)
            if row is None or row.handoff != self.worker or row.owner in (None, self.worker):
                del self._requested[partition]
        if not eligible:
            return
        load = Counter(lease.owner for lease in eligible if lease.owner and not self._expired(lease, now))
        mine = sum(1 for lease in eligible if lease.partition in self._held and lease.partition not in self._releasing)
        mine += len(self._requested)
        workers = len(set(load) | {self.worker})
        target = math.ceil(len(eligible) / workers)
        self._force_overdue(rows, now)
        if mine >= target:
            return
        free = [lease for lease in eligible if lease.partition not in self._held and self._expired(lease, now)]
        self.rng.shuffle(free)  # workers starting together do not all race for the same lease
        free.sort(key=lambda lease: lease.handoff != self.worker)  # a lease handed to us first
        for lease in free[: target - mine]:
            taken = self.store.take(lease, self.worker)
            if taken is not None:
                _log.info("took the lease on %s (was %s)", lease.partition, lease.owner or "free")
                self._held[lease.partition] = taken
                mine += 1
        if free or mine >= target:
            return
        others = [(count, owner) for owner, count in load.items() if owner != self.worker]
        if not others:
            return
        count, victim = max(others)
        if count - mine < 2:
            return
        theirs = [lease for lease in eligible if lease.owner == victim and not lease.handoff]
        if not theirs:
            return
        lease = self.rng.choice(theirs)
        if self.store.request_handoff(lease, self.worker):
            _log.info("asked %s for the lease on %s (%d > %d)", victim, lease.partition, count, mine)
            self._requested[lease.partition] = now

    def _force_overdue(self, rows: dict[str, Lease], now: float) -> None:
        """Take leases whose owners ignored a hand-off request for two lease durations."""
        for partition, asked in list(self._requested.items()):
            lease = rows.get(partition)
            if lease is None or now - asked <= 2 * self.lease_duration:
                continue
            del self._requested[partition]
            taken = self.store.take(lease, self.worker)
            if taken is not None:
                _log.warning("took the lease on %s: %s did not hand it over in time", partition, lease.owner)
                self._held[partition] = taken
