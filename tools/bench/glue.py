"""``rdss bench glue``: the audit compaction job on local Spark beside the same work in one process.

:func:`write_archive` writes an audit archive the way Firehose does (gzip objects of
newline-delimited records under hour prefixes), from :class:`tools.workload.Workload` traffic
with duplicates, malformed lines and multi-part sequences mixed in. :func:`run` times
``glue_jobs/audit_compaction.py`` on it as a user runs it (a fresh process: Python, the JVM and
Spark start-up included), on a quarter of the records to show how cost grows, and
:func:`compact_in_process` doing the same work (parse, first-seen de-duplication, rejects,
partitioned Parquet) in a single Python process with orjson and pyarrow.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import orjson

from rdss import archive, decoration, timestamps
from rdss.messages import Message
from rdss.validation import validate
from tools.workload import MIX, Workload

ROOT = Path(__file__).resolve().parents[2]
JOBS = ROOT / "glue_jobs"
COMPACTION_JOB = JOBS / "audit_compaction.py"

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
#: Generated messages per (type, class) that records are made from (see :func:`_fresh`).
TEMPLATES = 200


def load_schema() -> ModuleType:
    """``glue_jobs/schema.py``, the table definitions the jobs and the CDK app share."""
    spec = importlib.util.spec_from_file_location("rdss_glue_schema", JOBS / "schema.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
    errors_root: Path | None = None,
    ledger: bool = False,
    start: datetime = START,
) -> Archive:
    """Write ``records`` lines of audit archive under ``root`` (``audit/year=/.../hour=/``).

    Published times spread evenly over ``days`` from ``start`` (2026-11-01); each object is delivered up to
    a minute after its last record, as Firehose's buffer does. Every ``duplicate_every``-th
    record re-sends one of the last 500 payloads byte for byte (a producer or Kinesis retry),
    every ``malformed_every``-th is a malformed line (:func:`malformed_line`), every
    ``broken_every``-th a broken copy of a recent message under its messageId
    (:func:`broken_copy`), and every ``sequence_every``-th starts a three-part sequence, half of
    them with a part missing.

    ``errors_root``: also write there the errors archive the broker would (``errors/invalid/``
    and ``errors/error/``, hour prefixes): every malformed line and broken copy, classified by
    rdss.validation and decorated by rdss.decoration, delivered with the audit object it is in.
    """
    result = Archive(root=root, errors_root=errors_root)
    rng = random.Random(seed + 2)
    batch: list[bytes] = []
    ids: list[str | None] = []
    refused: dict[str, list[bytes]] = {"invalid": [], "error": []}
    last_published = start
    last_delivered = start

    def flush() -> None:
        nonlocal last_delivered
        if not batch:
            return
        # Firehose delivers objects one after another: each a second or more after the last
        delivered = max(last_published + timedelta(seconds=rng.uniform(1, 60)), last_delivered + timedelta(seconds=1))
        last_delivered = delivered
        key = archive.object_key("audit/", delivered, DELIVERY_STREAM)
        data = archive.encode(batch)
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
        for channel, decorated in refused.items():
            if errors_root is not None and decorated:
                target = errors_root / archive.object_key(f"errors/{channel}/", delivered, f"rdss-bench-{channel}")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(archive.encode(decorated))
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
        batch.append(payload)
        ids.append(message_id if kind != "broken" else None)
        last_published = published
        result.records += 1
        if kind in ("malformed", "broken"):
            if kind == "malformed":
                result.malformed += 1
                if ledger:
                    result.malformed_lines.append(payload)
            else:
                result.broken += 1
            if errors_root is not None:
                channel, record = _refusal(payload)
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
    return result


def _refusal(payload: bytes) -> tuple[str, bytes]:
    """The channel the broker moves a refused payload to, and the record it puts there."""
    verdict = validate(payload, check_expiry=False)
    if verdict.valid or verdict.error_code is None or verdict.channel is None:
        raise AssertionError(f"the broker would accept {payload[:200]!r}: not a refusal")
    return verdict.channel.value, decoration.decorate(payload, verdict.error_code, verdict.error_description or "")


# -- the same work in one Python process -------------------------------------------------------------

# the rule of glue_jobs/java/rdss/glue/Rfc3339.java: ASCII digits only
_RFC3339 = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})\Z"
)
_INT32 = range(-(2**31), 2**31)


def _timestamp(value: Any) -> datetime | None:
    if not isinstance(value, str) or not _RFC3339.match(value):
        return None
    try:
        return timestamps.parse(value).astimezone(UTC) if value[17:19] != "60" else None
    except (ValueError, OverflowError):  # no such date, or outside years 1-9999 once in UTC
        return None


def _text(value: Any) -> str | None:
    """A header member as Spark's JSON reader gives a string column: any other value as JSON."""
    if value is None or isinstance(value, str):
        return value
    return orjson.dumps(value).decode()


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value in _INT32 else None


def _member(container: Any, name: str) -> Any:
    return container.get(name) if isinstance(container, dict) else None


def compact_in_process(source: Path, output: Path, errors: Path | None = None) -> dict[str, int]:
    """What ``audit_compaction.py`` does, in this process: orjson to parse, a dict to keep the
    first-seen record of each messageId, pyarrow to write the same partitioned Parquet; with
    ``errors``, the broker's rejections matched by digest as the job matches them (rdss.decoration
    recovers each payload, the job's Java half reads the same records independently)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    glue_schema = load_schema()
    known_types = frozenset(glue_schema.MESSAGE_TYPES)
    winners: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {}
    copies: dict[str, int] = {}
    rejected: list[dict[str, Any]] = []
    lines = 0
    refusals = _refusals(errors, glue_schema) if errors is not None else None
    # lines that may be a rejected payload wait until every line is read: which copies of the
    # same bytes the broker refused depends on the later ones
    held: dict[str, list[tuple[tuple[Any, ...], bytes, str, datetime | None]]] = {}

    def consider(order: tuple[Any, ...], line: bytes, uri: str, arrived: datetime | None, code: str | None) -> None:
        text = line.decode("utf-8", "replace")
        try:
            record = orjson.loads(text)
        except orjson.JSONDecodeError:
            record = _NOT_JSON
        header = _member(record, "messageHeader")
        message_id = _text(_member(header, "messageId")) if isinstance(header, dict) else None
        if not message_id or code is not None:
            rejected.append(_reject(line, text, record is _NOT_JSON, bool(message_id), uri, arrived, code, glue_schema))
            return
        assert isinstance(record, dict)
        assert isinstance(header, dict)
        copies[message_id] = copies.get(message_id, 0) + 1
        kept = winners.get(message_id)
        if kept is not None and kept[0] <= order:
            return
        winners[message_id] = (order, _row(message_id, record, header, arrived, known_types, glue_schema))

    files = sorted(
        os.path.join(folder, name)
        for folder, _, names in os.walk(source)
        for name in names
        if not name.startswith((".", "_"))
    )
    for path in files:
        uri = "file://" + os.path.abspath(path)
        arrived = glue_schema.archived_at(uri)
        with open(path, "rb") as handle:
            data = gzip.decompress(handle.read())
        for number, line in enumerate(archive_lines(data)):
            lines += 1
            order = (arrived is None, arrived or _EPOCH, uri, number)
            if refusals is not None and (
                len(line) in refusals.claim_check_sizes or (len(line), zlib.crc32(line)) in refusals.keys
            ):
                digest = hashlib.sha256(line).hexdigest()
                if digest in refusals.codes:
                    held.setdefault(digest, []).append((order, line, uri, arrived))
                    continue
            consider(order, line, uri, arrived, None)
    matched = 0
    for digest, waiting in held.items():
        codes = sorted(refusals.codes[digest]) if refusals is not None else []
        waiting.sort(key=lambda item: item[0], reverse=True)  # the latest copies were the refused ones
        for index, (order, line, uri, arrived) in enumerate(waiting):
            code = codes[index] if index < len(codes) else None
            matched += code is not None
            consider(order, line, uri, arrived, code)
    rows = [row for _, row in winners.values()]
    curated_schema = _arrow_schema(pa, glue_schema.CURATED_COLUMNS + glue_schema.CURATED_PARTITIONS)
    shutil.rmtree(output, ignore_errors=True)
    pq.write_to_dataset(
        pa.Table.from_pylist(rows, schema=curated_schema),
        str(output / "messages"),
        partition_cols=[name for name, _ in glue_schema.CURATED_PARTITIONS],
    )
    (output / "rejects").mkdir(parents=True)
    pq.write_table(
        pa.Table.from_pylist(rejected, schema=_arrow_schema(pa, glue_schema.REJECT_COLUMNS)),
        str(output / "rejects" / "part-0.parquet"),
    )
    repeated: list[dict[str, Any]] = [
        {"messageId": key, "discarded": count - 1} for key, count in copies.items() if count > 1
    ]
    (output / "duplicates").mkdir(parents=True)
    pq.write_table(
        pa.Table.from_pylist(repeated, schema=_arrow_schema(pa, glue_schema.DUPLICATE_COLUMNS)),
        str(output / "duplicates" / "part-0.parquet"),
    )
    counts = {
        "lines": lines,
        "messages": len(rows),
        "rejects": len(rejected),
        "duplicates": sum(r["discarded"] for r in repeated),
    }
    if refusals is not None:
        counts |= {"brokerRejections": matched, "unmatchedRejections": refusals.total - matched}
    return counts


@dataclass
class _Refusals:
    """The broker's rejections in an errors archive: their codes by payload digest, and the
    (length, CRC-32) of every payload whose bytes are known (a Claim Check's are not)."""

    codes: dict[str, list[str]] = field(default_factory=dict)
    keys: set[tuple[int, int]] = field(default_factory=set)
    claim_check_sizes: set[int] = field(default_factory=set)
    total: int = 0


def _refusals(errors: Path, glue_schema: Any) -> _Refusals:
    found = _Refusals()
    broker = frozenset(glue_schema.BROKER_CODES)
    for folder, _, names in os.walk(errors):
        for name in names:
            if name.startswith((".", "_")):
                continue
            with open(os.path.join(folder, name), "rb") as handle:
                records = archive_lines(gzip.decompress(handle.read()))
            for record in records:
                try:
                    code = orjson.loads(record)["messageHeader"]["errorCode"]
                except (orjson.JSONDecodeError, KeyError, TypeError):
                    continue
                if code not in broker:
                    continue
                try:
                    payload = decoration.original(record)
                except ValueError:  # a Claim Check: the payload is in S3, its digest is here
                    wrapped = orjson.loads(record)[decoration.WRAPPER_KEY]
                    digest, size = str(wrapped["sha256"]).lower(), int(wrapped["bytes"])
                    found.claim_check_sizes.add(size)
                except (KeyError, TypeError, orjson.JSONDecodeError):
                    continue
                else:
                    digest = hashlib.sha256(payload).hexdigest()
                    found.keys.add((len(payload), zlib.crc32(payload)))
                found.codes.setdefault(digest, []).append(code)
                found.total += 1
    return found


def _row(
    message_id: str,
    record: dict[str, Any],
    header: dict[str, Any],
    arrived: datetime | None,
    known_types: frozenset[str],
    glue_schema: Any,
) -> dict[str, Any]:
    """The curated row of a record."""
    timings = _member(header, "messageTimings")
    sequence = _member(header, "messageSequence")
    published = _timestamp(_member(timings, "publishedTimestamp"))
    body = record.get("messageBody")
    message_type = _text(header.get("messageType"))
    day = published or arrived
    return {
        "messageId": message_id,
        "messageClass": _text(header.get("messageClass")),
        "correlationId": _text(header.get("correlationId")),
        "sequence": _text(_member(sequence, "sequence")),
        "position": _int(_member(sequence, "position")),
        "total": _int(_member(sequence, "total")),
        "publishedTimestamp": published,
        "expirationTimestamp": _timestamp(_member(timings, "expirationTimestamp")),
        "generator": _text(header.get("generator")),
        "version": _text(header.get("version")),
        "errorCode": _text(header.get("errorCode")),
        "bodyBytes": None if body is None else len(body.encode() if isinstance(body, str) else orjson.dumps(body)),
        "archivedAt": arrived,
        "dt": (day or datetime.now(UTC)).strftime("%Y-%m-%d"),
        "messageType": message_type if message_type in known_types else glue_schema.UNKNOWN_TYPE,
    }


_NOT_JSON = object()
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def archive_lines(data: bytes) -> list[bytes]:
    """The lines of a decompressed object, as Spark's text reader with ``lineSep='\\n'`` gives them."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return lines


def _reject(
    line: bytes,
    text: str,
    not_json: bool,
    has_id: bool,
    uri: str,
    arrived: datetime | None,
    code: str | None,
    glue_schema: Any,
) -> dict[str, Any]:
    row = {"line": text, "source": uri, "archivedAt": arrived, "errorCode": code}
    try:
        line.decode("utf-8")
    except UnicodeDecodeError:
        import base64

        return row | {"line": base64.b64encode(line).decode(), "reason": glue_schema.REJECT_NOT_UTF8}
    if has_id:
        return row | {"reason": glue_schema.REJECT_BY_BROKER}
    return row | {"reason": glue_schema.REJECT_NOT_JSON if not_json else glue_schema.REJECT_NO_MESSAGE_ID}


def _arrow_schema(pa: Any, columns: tuple[tuple[str, str], ...]) -> Any:
    types = {
        "string": pa.string(),
        "int": pa.int32(),
        "bigint": pa.int64(),
        "timestamp": pa.timestamp("us", tz="UTC"),
        "date": pa.date32(),
        "double": pa.float64(),
    }
    return pa.schema([pa.field(name, types[kind]) for name, kind in columns])


# -- the benchmark -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Figures:
    records: int
    gzip_bytes: int
    objects: int
    spark_seconds: float
    quarter_records: int
    quarter_seconds: float
    single_process_seconds: float
    counts: dict[str, int]
    #: the machine: CPUs, and how busy other work kept them just before the timed runs
    cores: int
    busy_before: float | None
    #: records in the errors archive the job read beside the audit archive (0: none given)
    errors_records: int = 0

    @property
    def spark_per_s(self) -> float:
        return self.records / self.spark_seconds

    @property
    def scaling_ratio(self) -> float:
        """time(N) / time(N/4): 4.0 is linear; start-up cost pulls it below."""
        return self.spark_seconds / self.quarter_seconds

    @property
    def single_process_per_s(self) -> float:
        return self.records / self.single_process_seconds

    def as_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "spark_per_s": self.spark_per_s,
            "scaling_ratio": self.scaling_ratio,
            "single_process_per_s": self.single_process_per_s,
        }


def run_job(
    archive_root: Path, output: Path, *, errors: Path | None = None, script: Path = COMPACTION_JOB
) -> tuple[float, dict[str, int]]:
    """Run a job script as a user would, in a fresh process; its wall-clock seconds and counts."""
    arguments = ["--input", str(archive_root), "--output", str(output)]
    if errors is not None:
        arguments += ["--errors", str(errors)]
    started = time.perf_counter()
    done = subprocess.run([sys.executable, str(script), *arguments], capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{script.name} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    counts = orjson.loads(done.stdout.strip().splitlines()[-1])
    return elapsed, counts


#: One broken copy (a refused message under a valid one's messageId) per this many records.
BROKEN_EVERY = 100


def run(
    records: int,
    *,
    seed: int = 11,
    workdir: Path | None = None,
    keep: bool = False,
    broken_every: int = BROKEN_EVERY,
) -> Figures:
    """Generate archives of ``records`` and ``records // 4``, time the job on both and the
    single-process version on the larger; check every run counted what was generated.

    With ``broken_every`` (0: none), broken copies are mixed in and the errors archive the
    broker would write goes beside the audit archive: the job reads it (``--errors``), as on AWS.
    """
    if workdir is not None:
        workdir.mkdir(parents=True, exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix="rdss-bench-glue-", dir=workdir))
    try:

        def generate(name: str, count: int, seed: int) -> Archive:
            errors = base / f"errors-{name}" if broken_every else None
            return write_archive(
                base / f"archive-{name}", count, seed=seed, broken_every=broken_every, errors_root=errors
            )

        full = generate("n", records, seed)
        quarter = generate("q", max(records // 4, 1), seed + 1)
        busy = busy_fraction()
        quarter_seconds, quarter_counts = run_job(quarter.root, base / "out-q", errors=quarter.errors_root)
        _check(quarter, quarter_counts)
        spark_seconds, counts = run_job(full.root, base / "out-n", errors=full.errors_root)
        _check(full, counts)
        started = time.perf_counter()
        single_counts = compact_in_process(full.root, base / "out-single", full.errors_root)
        single_seconds = time.perf_counter() - started
        _check(full, single_counts)
        return Figures(
            records=full.records,
            gzip_bytes=full.gzip_bytes,
            objects=full.objects,
            spark_seconds=spark_seconds,
            quarter_records=quarter.records,
            quarter_seconds=quarter_seconds,
            single_process_seconds=single_seconds,
            counts=counts,
            cores=os.cpu_count() or 1,
            busy_before=busy,
            errors_records=full.errors_records,
        )
    finally:
        if not keep:
            shutil.rmtree(base, ignore_errors=True)


def busy_fraction(seconds: float = 3.0) -> float | None:
    """The share of all CPUs busy over ``seconds`` while this process waits (Linux only): other
    work on the machine takes cores from the job, and the figures should say so."""

    def sample() -> tuple[int, int] | None:
        try:
            with open("/proc/stat") as handle:
                fields = [int(value) for value in handle.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
        return sum(fields), idle

    first = sample()
    time.sleep(seconds)
    second = sample()
    if first is None or second is None or second[0] == first[0]:
        return None
    total, idle = second[0] - first[0], second[1] - first[1]
    return 1 - idle / total


def _check(written: Archive, counts: dict[str, int]) -> None:
    expected = written.expected_counts()
    if counts != expected:  # a benchmark of a wrong answer is worthless
        raise AssertionError(f"compaction counted {counts}, the archive holds {expected}")
