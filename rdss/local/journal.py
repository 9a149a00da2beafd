"""The emulator's write-ahead journal: each request that changed its state, in the order applied.

One file of frames. A frame is a 12-byte header - the lengths of its two parts and the CRC-32 of
both (big-endian unsigned 32-bit integers) - then ``meta`` (compact JSON: the entry's index, the
moment it was applied, the status moto answered and the request's WSGI environ) and ``body``
(the request's bytes, as they came). Frames are only ever appended, one ``write`` each, so a
crash can leave at most the last frame short or torn: :class:`JournalReader` stops there and
reports where the whole frames end, and :meth:`Journal.open` cuts the file back to that point.

Durability is a group commit: :meth:`Journal.append` writes, :meth:`Journal.sync` returns once
the entry is on disk (``fdatasync``), and one call syncs every entry appended before it, so
concurrent requests share the disk's latency.
"""

from __future__ import annotations

import os
import struct
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

_HEADER = struct.Struct(">III")
#: A frame larger than this is corruption, not a request (moto takes bodies up to S3's 5 GiB
#: single PUT; the runtime never sends more than a few MiB).
_LARGEST_FRAME = 1 << 31


@dataclass(frozen=True)
class Entry:
    """One request that changed the emulator's state."""

    #: Position in the emulator's history (1, 2, ...; never reused, across snapshots too).
    index: int
    #: When it was applied (seconds since the epoch): moto's clock during its replay.
    moment: float
    #: The HTTP status moto answered; a replay that answers otherwise has diverged.
    status: int
    #: The request's WSGI environ: its string entries (method, path, query, headers...).
    environ: dict[str, Any]
    body: bytes

    def frame(self) -> bytes:
        meta = orjson.dumps({"i": self.index, "t": self.moment, "s": self.status, "e": self.environ})
        return _HEADER.pack(len(meta), len(self.body), zlib.crc32(self.body, zlib.crc32(meta))) + meta + self.body


class JournalReader:
    """The whole frames of a journal file, in order; ``end`` is the offset after the last one
    read and ``torn`` the bytes after it that do not make a whole, intact frame."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.end = 0
        self.torn = 0

    def __iter__(self) -> Iterator[Entry]:
        if not self.path.exists():
            return
        size = self.path.stat().st_size
        with self.path.open("rb") as file:
            while True:
                header = file.read(_HEADER.size)
                if len(header) < _HEADER.size:
                    break
                meta_length, body_length, crc = _HEADER.unpack(header)
                if meta_length + body_length > _LARGEST_FRAME:
                    break
                meta, body = file.read(meta_length), file.read(body_length)
                if len(meta) < meta_length or len(body) < body_length or zlib.crc32(body, zlib.crc32(meta)) != crc:
                    break
                fields = orjson.loads(meta)
                self.end = file.tell()
                yield Entry(fields["i"], fields["t"], fields["s"], fields["e"], body)
        self.torn = size - self.end


class Journal:
    """The journal open for appending (after recovery read it)."""

    def __init__(self, path: Path, *, end: int | None = None) -> None:
        """Open ``path`` for appending, first cutting it back to ``end`` (a torn tail)."""
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        if end is not None and os.fstat(self._fd).st_size > end:
            os.ftruncate(self._fd, end)
            os.fdatasync(self._fd)
        self.size = os.fstat(self._fd).st_size
        self.entries = 0
        self._appended = 0
        self._synced = 0
        self._sync_lock = threading.Lock()

    def append(self, entry: Entry) -> None:
        """Write one entry (callers append in index order, one at a time)."""
        frame = entry.frame()
        view = memoryview(frame)
        while view:
            view = view[os.write(self._fd, view) :]
        self.size += len(frame)
        self._appended = entry.index
        self.entries += 1

    def sync(self, index: int) -> None:
        """Return once every entry up to ``index`` is on disk."""
        with self._sync_lock:
            if self._synced >= index:
                return
            target = self._appended
            os.fdatasync(self._fd)
            self._synced = target

    def restart(self) -> None:
        """Empty the journal: a snapshot now holds everything it held (entries already covered
        by the snapshot are skipped by index if this is lost in a crash)."""
        os.ftruncate(self._fd, 0)
        self.size = 0
        self.entries = 0

    def close(self) -> None:
        if self._fd >= 0:
            os.fdatasync(self._fd)
            os.close(self._fd)
            self._fd = -1
