"""The Local Data Repository in a SQLite file on the application's host: the default of a
gateway outside AWS (``ldr=sqlite:///path``; the RabbitMQ backend's state file)."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from rdss.host.statedir import StateError, creatable
from rdss.repository.entries import Entry

#: The first bytes of every SQLite database file.
_HEADER = b"SQLite format 3\x00"


def connect(path: str | Path) -> sqlite3.Connection:
    """A SQLite connection set up for several processes sharing one file durably enough to
    survive any of them being killed (WAL, ``synchronous=NORMAL``, a busy timeout).

    The file is created in a directory that exists, or under the state directory
    (:func:`rdss.host.statedir.creatable`); a file that is there already must be a SQLite database:
    ``ldr=sqlite:///etc/passwd`` is refused without a byte of it written.

    Raises:
        StateError: a directory, not a SQLite file, a missing directory elsewhere, or SQLite
            cannot open it (a ValueError: a malformed ``ldr=`` or ``state=``).
    """
    target = Path(path)
    if target.is_dir():
        raise StateError(f"{target} is a directory, not a SQLite file")
    if target.exists() and not target.is_file():  # a FIFO or a device: reading its header would block for ever
        raise StateError(f"{target} is not a regular file, so not a SQLite file")
    try:
        with target.open("rb") as existing:
            header = existing.read(len(_HEADER))
    except FileNotFoundError:
        creatable(target)
    except OSError as error:
        raise StateError(f"cannot open {target}: {error.strerror or error}") from None
    else:
        if header and header != _HEADER:
            raise StateError(f"{target} is not a SQLite file")
    try:
        connection = sqlite3.connect(str(target), timeout=30.0, isolation_level=None, check_same_thread=False)
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=NORMAL")
    except sqlite3.Error as error:
        raise StateError(f"cannot use {target} as a SQLite file: {error}") from None
    return connection


class SqliteRepository:
    """The Local Data Repository of an application: a table in a SQLite file of its host, one
    row per (application, messageId), shared by the application's processes on that host.

    The spec's repository is the application's own ("local"); RabbitMQ clients keep it next to
    their redelivery counts, Kinesis gateways outside AWS in a file of their own.
    """

    def __init__(self, path: str | Path, application: str) -> None:
        self.application = application
        self._lock = threading.Lock()
        self._db = connect(path)
        try:
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS messages (application TEXT NOT NULL, message_id TEXT NOT NULL, "
                "message_class TEXT, message_type TEXT, sequence TEXT, position INTEGER, status TEXT NOT NULL, "
                "return_address TEXT, correlation_id TEXT, updated REAL NOT NULL, "
                "PRIMARY KEY (application, message_id))"
            )
        except sqlite3.Error as error:  # read-only, or a database of something else
            self._db.close()
            raise StateError(f"cannot keep a Local Data Repository in {path}: {error}") from None
        # the code a message received and moved instead of processed was moved with (a column
        # files written before it existed gain on first use)
        # and the versions of a message translated for the application (columns files written
        # before they existed gain on first use)
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(messages)")}
        for column in ("error_code", "translated_from", "delivered_as"):
            if column not in columns:
                with contextlib.suppress(sqlite3.OperationalError):  # another process added it first
                    self._db.execute(f"ALTER TABLE messages ADD COLUMN {column} TEXT")

    def record(self, entries: Sequence[Entry]) -> None:
        if not entries:
            return
        now = time.time()
        rows = [
            (
                self.application,
                e.message_id,
                e.message_class,
                e.message_type,
                e.sequence,
                e.position,
                e.status,
                e.return_address,
                e.correlation_id,
                now,
                e.error_code,
                e.translated_from,
                e.delivered_as,
            )
            for e in entries
        ]
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany(
                    "INSERT OR REPLACE INTO messages (application, message_id, message_class, message_type, sequence, "
                    "position, status, return_address, correlation_id, updated, error_code, translated_from, "
                    "delivered_as) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    rows,
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def statuses(self, message_ids: Sequence[str]) -> dict[str, str]:
        found: dict[str, str] = {}
        with self._lock:
            for start in range(0, len(message_ids), 500):
                chunk = list(message_ids[start : start + 500])
                marks = ",".join("?" * len(chunk))
                query = f"SELECT message_id, status FROM messages WHERE application = ? AND message_id IN ({marks})"
                found.update(self._db.execute(query, [self.application, *chunk]).fetchall())
        return found

    def entry(self, message_id: str) -> Entry | None:
        with self._lock:
            row = self._db.execute(
                "SELECT message_class, message_type, sequence, position, status, return_address, correlation_id, "
                "error_code, translated_from, delivered_as FROM messages WHERE application = ? AND message_id = ?",
                (self.application, message_id),
            ).fetchone()
        if row is None:
            return None
        return Entry(
            message_id,
            row[0] or "",
            row[1] or "",
            row[2] or "",
            int(row[3] or 1),
            row[4],
            row[5],
            row[6],
            row[7],
            row[8],
            row[9],
        )

    def close(self) -> None:
        with self._lock, contextlib.suppress(sqlite3.Error):
            self._db.close()
