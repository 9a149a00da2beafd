"""The redelivery counter of classic queues: how often a message was handed to a consumer that
never answered.

Only for ``queue_type=classic``: on quorum queues (the default) RabbitMQ itself counts every
return of a message (``x-delivery-count``) and dead-letters it past ``x-delivery-limit``, one
count for all consumers on all hosts, and :class:`BrokerCounts` stands in for this counter. A
per-host file cannot do that: consumers of one queue on two hosts count separately.

RabbitMQ marks a message it delivers again after a consumer's channel closed without an ack
(the consumer crashed, was killed, lost its connection) with the ``redelivered`` flag - a flag,
not a count. A message that crashes every consumer it reaches (a poison message) would loop for
ever. Mosaic's answer, followed here: count redeliveries per message *outside* the consumer
process, and dead-letter a message once its count exceeds a limit. The count cannot travel with
the message (the consumer dies before it could republish it) nor live in the consumer's memory
(lost with the crash).

Why SQLite on local disk: the count must survive the process that crashed, and be shared by
every consumer process of the queue on the host (a restarted worker, competing workers). A
SQLite file does both with no server to run: each increment is a committed transaction before
the message is handed over; WAL mode with ``synchronous=NORMAL`` makes a commit survive the
process being killed (the write is in the WAL file - only a power failure can lose the last
commits, and then the count merely restarts a little lower); concurrent processes serialise on
SQLite's file lock (``busy_timeout``). Consumers of one queue on *several* hosts need a shared
store instead (Mosaic uses PostgreSQL); :class:`RedeliveryCounter` is the protocol such a store
implements.

A consumer that *knows* messages will come back through no fault of theirs - it noticed its
connection drop, or it is closing while holding them - forgives them in advance
(:meth:`RedeliveryCounter.forgive`: one off the count), so flaky networks and restarts do not
dead-letter healthy messages; only a consumer that dies cannot, and that is what is counted.

Only redelivered (or forgiven) deliveries touch the store (a first delivery is never counted), and a count is
removed when its message is finally acknowledged or dead-lettered, so the happy path costs
nothing and the table holds only messages in trouble. Rows untouched for ``retention`` seconds
are purged when a counter opens.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from rdss.repository.sqlite import connect

#: Rows older than this (seconds since their last increment) are purged: a week, like the channels.
RETENTION = 7 * 24 * 3600.0


class RedeliveryCounter(Protocol):
    """Redelivery counts by key (queue and messageId), kept outside the consumer process."""

    def increment(self, keys: Sequence[str]) -> dict[str, int]:
        """Add one to each key's count (durably, before returning); the new counts."""
        ...

    def forget(self, keys: Sequence[str]) -> None:
        """Drop these counts: the messages were acknowledged or dead-lettered."""
        ...

    def forgive(self, keys: Sequence[str]) -> None:
        """These messages will be redelivered through no fault of theirs (their consumer lost its
        connection, or closed while holding them): take one off each count in advance, so the
        redelivery that follows does not count against them."""
        ...

    def count(self, key: str) -> int:
        """The current count (0 when unknown)."""
        ...

    def close(self) -> None:
        """Release the store."""
        ...


class SqliteRedeliveries:
    """A :class:`RedeliveryCounter` in a SQLite file (table ``redeliveries``)."""

    def __init__(
        self, path: str | Path, *, retention: float = RETENTION, clock: Callable[[], float] = time.time
    ) -> None:
        self.path = Path(path)
        self.clock = clock
        self._lock = threading.Lock()
        self._db = connect(self.path)
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS redeliveries "
            "(key TEXT PRIMARY KEY, count INTEGER NOT NULL, updated REAL NOT NULL)"
        )
        self._db.execute("DELETE FROM redeliveries WHERE updated < ?", (clock() - retention,))

    def increment(self, keys: Sequence[str]) -> dict[str, int]:
        return self._add(keys, 1)

    def forgive(self, keys: Sequence[str]) -> None:
        self._add(keys, -1)

    def _add(self, keys: Sequence[str], step: int) -> dict[str, int]:
        if not keys:
            return {}
        now = self.clock()
        counts: dict[str, int] = {}
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for key in keys:
                    row = self._db.execute(
                        "INSERT INTO redeliveries (key, count, updated) VALUES (?, ?, ?) ON CONFLICT(key) "
                        "DO UPDATE SET count = count + excluded.count, updated = excluded.updated RETURNING count",
                        (key, step, now),
                    ).fetchone()
                    counts[key] = int(row[0])
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return counts

    def forget(self, keys: Sequence[str]) -> None:
        if not keys:
            return
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.executemany("DELETE FROM redeliveries WHERE key = ?", [(key,) for key in keys])
            self._db.execute("COMMIT")

    def count(self, key: str) -> int:
        with self._lock:
            row = self._db.execute("SELECT count FROM redeliveries WHERE key = ?", (key,)).fetchone()
        return int(row[0]) if row else 0

    def close(self) -> None:
        with self._lock:
            self._db.close()


class ForgivenReturns:
    """The :class:`RedeliveryCounter` of quorum queues, where RabbitMQ keeps the count with the
    message (``x-delivery-count``, the same for every consumer on every host).

    RabbitMQ 3.x counts *every* return, including the messages a consumer held when it lost its
    connection or closed a receiver: those come back through no fault of theirs. This process
    remembers how many such returns it caused per message (:meth:`forgive`), and the consumer
    takes them off the broker's count when the message comes back (:meth:`count`). Memory only:
    what a process that exits while holding messages caused is counted against them (keep
    ``redeliveries`` above how often that happens to the same message). :meth:`increment` counts
    nothing - the broker does.
    """

    #: Messages remembered at most (the oldest forgotten first): they went to other consumers.
    LIMIT = 100_000

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._forgiven: OrderedDict[str, int] = OrderedDict()

    def increment(self, keys: Sequence[str]) -> dict[str, int]:
        return {}

    def forgive(self, keys: Sequence[str]) -> None:
        with self._lock:
            for key in keys:
                self._forgiven[key] = self._forgiven.pop(key, 0) + 1
            while len(self._forgiven) > self.LIMIT:
                self._forgiven.popitem(last=False)

    def forget(self, keys: Sequence[str]) -> None:
        with self._lock:
            for key in keys:
                self._forgiven.pop(key, None)

    def count(self, key: str) -> int:
        """Returns of this message that this process caused (to take off ``x-delivery-count``)."""
        with self._lock:
            return self._forgiven.get(key, 0)

    def close(self) -> None:
        """Nothing to release: one instance serves the whole process, beyond any one transport."""
