"""The inline broker's record of messageIds (memory://, amqp://): which message each id named
first, so that another message under the same id is a conflict, not a resend.

On Kinesis the broker claims every messageId in the deployment's ``messages`` table and tells a
resend from a conflict by a digest (:mod:`rdss.model.conflicts`). Where there is no broker
function the inline broker does the same when a message is published to ``input``, against one
of these stores: the memory bus's (every gateway of the process), or a SQLite table in the
``amqp://`` URL's state file (every gateway of the host; producers on other hosts keep their own).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from rdss.model.conflicts import CONFLICT
from rdss.repository.entries import RECEIVED, RETENTION_SECONDS
from rdss.repository.sqlite import connect


@dataclass(frozen=True)
class Claimed:
    """The message an id named first: its digest and when it was published."""

    digest: str
    at: float


class MessageClaims(Protocol):
    def claim(self, message_id: str, digest: str) -> Claimed | None:
        """Claim ``message_id`` for the message with ``digest``; None when it is new, else the
        first claim (a resend when the digests agree; a conflict, recorded, when not)."""
        ...

    def status(self, message_id: str) -> list[tuple[str, str]]:
        """(status, digest) of every message seen under the id: RECEIVED first, then each
        CONFLICT."""
        ...


@dataclass
class MemoryClaims:
    """Claims in memory, for one bus."""

    clock: Callable[[], float] = time.time
    _claims: dict[str, list[tuple[str, str, float]]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def claim(self, message_id: str, digest: str) -> Claimed | None:
        with self._lock:
            found = self._claims.get(message_id)
            if found is None:
                self._claims[message_id] = [(RECEIVED, digest, self.clock())]
                return None
            _, first, at = found[0]
            if first != digest and all(d != digest for _, d, _ in found):
                found.append((CONFLICT, digest, self.clock()))
            return Claimed(first, at)

    def status(self, message_id: str) -> list[tuple[str, str]]:
        with self._lock:
            return [(status, digest) for status, digest, _ in self._claims.get(message_id, [])]


class SqliteClaims:
    """Claims in a SQLite file (table ``message_claims``), kept as long as the channels keep
    records (:data:`rdss.repository.entries.RETENTION_SECONDS`)."""

    def __init__(self, path: str | Path, *, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._db = connect(path)
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS message_claims (message_id TEXT NOT NULL, digest TEXT NOT NULL, "
            "status TEXT NOT NULL, at REAL NOT NULL, PRIMARY KEY (message_id, digest))"
        )
        self._db.execute("DELETE FROM message_claims WHERE at < ?", (clock() - RETENTION_SECONDS,))

    def claim(self, message_id: str, digest: str) -> Claimed | None:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                first = self._db.execute(
                    "SELECT digest, at FROM message_claims WHERE message_id = ? AND status = ?", (message_id, RECEIVED)
                ).fetchone()
                status = RECEIVED if first is None else CONFLICT if first[0] != digest else None
                if status is not None:
                    self._db.execute(
                        "INSERT OR IGNORE INTO message_claims VALUES (?, ?, ?, ?)",
                        (message_id, digest, status, self.clock()),
                    )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return None if first is None else Claimed(str(first[0]), float(first[1]))

    def status(self, message_id: str) -> list[tuple[str, str]]:
        with self._lock:
            rows = self._db.execute(
                "SELECT status, digest FROM message_claims WHERE message_id = ? ORDER BY status = ?, at",
                (message_id, CONFLICT),
            ).fetchall()
        return [(str(status), str(digest)) for status, digest in rows]
