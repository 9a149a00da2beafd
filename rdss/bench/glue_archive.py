"""An audit archive as the archiver and Firehose write it, generated for ``rdss bench glue``:
objects of gzip members of archive entries (:mod:`rdss.archive.entries`) under hour prefixes, from
:class:`rdss.model.workload.Workload` traffic with duplicates, malformed records, multi-part sequences
and entries archived twice (as a restarted archiver does) mixed in."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson

from rdss.archive import entries as archive
from rdss.model import decoration, timestamps
from rdss.model.messages import Message
from rdss.model.validation import validate
from rdss.model.workload import MIX, Workload

#: Header-heavy small messages (no research objects): with them a record is about 520 bytes
#: and gzips to about 95, the scale the compaction target is stated at (1M records ~ 100 MB).
SMALL_MIX: tuple[tuple[str, str, int], ...] = (
    ("MetadataDelete", "Event", 25),
    ("MetadataRead", "Command", 25),
    ("VocabularyRead", "Command", 15),
    ("VocabularyRead", "Document", 15),
    ("VocabularyPatch", "Event", 20),
)
GENERATORS = ("eprints-3.4.5", "dspace-7.6.1", "figshare-2.0.0", "pure-5.28.0", "archivematica-1.15.0")
START = datetime(2026, 11, 1, tzinfo=UTC)
DELIVERY_STREAM = "rdss-bench-input"
#: Shards the generated records are spread over (their identities name them).
SHARDS = ("shardId-000000000000", "shardId-000000000001")
#: Entries per gzip member: one archiver batch each (a Firehose object holds many).
PER_MEMBER = 250
#: Generated messages per (type, class) that records are made from (see :func:`_fresh`).
TEMPLATES = 200


# -- the archive -------------------------------------------------------------------------------------


@dataclass
class Archive:
    """What :func:`write_archive` wrote, and what a correct compaction must make of it."""

    root: Path
    records: int = 0
    messages: int = 0
    duplicates: int = 0
    malformed: int = 0
    #: broken copies of messages, under their messageIds (:func:`broken_copy`)
    broken: int = 0
    objects: int = 0
    gzip_bytes: int = 0
    raw_bytes: int = 0
    #: entries written again, later, under the identity of one already archived
    repeats: int = 0
    #: every malformed line as written (only with ``ledger=True``)
    malformed_lines: list[bytes] = field(default_factory=list)
    #: messageId -> (object key, line index) of its first copy (only with ``ledger=True``)
    first_seen: dict[str, tuple[str, int]] = field(default_factory=dict)
    #: messageId -> how many byte-for-byte resends of it were written (only with ``ledger=True``)
    resent: Counter[str] = field(default_factory=Counter)
    #: the errors archive: what the broker moved to invalid and error (only with ``errors_root``)
    errors_root: Path | None = None
    errors_records: int = 0

    @property
    def rejected(self) -> int:
        """Records the broker refuses: malformed lines and broken copies."""
        return self.malformed + self.broken

    def expected_counts(self) -> dict[str, int]:
        """What a correct compaction counts (with the errors archive, when there is one)."""
        counts = {
            "lines": self.records,
            "messages": self.messages,
            "rejects": self.rejected,
            "duplicates": self.duplicates,
            "archivedAgain": self.repeats,
        }
        if self.errors_root is not None:
            counts |= {"brokerRejections": self.rejected, "unmatchedRejections": 0}
        return counts


def malformed_line(kind: int, valid: bytes) -> bytes:
    """A line the compaction must reject, of one of six kinds, derived from a valid payload."""
    kind %= 6
    if kind == 0:
        return valid[: len(valid) // 2]  # truncated
    if kind == 1:
        return b"PUT /records HTTP/1.1 not a message"
    if kind == 2:
        return b""  # an empty record still takes a line
    if kind == 3:
        return b"[" + valid + b"]"  # JSON, not an object
    if kind == 4:
        message = orjson.loads(valid)
        del message["messageHeader"]["messageId"]
        return orjson.dumps(message)
    return b"\xff\xfe" + valid[:24]  # not UTF-8


def broken_copy(kind: int, valid: bytes) -> bytes:
    """A copy of a valid message, under its messageId, that the broker refuses (one of four
    kinds): what producers send when they resend a message they have mangled."""
    message = orjson.loads(valid)
    kind %= 4
    if kind == 0:
        message.pop("messageBody")  # GENERR001
    elif kind == 1:
        message["messageHeader"]["messageClass"] = "Bogus"  # GENERR004
    elif kind == 2:
        message["messageHeader"].pop("generator")  # GENERR004
    else:
        message["messageHeader"]["version"] = "3"  # GENERR004: not semver
    return orjson.dumps(message)


def records_of(
    count: int,
    *,
    seed: int,
    small: bool,
    days: float,
    duplicate_every: int,
    malformed_every: int,
    sequence_every: int,
    broken_every: int = 0,
    start: datetime = START,
) -> Iterator[tuple[datetime, bytes, str | None, str]]:
    """``(published, payload, messageId or None, kind)`` in arrival order; kind is ``message``,
    ``duplicate`` (a byte-for-byte resend), ``malformed`` or ``broken`` (:func:`broken_copy`)."""
    workload = Workload(seed)
    rng = random.Random(seed + 1)
    mix = SMALL_MIX if small else MIX
    kinds = [(t, c) for t, c, _ in mix]
    weights = [w for _, _, w in mix]
    step = days * 86400 / max(count, 1)
    recent: list[tuple[bytes, str]] = []
    templates: dict[tuple[str, str], list[Message]] = {}
    pending: list[bytes] = []
    malformed_kind = broken_kind = 0
    for index in range(count):
        published = start + timedelta(seconds=index * step)
        if malformed_every and index % malformed_every == malformed_every - 1 and recent:
            yield published, malformed_line(malformed_kind, recent[-1][0]), None, "malformed"
            malformed_kind += 1
            continue
        if duplicate_every and index % duplicate_every == duplicate_every - 1 and recent:
            payload, message_id = rng.choice(recent)
            yield published, payload, message_id, "duplicate"
            continue
        if broken_every and index % broken_every == broken_every // 2 and recent:
            payload, message_id = rng.choice(recent)
            yield published, broken_copy(broken_kind, payload), message_id, "broken"
            broken_kind += 1
            continue
        if not pending and sequence_every and index % sequence_every == sequence_every // 2:
            pending = _sequence_parts(workload, published, drop_one=rng.random() < 0.5)
        if pending:
            payload = pending.pop(0)
        else:
            kind = rng.choices(kinds, weights)[0]
            if kind not in templates:
                templates[kind] = [workload.message(*kind) for _ in range(TEMPLATES)]
            payload = _fresh(rng.choice(templates[kind]), workload, published, rng.choice(GENERATORS))
        message_id = orjson.loads(payload)["messageHeader"]["messageId"]
        recent.append((payload, message_id))
        if len(recent) > 500:
            recent.pop(0)
        yield published, payload, message_id, "message"


def _fresh(template: Message, workload: Workload, published: datetime, generator: str) -> bytes:
    """A new message from a generated one: its own ids, publication time and generator.

    Building every message from scratch costs more than the job under test; the bodies come
    from a few hundred generated ones per kind, the identifiers are all new.
    """
    header = dict(template["messageHeader"])
    header["messageId"] = workload.uuid()
    header["messageTimings"] = {"publishedTimestamp": timestamps.format(published)}
    header["messageSequence"] = {"sequence": workload.uuid(), "position": 1, "total": 1}
    header["generator"] = generator
    body = template["messageBody"]
    if isinstance(body, dict) and "objectUuid" in body:
        body = {**body, "objectUuid": workload.uuid()}
    return orjson.dumps({"messageHeader": header, "messageBody": body})


def _sequence_parts(workload: Workload, published: datetime, *, drop_one: bool) -> list[bytes]:
    """Three parts of one sequence (string body fragments), the middle one lost if ``drop_one``."""
    whole = workload.message("VocabularyRead", "Document")
    text = orjson.dumps(whole["messageBody"]).decode()
    cut = [0, len(text) // 3, 2 * len(text) // 3, len(text)]
    sequence = workload.uuid()
    parts = []
    for position in (1, 2, 3):
        if drop_one and position == 2:
            continue
        header = dict(whole["messageHeader"])
        header["messageId"] = workload.uuid()
        header["messageSequence"] = {"sequence": sequence, "position": position, "total": 3}
        header["messageTimings"] = {"publishedTimestamp": timestamps.format(published)}
        parts.append(orjson.dumps({"messageHeader": header, "messageBody": text[cut[position - 1] : cut[position]]}))
    return parts


def write_archive(
    root: Path,
    records: int,
    *,
    seed: int = 11,
    small: bool = True,
    per_object: int = 2000,
    days: float = 7.0,
    duplicate_every: int = 40,
    malformed_every: int = 250,
    sequence_every: int = 1000,
    broken_every: int = 0,
    repeat_every: int = 0,
    errors_root: Path | None = None,
    ledger: bool = False,
    start: datetime = START,
) -> Archive:
    """Write ``records`` records of audit archive under ``root`` (``audit/year=/.../hour=/``).

    Published times spread evenly over ``days`` from ``start`` (2026-11-01); each object is delivered up to
    a minute after its last record, as Firehose's buffer does. Every ``duplicate_every``-th
    record re-sends one of the last 500 payloads byte for byte (a producer or Kinesis retry),
    every ``malformed_every``-th is a malformed line (:func:`malformed_line`), every
    ``broken_every``-th a broken copy of a recent message under its messageId
    (:func:`broken_copy`), and every ``sequence_every``-th starts a three-part sequence, half of
    them with a part missing. Each record is an entry with its own identity (stream, one of
    :data:`SHARDS`, a sequence number) and arrival time; every ``repeat_every``-th entry is
    written a second time in the next object, as an archiver restarted mid-stream does.

    ``errors_root``: also write there the errors archive the broker would (``errors/invalid/``
    and ``errors/error/``, hour prefixes): every malformed line and broken copy, classified by
    rdss.model.validation and decorated by rdss.model.decoration, delivered with the audit object it is in.
    """
    result = Archive(root=root, errors_root=errors_root)
    rng = random.Random(seed + 2)
    batch: list[bytes] = []
    ids: list[str | None] = []
    refused: dict[str, list[bytes]] = {"invalid": [], "error": []}
    again: list[bytes] = []  # entries to archive a second time, in the next object
    last_published = start
    last_delivered = start
    framer = _Framer(DELIVERY_STREAM)
    error_framers = {channel: _Framer(f"rdss-bench-{channel}") for channel in refused}

    def flush() -> None:
        nonlocal last_delivered
        if not batch:
            return
        # Firehose delivers objects one after another: each a second or more after the last
        delivered = max(last_published + timedelta(seconds=rng.uniform(1, 60)), last_delivered + timedelta(seconds=1))
        last_delivered = delivered
        key = archive.object_key("audit/", delivered, DELIVERY_STREAM)
        data = _object(batch)
        path = root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        if ledger:
            for line_index, message_id in enumerate(ids):
                if message_id is not None and message_id not in result.first_seen:
                    result.first_seen[message_id] = (str(path), line_index)
        result.objects += 1
        result.gzip_bytes += len(data)
        result.raw_bytes += sum(len(line) + 1 for line in batch)
        batch.clear()
        ids.clear()
        batch.extend(again)  # archived again: the next object opens with them
        ids.extend([None] * len(again))
        result.repeats += len(again)
        again.clear()
        for channel, decorated in refused.items():
            if errors_root is not None and decorated:
                target = errors_root / archive.object_key(f"errors/{channel}/", delivered, f"rdss-bench-{channel}")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(_object([error_framers[channel].frame(record, delivered) for record in decorated]))
                result.errors_records += len(decorated)
            decorated.clear()

    for published, payload, message_id, kind in records_of(
        records,
        seed=seed,
        small=small,
        days=days,
        duplicate_every=duplicate_every,
        malformed_every=malformed_every,
        sequence_every=sequence_every,
        broken_every=broken_every,
        start=start,
    ):
        entry = framer.frame(payload, published)
        batch.append(entry)
        ids.append(message_id if kind != "broken" else None)
        last_published = published
        result.records += 1
        if repeat_every and result.records % repeat_every == 0:
            again.append(entry)
        if kind in ("malformed", "broken"):
            if kind == "malformed":
                result.malformed += 1
                if ledger:
                    result.malformed_lines.append(payload)
            else:
                result.broken += 1
            if errors_root is not None:
                channel, record = refusal(payload)
                refused[channel].append(record)
        elif kind == "duplicate":
            result.duplicates += 1
            if ledger and message_id is not None:
                result.resent[message_id] += 1
        else:
            result.messages += 1
        if len(batch) >= per_object:
            flush()
    flush()
    flush()  # the last object's entries archived again, if any
    return result


class _Framer:
    """Entries of one stream: records spread over :data:`SHARDS` in turn, each with the next
    sequence number of its shard (Kinesis' are longer; only their order and uniqueness matter)."""

    def __init__(self, stream: str) -> None:
        self.stream = stream
        self.count = 0

    def frame(self, payload: bytes, arrival: datetime) -> bytes:
        shard = SHARDS[self.count % len(SHARDS)]
        sequence = f"49{self.count // len(SHARDS):020d}"
        self.count += 1
        return archive.frame(payload, stream=self.stream, shard=shard, sequence_number=sequence, arrival=arrival)


def _object(entries: list[bytes]) -> bytes:
    """One object as Firehose delivers the archiver's records: gzip members concatenated."""
    return b"".join(
        member.data
        for start in range(0, len(entries), PER_MEMBER)
        for member in archive.pack(entries[start : start + PER_MEMBER])
    )


def refusal(payload: bytes) -> tuple[str, bytes]:
    """The channel the broker moves a refused payload to, and the record it puts there."""
    verdict = validate(payload, check_expiry=False)
    if verdict.valid or verdict.error_code is None or verdict.channel is None:
        raise AssertionError(f"the broker would accept {payload[:200]!r}: not a refusal")
    return verdict.channel.value, decoration.decorate(payload, verdict.error_code, verdict.error_description or "")


# -- the same work in one Python process -------------------------------------------------------------

# the rule of glue_jobs/java/rdss/glue/Rfc3339.java: ASCII digits only
