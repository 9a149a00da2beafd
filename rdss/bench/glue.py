"""``rdss bench glue``: the audit compaction job on local Spark beside the same work in one process.

:func:`write_archive` writes an audit archive the way Firehose does (gzip objects of
newline-delimited records under hour prefixes), from :class:`rdss.workload.Workload` traffic
with duplicates, malformed lines and multi-part sequences mixed in. :func:`run` times
``glue_jobs/audit_compaction.py`` on it as a user runs it (a fresh process: Python, the JVM and
Spark start-up included), on a quarter of the records to show how cost grows, and
:func:`compact_in_process` doing the same work (parse, first-seen de-duplication, rejects,
partitioned Parquet) in a single Python process with orjson and pyarrow.
"""

from __future__ import annotations

import gzip
import importlib.util
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import orjson

from rdss import archive, timestamps
from rdss.messages import Message
from rdss.workload import MIX, Workload

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
    objects: int = 0
    gzip_bytes: int = 0
    raw_bytes: int = 0
    #: every malformed line as written (only with ``ledger=True``)
    malformed_lines: list[bytes] = field(default_factory=list)
    #: messageId -> (object key, line index) of its first copy (only with ``ledger=True``)
    first_seen: dict[str, tuple[str, int]] = field(default_factory=dict)


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


def records_of(
    count: int,
    *,
    seed: int,
    small: bool,
    days: float,
    duplicate_every: int,
    malformed_every: int,
    sequence_every: int,
) -> Iterator[tuple[datetime, bytes, str | None, bool]]:
    """``(published, payload, messageId or None, duplicate?)`` in arrival order."""
    workload = Workload(seed)
    rng = random.Random(seed + 1)
    mix = SMALL_MIX if small else MIX
    kinds = [(t, c) for t, c, _ in mix]
    weights = [w for _, _, w in mix]
    step = days * 86400 / max(count, 1)
    recent: list[tuple[bytes, str]] = []
    templates: dict[tuple[str, str], list[Message]] = {}
    pending: list[bytes] = []
    malformed_kind = 0
    for index in range(count):
        published = START + timedelta(seconds=index * step)
        if malformed_every and index % malformed_every == malformed_every - 1 and recent:
            yield published, malformed_line(malformed_kind, recent[-1][0]), None, False
            malformed_kind += 1
            continue
        if duplicate_every and index % duplicate_every == duplicate_every - 1 and recent:
            payload, message_id = rng.choice(recent)
            yield published, payload, message_id, True
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
        yield published, payload, message_id, False


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
    ledger: bool = False,
) -> Archive:
    """Write ``records`` lines of audit archive under ``root`` (``audit/year=/.../hour=/``).

    Published times spread evenly over ``days`` from 2026-11-01; each object is delivered up to
    a minute after its last record, as Firehose's buffer does. Every ``duplicate_every``-th
    record re-sends one of the last 500 payloads byte for byte (a producer or Kinesis retry),
    every ``malformed_every``-th is a malformed line (:func:`malformed_line`), and every
    ``sequence_every``-th starts a three-part sequence, half of them with a part missing.
    """
    result = Archive(root=root)
    rng = random.Random(seed + 2)
    batch: list[bytes] = []
    ids: list[str | None] = []
    last_published = START
    last_delivered = START

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

    for published, payload, message_id, duplicate in records_of(
        records,
        seed=seed,
        small=small,
        days=days,
        duplicate_every=duplicate_every,
        malformed_every=malformed_every,
        sequence_every=sequence_every,
    ):
        batch.append(payload)
        ids.append(message_id)
        last_published = published
        result.records += 1
        if message_id is None:
            result.malformed += 1
            if ledger:
                result.malformed_lines.append(payload)
        elif duplicate:
            result.duplicates += 1
        else:
            result.messages += 1
        if len(batch) >= per_object:
            flush()
    flush()
    return result


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


def compact_in_process(source: Path, output: Path) -> dict[str, int]:
    """What ``audit_compaction.py`` does, in this process: orjson to parse, a dict to keep the
    first-seen record of each messageId, pyarrow to write the same partitioned Parquet."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    glue_schema = load_schema()
    known_types = frozenset(glue_schema.MESSAGE_TYPES)
    winners: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {}
    copies: dict[str, int] = {}
    rejected: list[dict[str, Any]] = []
    lines = 0
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
            text = line.decode("utf-8", "replace")
            try:
                record = orjson.loads(text)
            except orjson.JSONDecodeError:
                record = _NOT_JSON
            header = _member(record, "messageHeader")
            message_id = _text(_member(header, "messageId")) if isinstance(header, dict) else None
            if not message_id:
                rejected.append(_reject(line, text, record is _NOT_JSON, uri, arrived, glue_schema))
                continue
            copies[message_id] = copies.get(message_id, 0) + 1
            order = (arrived is None, arrived or _EPOCH, uri, number)
            held = winners.get(message_id)
            if held is not None and held[0] <= order:
                continue
            timings = _member(header, "messageTimings")
            sequence = _member(header, "messageSequence")
            published = _timestamp(_member(timings, "publishedTimestamp"))
            body = record.get("messageBody")
            message_type = _text(header.get("messageType"))
            day = published or arrived
            winners[message_id] = (
                order,
                {
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
                    "bodyBytes": None
                    if body is None
                    else len(body.encode() if isinstance(body, str) else orjson.dumps(body)),
                    "archivedAt": arrived,
                    "dt": (day or datetime.now(UTC)).strftime("%Y-%m-%d"),
                    "messageType": message_type if message_type in known_types else glue_schema.UNKNOWN_TYPE,
                },
            )
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
    return {
        "lines": lines,
        "messages": len(rows),
        "rejects": len(rejected),
        "duplicates": sum(r["discarded"] for r in repeated),
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
    line: bytes, text: str, not_json: bool, uri: str, arrived: datetime | None, glue_schema: Any
) -> dict[str, Any]:
    try:
        line.decode("utf-8")
    except UnicodeDecodeError:
        import base64

        return {
            "line": base64.b64encode(line).decode(),
            "reason": glue_schema.REJECT_NOT_UTF8,
            "source": uri,
            "archivedAt": arrived,
        }
    reason = glue_schema.REJECT_NOT_JSON if not_json else glue_schema.REJECT_NO_MESSAGE_ID
    return {"line": text, "reason": reason, "source": uri, "archivedAt": arrived}


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


def run_job(archive_root: Path, output: Path, *, script: Path = COMPACTION_JOB) -> tuple[float, dict[str, int]]:
    """Run a job script as a user would, in a fresh process; its wall-clock seconds and counts."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, str(script), "--input", str(archive_root), "--output", str(output)],
        capture_output=True,
        text=True,
        check=False,
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{script.name} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    counts = orjson.loads(done.stdout.strip().splitlines()[-1])
    return elapsed, counts


def run(records: int, *, seed: int = 11, workdir: Path | None = None, keep: bool = False) -> Figures:
    """Generate archives of ``records`` and ``records // 4``, time the job on both and the
    single-process version on the larger; check every run counted what was generated."""
    if workdir is not None:
        workdir.mkdir(parents=True, exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix="rdss-bench-glue-", dir=workdir))
    try:
        full = write_archive(base / "archive-n", records, seed=seed)
        quarter = write_archive(base / "archive-q", max(records // 4, 1), seed=seed + 1)
        busy = busy_fraction()
        quarter_seconds, quarter_counts = run_job(quarter.root, base / "out-q")
        _check(quarter, quarter_counts)
        spark_seconds, counts = run_job(full.root, base / "out-n")
        _check(full, counts)
        started = time.perf_counter()
        single_counts = compact_in_process(full.root, base / "out-single")
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
    expected = {
        "lines": written.records,
        "messages": written.messages,
        "rejects": written.malformed,
        "duplicates": written.duplicates,
    }
    if counts != expected:  # a benchmark of a wrong answer is worthless
        raise AssertionError(f"compaction counted {counts}, the archive holds {expected}")
