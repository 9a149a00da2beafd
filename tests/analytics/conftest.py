"""One local run of the Glue jobs over a generated archive, laid out as the CDK app's buckets,
and the Glue tables the app declares over it, loaded into DuckDB (tables.py)."""

from __future__ import annotations

import json
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any

import duckdb
import orjson
import pytest
from pyspark.sql import SparkSession

from glue_jobs import audit_compaction, audit_report, schema
from rdss.archive import entries as archive
from rdss.bench.glue_archive import Archive, write_archive
from stacks.analytics import CURATED_PREFIX, REPORTS_PREFIX
from tests.analytics.tables import GlueTable, glue_tables, load

#: Days of traffic the archive holds, up to today: more than the 30 the dated queries look back.
DAYS = 40


@pytest.fixture(scope="session")
def app_template() -> tuple[dict[str, Any], dict[str, str]]:
    """The dev environment's template and which logical id is which bucket (audit, errors, curated)."""
    from aws_cdk.assertions import Template

    from tests.cdk.conftest import make_app

    _, stack = make_app("dev", Path(tempfile.mkdtemp(prefix="rdss-analytics-cdk-")))
    template = dict(Template.from_stack(stack).to_json())
    default = {
        "audit": stack.messaging.buckets["audit"],
        "errors": stack.messaging.buckets["errors"],
        "curated": stack.analytics.curated,
    }
    buckets = {}
    for name, bucket in default.items():
        child = bucket.node.default_child
        buckets[stack.get_logical_id(child)] = name  # type: ignore[arg-type]
    return template, buckets


@pytest.fixture(scope="session")
def tables(app_template: tuple[dict[str, Any], dict[str, str]]) -> dict[str, GlueTable]:
    return glue_tables(app_template[0])


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    active = SparkSession.getActiveSession()
    session = active or audit_compaction.local_session("rdss-analytics-tests")
    yield session
    if active is None:
        session.stop()


@dataclass(frozen=True)
class Accepted:
    """A message the broker accepted (its first record), as the run was given it."""

    message_id: str
    dt: str
    message_type: str
    sequence: str | None
    position: int | None
    total: int | None
    latency: float | None


@dataclass
class JobRun:
    duckdb: Any
    #: files each table read, by table name
    files: dict[str, int]
    today: date
    archive: Archive
    summary: dict[str, Any]
    accepted: list[Accepted] = field(default_factory=list)
    resent: Counter[str] = field(default_factory=Counter)
    #: audit records per (year, month, day) of the hour prefix they were first archived under
    lines_per_day: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    #: errors-archive records per ((year, month, day), channel, errorCode)
    refused_per_day: Counter[tuple[tuple[str, str, str], str, str]] = field(default_factory=Counter)


def _day_of(path: Path) -> tuple[str, str, str]:
    parts = dict(part.split("=", 1) for part in path.parent.parts if "=" in part)
    return parts["year"], parts["month"], parts["day"]


@pytest.fixture(scope="session")
def run(
    spark: SparkSession,
    tables: dict[str, GlueTable],
    app_template: tuple[dict[str, Any], dict[str, str]],
    tmp_path_factory: pytest.TempPathFactory,
) -> JobRun:
    root = tmp_path_factory.mktemp("analytics")
    today = datetime.now(UTC).date()
    start = datetime.combine(today - timedelta(days=DAYS), time(), UTC)
    buckets = {name: root / f"{name}-bucket" for name in ("audit", "errors", "curated")}
    generated = write_archive(
        buckets["audit"],
        3000,
        seed=21,
        start=start,
        days=DAYS,
        per_object=60,
        duplicate_every=23,
        malformed_every=29,
        broken_every=31,
        sequence_every=150,
        repeat_every=37,
        errors_root=buckets["errors"],
        ledger=True,
    )
    curated = buckets["curated"] / CURATED_PREFIX
    reports = buckets["curated"] / REPORTS_PREFIX
    errors = ["--errors", str(buckets["errors"] / "errors")]
    audit_compaction.main(["--input", str(buckets["audit"] / "audit"), "--output", str(curated), *errors], spark=spark)
    audit_report.main(["--input", str(curated), "--output", str(reports), *errors], spark=spark)

    connection = duckdb.connect()
    connection.execute("SET TimeZone = 'UTC'")
    logical = app_template[1]
    files = {table.name: load(connection, table, buckets[logical[table.bucket]], today) for table in tables.values()}
    result = JobRun(
        duckdb=connection,
        files=files,
        today=today,
        archive=generated,
        summary=json.loads((reports / schema.REPORT_SUMMARY).read_text()),
        resent=Counter(generated.resent),
    )
    objects: dict[str, list[bytes]] = {}
    seen, seen_errors = archive.Identities(), archive.Identities()  # each record counted once
    for path in sorted((buckets["audit"] / "audit").rglob("*.gz")):
        entries = archive.read(path.read_bytes())
        objects[str(path)] = [entry.payload for entry in entries]
        result.lines_per_day[_day_of(path)] += len(list(archive.unique(entries, seen)))
    for message_id, (key, index) in generated.first_seen.items():
        header = orjson.loads(objects[key][index])["messageHeader"]
        published = datetime.fromisoformat(header["messageTimings"]["publishedTimestamp"])
        archived = schema.archived_at(key)
        sequence = header.get("messageSequence") or {}
        message_type = header["messageType"] if header["messageType"] in schema.MESSAGE_TYPES else schema.UNKNOWN_TYPE
        result.accepted.append(
            Accepted(
                message_id=message_id,
                dt=published.astimezone(UTC).date().isoformat(),
                message_type=message_type,
                sequence=sequence.get("sequence"),
                position=sequence.get("position"),
                total=sequence.get("total"),
                latency=None if archived is None else (archived - published).total_seconds(),
            )
        )
    for path in sorted((buckets["errors"] / "errors").rglob("*.gz")):
        channel = path.relative_to(buckets["errors"] / "errors").parts[0]
        for record in (e.payload for e in archive.unique(archive.read(path.read_bytes()), seen_errors)):
            code = orjson.loads(record)["messageHeader"]["errorCode"]
            result.refused_per_day[(_day_of(path), channel, code)] += 1
    return result
