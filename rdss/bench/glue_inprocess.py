"""The audit compaction's work done in one Python process (orjson and pyarrow), the figure
``rdss bench glue`` sets beside the Spark job: archive entries read (:func:`rdss.archive.entries.read`,
each identity once), parse, first-seen de-duplication, rejects and partitioned Parquet."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import shutil
import zlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import orjson

from rdss.archive import entries as archive
from rdss.host.resources import glue_jobs_source
from rdss.model import decoration, timestamps

_RFC3339 = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})\Z"
)
_INT32 = range(-(2**31), 2**31)


def load_schema() -> ModuleType:
    """``glue_jobs/schema.py``, the table definitions the jobs and the CDK app share."""
    spec = importlib.util.spec_from_file_location("rdss_glue_schema", glue_jobs_source() / "schema.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
    ``errors``, the broker's rejections matched by digest as the job matches them (rdss.model.decoration
    recovers each payload, the job's Java half reads the same records independently)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    glue_schema = load_schema()
    known_types = frozenset(glue_schema.MESSAGE_TYPES)
    winners: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {}
    copies: dict[str, int] = {}
    rejected: list[dict[str, Any]] = []
    lines = 0
    seen = archive.Identities()
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

    files = []
    for folder, _, names in os.walk(source):
        for name in names:
            if not name.startswith((".", "_")):
                uri = "file://" + os.path.abspath(os.path.join(folder, name))
                files.append((uri, glue_schema.archived_at(uri)))
    # in archive order, so that the first entry of an identity read is its first seen
    files.sort(key=lambda item: (item[1] is None, item[1] or _EPOCH, item[0]))
    for uri, arrived in files:
        with open(uri.removeprefix("file://"), "rb") as handle:
            entries = archive.read(handle.read())
        for number, entry in enumerate(entries):
            if not seen.first(entry):
                continue
            line = entry.payload
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
        "archivedAgain": seen.repeats,
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
    seen = archive.Identities()
    for folder, _, names in os.walk(errors):
        for name in names:
            if name.startswith((".", "_")):
                continue
            with open(os.path.join(folder, name), "rb") as handle:
                records = [entry.payload for entry in archive.unique(archive.read(handle.read()), seen)]
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
