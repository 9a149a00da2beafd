"""The emulator's write-ahead journal: each request that changed its state, in the order applied.

One file of frames, only ever appended, one ``write`` each. A frame is a 28-byte header - a magic
number, the entry's index, the lengths of ``meta`` and ``body``, the CRC-32 of those 20 bytes and
the CRC-32 of ``meta`` and ``body`` (big-endian) - then ``meta`` (compact JSON: the moment the
entry was applied, the status moto answered and the request's WSGI environ) and ``body`` (the
request's bytes, as they came). Indexes run 1, 2, 3... without a gap, across snapshots too.

Durability is a group commit: :meth:`Journal.append` writes, :meth:`Journal.sync` returns once
the entry is on disk (``fdatasync``), and one call syncs every entry appended before it, so
concurrent requests share the disk's latency. After each sync the index it made durable is
written to ``committed`` (its own CRC; not synced, so it may lag after a power cut, never lead):
the witness of what was acknowledged, which the journal alone cannot give when it is cut short.

:func:`scan` reads a journal without applying it and tells three endings apart:

* intact to the end;
* a *torn* final frame - the file ends inside a frame whose header is intact, or inside a header,
  or nothing intact follows a damaged tail that ``committed`` shows was never acknowledged: what
  a crash in the middle of a write leaves. That request was never answered; it is cut silently;
* *damage* - a frame that fails its checksum with intact frames after it, a gap in the indexes,
  or a journal ending before the last acknowledged request. The scan names the bytes and the
  requests lost (:class:`Damage`); recovery refuses to start on it (:mod:`rdss.local.durable`).
"""

from __future__ import annotations

import mmap
import os
import struct
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import orjson

from rdss.host.safefiles import Directory

MAGIC = b"\xabRJ2"
_HEADER = struct.Struct(">4sQII")  # magic, index, meta length, body length
_CRCS = struct.Struct(">II")  # CRC-32 of the header, of meta and body
HEADER_SIZE = _HEADER.size + _CRCS.size
_COMMITTED = struct.Struct(">QI")  # index, CRC-32 of it
#: A frame larger than this is not a request (moto takes bodies up to S3's 5 GiB single PUT;
#: the emulator refuses any over its request bound long before).
_LARGEST_FRAME = 1 << 31
JOURNAL = "journal"
COMMITTED = "committed"


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
        meta = orjson.dumps({"t": self.moment, "s": self.status, "e": self.environ})
        header = _HEADER.pack(MAGIC, self.index, len(meta), len(self.body))
        crcs = _CRCS.pack(zlib.crc32(header), zlib.crc32(self.body, zlib.crc32(meta)))
        return header + crcs + meta + self.body


@dataclass(frozen=True)
class Request:
    """What a frame says of its request, to name it to a person: index, time, method, target."""

    index: int | None
    moment: float | None = None
    method: str = ""
    #: The X-Amz-Target (``Kinesis_20131202.PutRecord``), else the path (``/bucket/key``).
    target: str = ""
    #: False when the frame is damaged: what it says may be wrong, or missing.
    intact: bool = True


@dataclass(frozen=True)
class Damage:
    """Where a journal is damaged and which requests that costs."""

    #: The damaged bytes: from the first frame that fails to where intact frames resume (or the end).
    start: int
    end: int
    #: What is wrong, in a few words.
    reason: str
    #: The last index of the intact prefix (0 when none), and the last index known lost.
    last_intact: int
    lost_through: int | None
    #: The damaged frames (what can be read of them) and the intact ones after them, which a
    #: start from the intact prefix drops too.
    damaged: list[Request] = field(default_factory=list)
    after: list[Request] = field(default_factory=list)


@dataclass
class Scan:
    """What :func:`scan` found."""

    #: Offset after the last frame of the intact prefix; its entries, and their first and last index.
    end: int = 0
    entries: int = 0
    first: int | None = None
    last: int | None = None
    #: Bytes after the intact prefix cut as a torn final frame (never acknowledged).
    torn: int = 0
    damage: Damage | None = None


def read_committed(files: Directory) -> int | None:
    """The last index the journal acknowledged, if the witness is there and intact."""
    data = files.read(COMMITTED, 64)
    if data is None or len(data) != _COMMITTED.size:
        return None
    index, crc = _COMMITTED.unpack(data)
    return index if zlib.crc32(data[:8]) == crc else None


def scan(files: Directory, *, covered: int = 0, committed: int | None = None) -> Scan:
    """Check every frame of ``files``' journal without applying any. ``covered`` is the index a
    snapshot holds everything up to (the journal continues from it); ``committed`` the witness."""
    result = Scan()
    with _mapped(files) as data:
        size = len(data)
        expected = None
        position = 0
        while position < size:
            frame = _frame_at(data, position)
            if isinstance(frame, _Short):  # the file ends inside this frame: a crash mid-write
                result.torn = size - position
                break
            if frame is None:
                result.damage = _damage(data, position, result, "a frame fails its checksum")
                break
            index, length, _meta = frame
            if expected is None and index > covered + 1:
                missing = f"{covered + 1}-{index - 1}" if index - 1 > covered + 1 else f"{covered + 1}"
                holder = "the snapshot that held them is missing" if covered == 0 else "they are in no file"
                result.damage = _damage(data, position, result, f"requests {missing} are missing ({holder})")
                break
            if expected is not None and index != expected:
                result.damage = _damage(data, position, result, f"request {expected} is missing (then {index})")
                break
            position += length
            expected = index + 1
            result.end, result.entries, result.last = position, result.entries + 1, index
            result.first = index if result.first is None else result.first
        last = max(result.last or 0, covered)
        damage = result.damage
        if damage is not None and not damage.after and committed is not None and committed <= last:
            # nothing intact after it, and none of it acknowledged: what a crash mid-write leaves
            result.torn, result.damage = size - result.end, None
        elif damage is not None and committed is not None and committed > (damage.lost_through or 0):
            result.damage = replace(damage, lost_through=committed)
        if result.damage is None and committed is not None and committed > last:
            result.damage = Damage(
                result.end,
                size,
                f"it ends at request {last}, but request {committed} was acknowledged (the file was cut short)",
                last,
                committed,
            )
    return result


def entries(files: Directory, end: int) -> Iterator[Entry]:
    """The entries of the journal's first ``end`` bytes (an intact prefix :func:`scan` found)."""
    with _mapped(files) as data:
        position = 0
        while position < end:
            frame = _frame_at(data, position)
            if not isinstance(frame, tuple):
                raise RuntimeError(f"the journal changed under recovery at byte {position}")
            index, length, meta = frame
            fields = orjson.loads(meta)
            body_start = position + HEADER_SIZE + len(meta)
            yield Entry(index, fields["t"], fields["s"], fields["e"], bytes(data[body_start : position + length]))
            position += length


class Journal:
    """The journal open for appending (after recovery read it)."""

    def __init__(self, files: Directory, *, end: int, last: int) -> None:
        """Open the journal for appending, cut back to ``end`` (a torn tail, or a salvaged
        prefix); ``last`` is the index everything so far reaches (journal or snapshot)."""
        self._files = files
        self._fd = files.open(JOURNAL, os.O_RDWR | os.O_CREAT | os.O_APPEND)
        if os.fstat(self._fd).st_size > end:
            os.ftruncate(self._fd, end)
            os.fdatasync(self._fd)
        self._witness = files.open(COMMITTED, os.O_RDWR | os.O_CREAT)
        self.size = end
        #: Entries in the file (what a snapshot would let go).
        self.entries = 0
        self._appended = (last, end)
        self._synced = last
        self._sync_lock = threading.Lock()
        if read_committed(files) != last:
            self._witness_write(last)

    def append(self, entry: Entry) -> None:
        """Write one entry (callers append in index order, one at a time)."""
        frame = entry.frame()
        view = memoryview(frame)
        while view:
            view = view[os.write(self._fd, view) :]
        self.size += len(frame)
        self._appended = (entry.index, self.size)
        self.entries += 1

    def sync(self, index: int) -> None:
        """Return once every entry up to ``index`` is on disk."""
        with self._sync_lock:
            if self._synced >= index:
                return
            target = self._appended[0]
            os.fdatasync(self._fd)
            self._synced = target
            self._witness_write(target)

    def _witness_write(self, index: int) -> None:
        head = struct.pack(">Q", index)
        os.pwrite(self._witness, head + struct.pack(">I", zlib.crc32(head)), 0)

    def drop_through(self, offset: int, remaining: int) -> None:
        """A snapshot now holds the entries in the journal's first ``offset`` bytes: keep only
        the ``remaining`` entries after them (appended while the snapshot was written), in a new
        file renamed over this one. The caller stops appends meanwhile."""
        with self._sync_lock:
            tail = os.pread(self._fd, self.size - offset, offset) if self.size > offset else b""
            self._files.unlink(JOURNAL + ".tmp")
            fd = self._files.open(JOURNAL + ".tmp", os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_APPEND)
            try:
                view = memoryview(tail)
                while view:
                    view = view[os.write(fd, view) :]
                os.fdatasync(fd)
            except BaseException:
                os.close(fd)
                raise
            self._files.rename(JOURNAL + ".tmp", JOURNAL)
            os.close(self._fd)
            self._fd = fd
            self.size = len(tail)
            self.entries = remaining
            self._synced = self._appended[0]
            self._witness_write(self._synced)

    def close(self) -> None:
        if self._fd >= 0:
            self.sync(self._appended[0])
            os.close(self._fd)
            os.close(self._witness)
            self._fd = -1


def salvage(files: Directory, end: int) -> None:
    """Make the journal its first ``end`` bytes, in a new file (the damaged one stays whole
    under the name :meth:`rdss.local.state.StateDirectory.keep_damaged` gave it)."""
    try:
        fd = files.open(JOURNAL, os.O_RDONLY)
    except FileNotFoundError:
        prefix = b""
    else:
        try:
            prefix = os.pread(fd, end, 0) if end else b""
        finally:
            os.close(fd)
    files.write(JOURNAL, prefix)


# -- frames --------------------------------------------------------------------------------------
class _Short:
    """The data ends inside a frame."""


_SHORT = _Short()


def _frame_at(data: Any, position: int) -> tuple[int, int, bytes] | _Short | None:
    """The frame at ``position``: (index, length, meta) when intact; ``_SHORT`` when the data
    ends inside it (a header cut short, or an intact header promising more than there is);
    None when it is damaged."""
    size = len(data)
    if size - position < HEADER_SIZE:
        return _SHORT
    header = bytes(data[position : position + _HEADER.size])
    magic, index, meta_length, body_length = _HEADER.unpack(header)
    header_crc, payload_crc = _CRCS.unpack(data[position + _HEADER.size : position + HEADER_SIZE])
    if magic != MAGIC or zlib.crc32(header) != header_crc or meta_length + body_length > _LARGEST_FRAME:
        return None
    length = HEADER_SIZE + meta_length + body_length
    if position + length > size:
        return _SHORT
    meta = bytes(data[position + HEADER_SIZE : position + HEADER_SIZE + meta_length])
    body = data[position + HEADER_SIZE + meta_length : position + length]
    if zlib.crc32(body, zlib.crc32(meta)) != payload_crc:
        return None
    try:
        fields = orjson.loads(meta)
        if not isinstance(fields, dict) or not isinstance(fields.get("e"), dict):
            return None
    except orjson.JSONDecodeError:
        return None
    return index, length, meta


def _damage(data: Any, start: int, prefix: Scan, reason: str) -> Damage:
    """What the damage at ``start`` costs: the frames there (named as far as they can be read),
    where intact frames resume, and those after it."""
    last_intact = prefix.last or 0
    damaged: list[Request] = []
    after: list[Request] = []
    frame = _frame_at(data, start)
    resume: int | None
    if isinstance(frame, tuple):  # intact, but out of order: it and what follows are dropped
        resume = start
    else:
        damaged.append(_named_damaged(data, start))
        resume = _next_intact(data, start + 1)
    end = resume if resume is not None else len(data)
    position: int | None = resume
    while position is not None and position < len(data):
        frame = _frame_at(data, position)
        if isinstance(frame, tuple):
            index, length, meta = frame
            after.append(_named(index, meta))
            position += length
        elif isinstance(frame, _Short):
            break
        else:
            damaged.append(_named_damaged(data, position))
            position = _next_intact(data, position + 1)
    known = [r.index for r in damaged + after if r.index is not None]
    lost_through = max(known) if known else None
    return Damage(start, end, reason, last_intact, lost_through, damaged, after)


def _next_intact(data: Any, position: int) -> int | None:
    """Where the next intact frame after ``position`` starts, if one does."""
    while True:
        position = data.find(MAGIC, position)
        if position < 0:
            return None
        if isinstance(_frame_at(data, position), tuple):
            return position
        position += 1


def _named(index: int, meta: bytes, *, intact: bool = True) -> Request:
    try:
        fields = orjson.loads(meta)
        environ = fields.get("e") or {}
        target = environ.get("HTTP_X_AMZ_TARGET") or environ.get("PATH_INFO") or ""
        if environ.get("QUERY_STRING") and not environ.get("HTTP_X_AMZ_TARGET"):
            target += "?" + str(environ["QUERY_STRING"])
        moment = fields.get("t")
        return Request(
            index,
            float(moment) if isinstance(moment, int | float) else None,
            str(environ.get("REQUEST_METHOD", "")),
            str(target),
            intact,
        )
    except (orjson.JSONDecodeError, AttributeError, TypeError, ValueError):
        return Request(index, intact=False)


def _named_damaged(data: Any, position: int) -> Request:
    """What can be read of a damaged frame: its index and request if the header is intact and
    its meta still parses, else nothing."""
    if len(data) - position < HEADER_SIZE:
        return Request(None, intact=False)
    header = bytes(data[position : position + _HEADER.size])
    magic, index, meta_length, _body = _HEADER.unpack(header)
    header_crc = _CRCS.unpack(data[position + _HEADER.size : position + HEADER_SIZE])[0]
    if magic != MAGIC or zlib.crc32(header) != header_crc:
        return Request(None, intact=False)
    meta = bytes(data[position + HEADER_SIZE : position + HEADER_SIZE + meta_length])
    return _named(index, meta, intact=False)


class _mapped:
    """The journal's bytes, mapped read-only (empty when there is no journal)."""

    def __init__(self, files: Directory) -> None:
        self._files = files
        self._map: mmap.mmap | None = None

    def __enter__(self) -> Any:
        try:
            fd = self._files.open(JOURNAL, os.O_RDONLY)
        except FileNotFoundError:
            return b""
        try:
            if os.fstat(fd).st_size == 0:
                return b""
            self._map = mmap.mmap(fd, 0, prot=mmap.PROT_READ)
        finally:
            os.close(fd)
        return self._map

    def __exit__(self, *exc: object) -> None:
        if self._map is not None:
            self._map.close()
