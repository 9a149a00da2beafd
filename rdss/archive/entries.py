"""The archive: what the archiver writes to S3 (through Firehose) and every reader reads back.

**Entries.** The archive's unit is the stream record. Each record is one *entry*: one line of
compact JSON, UTF-8, whose first key is ``rdssArchive``::

    {"rdssArchive":1,"stream":"rdss-dev-input","shard":"shardId-000000000001",
     "sequenceNumber":"4960...","partitionKey":"...","arrival":"2026-11-25T10:00:00.123Z",
     "text":"<the exact payload>"}

``base64`` replaces ``text`` when the payload is not valid UTF-8 (an empty record is
``"text":""``). JSON string escaping keeps every entry on one line whatever the payload holds:
indented JSON, a raw newline inside a string, any byte at all. An entry's *identity* is
(stream, shard, sequenceNumber): Firehose and a restarted reader are at least once, so a record
may be archived twice, and every reader counts an identity once (:func:`unique`).

**Objects.** An object is one or more concatenated gzip members of newline-terminated entries:
the archiver sends each batch as gzip members of at most :data:`MAX_MEMBER` bytes
(:func:`pack`), each one Firehose record, and Firehose (no compression and no delimiter of its
own) concatenates the records it buffered into one object. Keys carry Hive-style hour partitions
of the delivery time, and end ``.gz``::

    audit/year=2026/month=11/day=21/hour=09/rdss-dev-input-1-2026-11-21-09-14-03-<uuid>.gz

**One reader.** :func:`read` turns an object into entries: it sniffs the gzip magic (an object
that is not gzip is read as it is), decompresses every member, and splits lines on ``\\n``. A
line that does not start ``{"rdssArchive":`` is a *legacy* line - an archive written before
entries, when Firehose appended a newline to each raw record - and is read as one record with
no identity, as it always was (a legacy record holding a raw newline still reads as two).
"""

from __future__ import annotations

import base64
import binascii
import gzip
import re
import uuid
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import orjson

#: The entry format's version (the value of ``rdssArchive``).
VERSION = 1
#: How every entry line starts; a line that does not is a legacy record.
ENTRY_PREFIX = b'{"rdssArchive":'
#: Firehose's limit on one record (1,000 KiB): the largest gzip member the archiver sends.
MAX_MEMBER = 1000 * 1024
#: zlib's level for members: level 6 compresses realistic messages within a few per cent of
#: level 9 at about half its CPU (docs/operators.md gives the measured ratios).
COMPRESSION_LEVEL = 6
GZIP_MAGIC = b"\x1f\x8b"

#: Firehose's prefix expression for the hour partitions (appended to a channel's archive prefix).
FIREHOSE_HOUR_EXPRESSION = "year=!{timestamp:yyyy}/month=!{timestamp:MM}/day=!{timestamp:dd}/hour=!{timestamp:HH}/"
#: Where Firehose puts records it could not deliver, under the same bucket.
FIREHOSE_ERROR_EXPRESSION = "delivery-failures/!{firehose:error-output-type}/" + FIREHOSE_HOUR_EXPRESSION
#: The extension Firehose gives the objects (its FileExtension): they are gzip whatever it knows.
OBJECT_EXTENSION = ".gz"

_HOUR = re.compile(r"year=(\d{4})/month=(\d{2})/day=(\d{2})/hour=(\d{2})/")
_KEYS = frozenset({"rdssArchive", "stream", "shard", "sequenceNumber", "partitionKey", "arrival", "text", "base64"})


# -- object keys ---------------------------------------------------------------------------------------


def hour_prefix(base: str, moment: datetime) -> str:
    """``<base>year=YYYY/month=MM/day=DD/hour=HH/`` for the UTC hour of ``moment``.

    Every field is zero-padded, as Firehose's ``yyyy`` is: ``%Y`` would write the year 1 as
    ``year=1`` on glibc, a prefix no delivery makes and :func:`archived_at` cannot read."""
    utc = moment.astimezone(UTC)
    return f"{base}year={utc.year:04d}/month={utc.month:02d}/day={utc.day:02d}/hour={utc.hour:02d}/"


def object_key(base: str, moment: datetime, delivery_stream: str, version: int = 1) -> str:
    """A key the way Firehose names objects: ``<hour prefix><stream>-<version>-<time>-<uuid>.gz``."""
    utc = moment.astimezone(UTC)
    name = f"{delivery_stream}-{version}-{utc:%Y-%m-%d-%H-%M-%S}-{uuid.uuid4()}{OBJECT_EXTENSION}"
    return hour_prefix(base, utc) + name


def archived_at(key: str) -> datetime | None:
    """The delivery hour a key's partitions name, or None when it has none."""
    match = _HOUR.search(key)
    if match is None:
        return None
    year, month, day, hour = (int(g) for g in match.groups())
    return datetime(year, month, day, hour, tzinfo=UTC)


# -- entries -------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Entry:
    """One archived record: its exact bytes and, unless it is a legacy line, where it came from."""

    payload: bytes
    stream: str | None = None
    shard: str | None = None
    sequence_number: str | None = None
    partition_key: str | None = None
    #: When the stream received it (RFC 3339, UTC, milliseconds), as the entry says.
    arrival: str | None = None

    @property
    def identity(self) -> tuple[str, str, str] | None:
        """(stream, shard, sequenceNumber); None for a legacy line, which has none."""
        if self.stream is None or self.shard is None or self.sequence_number is None:
            return None
        return (self.stream, self.shard, self.sequence_number)

    @property
    def record(self) -> str | None:
        """``<shard>/<sequence number>``, as the broker's Local Data Repository names a record."""
        return None if self.identity is None else f"{self.shard}/{self.sequence_number}"

    @property
    def arrived(self) -> datetime | None:
        if self.arrival is None:
            return None
        try:
            return datetime.fromisoformat(self.arrival).astimezone(UTC)
        except ValueError:
            return None

    @property
    def legacy(self) -> bool:
        return self.identity is None


def arrival_text(moment: datetime | float | None) -> str | None:
    """An arrival time as entries hold it: RFC 3339, UTC, milliseconds (``...T10:00:00.123Z``)."""
    if moment is None:
        return None
    when = moment if isinstance(moment, datetime) else datetime.fromtimestamp(moment, UTC)
    return when.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def frame(
    payload: bytes,
    *,
    stream: str,
    shard: str,
    sequence_number: str,
    partition_key: str | None = None,
    arrival: datetime | float | None = None,
) -> bytes:
    """One entry line (no newline) for a record."""
    entry: dict[str, object] = {
        "rdssArchive": VERSION,
        "stream": stream,
        "shard": shard,
        "sequenceNumber": sequence_number,
        "partitionKey": partition_key,
        "arrival": arrival_text(arrival),
    }
    try:
        entry["text"] = payload.decode("utf-8")
    except UnicodeDecodeError:
        entry["base64"] = base64.b64encode(payload).decode("ascii")
    # orjson escapes every control character (so no raw newline) and keeps the key order
    return orjson.dumps(entry)


def parse(line: bytes) -> Entry:
    """The entry one line holds: a framed record, or (anything else) a legacy record."""
    if not line.startswith(ENTRY_PREFIX):
        return Entry(line)
    try:
        fields = orjson.loads(line)
    except orjson.JSONDecodeError:
        return Entry(line)
    entry = _entry(fields)
    return Entry(line) if entry is None else entry


def _entry(fields: object) -> Entry | None:
    """An entry of this version, or None when ``fields`` is not one (then the line is legacy)."""
    if not isinstance(fields, dict) or not set(fields) <= _KEYS:
        return None
    version = fields.get("rdssArchive")
    if type(version) is not int or version != VERSION:  # not True, not 1.0
        return None
    text, encoded = fields.get("text"), fields.get("base64")
    identity = [fields.get(name) for name in ("stream", "shard", "sequenceNumber")]
    optional = [fields.get(name) for name in ("partitionKey", "arrival")]
    if not all(isinstance(value, str) for value in identity):
        return None
    if not all(value is None or isinstance(value, str) for value in optional):
        return None
    if isinstance(text, str) and encoded is None:
        payload = text.encode("utf-8")
    elif isinstance(encoded, str) and text is None:
        try:
            payload = base64.b64decode(encoded, validate=True)
        except binascii.Error:
            return None
    else:
        return None
    stream, shard, sequence_number = identity
    partition_key, arrival = optional
    return Entry(payload, stream, shard, sequence_number, partition_key, arrival)


# -- objects -------------------------------------------------------------------------------------------


def decompress(data: bytes) -> bytes:
    """An object's content: every gzip member decompressed (an object that is not gzip as it is)."""
    return gzip.decompress(data) if data[:2] == GZIP_MAGIC else data


def lines(data: bytes) -> list[bytes]:
    """The lines of an object's content, split on ``\\n`` only (a final newline ends the last)."""
    found = data.split(b"\n")
    if found and found[-1] == b"":
        found.pop()
    return found


def read(data: bytes) -> list[Entry]:
    """Every entry of one object, in order (see the module docstring)."""
    return [parse(line) for line in lines(decompress(data))]


def member(entries: Iterable[bytes], level: int = COMPRESSION_LEVEL) -> bytes:
    """One gzip member of entry lines, each followed by a newline."""
    return gzip.compress(b"".join(line + b"\n" for line in entries), compresslevel=level, mtime=0)


def encode_legacy(records: Iterable[bytes]) -> bytes:
    """An object as Firehose wrote them before entries: raw records, each followed by a newline,
    gzip-compressed. Only for reading old archives back (tests, the benchmarks)."""
    return gzip.compress(b"".join(record + b"\n" for record in records), compresslevel=COMPRESSION_LEVEL)


@dataclass(frozen=True)
class Member:
    """A gzip member :func:`pack` made: entries ``start`` to ``end`` (exclusive) of the lines given."""

    data: bytes
    start: int
    end: int

    @property
    def count(self) -> int:
        return self.end - self.start

    @property
    def oversize(self) -> bool:
        """True for a lone entry that does not fit one Firehose record even compressed."""
        return len(self.data) > MAX_MEMBER


# Deflate's worst case for n bytes that do not compress: stored blocks of at most 16,383 bytes
# (5 bytes of header each), with room for the sync marker and the trailer.
def _bound(size: int) -> int:
    return size + 5 * (size // 16_383 + 1) + 16


def pack(entries: Sequence[bytes], limit: int = MAX_MEMBER, level: int = COMPRESSION_LEVEL) -> list[Member]:
    """``entries`` (lines without newlines) as gzip members of at most ``limit`` bytes, in order,
    in one pass of the compressor.

    A member grows while its compressed size is certain to stay within the limit: what it
    holds compressed so far (measured at a sync flush, which keeps the dictionary, only when
    the worst case would no longer fit) plus the worst case of the next entry. An entry that
    cannot fit even alone is a member of its own, larger than ``limit`` (:attr:`Member.oversize`):
    the caller stores it some other way rather than lose it.
    """
    members: list[Member] = []
    start = 0
    compressor: zlib._Compress | None = None
    chunks: list[bytes] = []
    known = 0  # compressed bytes certainly produced so far (at the last flush)
    pending = 0  # bytes fed since that flush

    def close(end: int) -> None:
        assert compressor is not None
        chunks.append(compressor.flush(zlib.Z_FINISH))
        members.append(Member(b"".join(chunks), start, end))

    for index, entry in enumerate(entries):
        line = entry + b"\n"
        if compressor is not None and known + _bound(pending) + _bound(len(line)) > limit:
            chunks.append(compressor.flush(zlib.Z_SYNC_FLUSH))
            known, pending = sum(len(c) for c in chunks) + 8, 0  # 8: the trailer to come
            if known + _bound(len(line)) > limit:
                close(index)
                compressor = None
        if compressor is None:
            compressor = zlib.compressobj(level, zlib.DEFLATED, 31)  # wbits 31: a gzip member
            chunks, known, pending, start = [], 18, 0, index  # 18: gzip's header and trailer
        chunks.append(compressor.compress(line))
        pending += len(line)
    if compressor is not None:
        close(len(entries))
    return members


# -- counting each record once -------------------------------------------------------------------------


class Identities:
    """The identities seen so far: :meth:`first` is True once per identity (always for a legacy
    entry, which has none and can only be counted as it comes)."""

    def __init__(self) -> None:
        self._seen: set[tuple[str, str, str]] = set()
        self.repeats = 0

    def first(self, entry: Entry) -> bool:
        identity = entry.identity
        if identity is None:
            return True
        if identity in self._seen:
            self.repeats += 1
            return False
        self._seen.add(identity)
        return True


def unique(entries: Iterable[Entry], seen: Identities | None = None) -> Iterator[Entry]:
    """``entries`` with every identity after its first left out (pass ``seen`` to share it
    between calls, e.g. across objects, and to learn how many repeats were dropped)."""
    seen = seen if seen is not None else Identities()
    return (entry for entry in entries if seen.first(entry))
