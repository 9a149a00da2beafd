"""The report's CSV copies, as a spreadsheet opens them: values whole (RFC 4180 quoting), and no
producer's text run as a formula. Spark's CSV writer trimmed spaces and tabs at either end,
escaped quotes with a backslash (which spreadsheets do not read), and wrote ``=HYPERLINK(...)``
from a message's generator as it was."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from glue_jobs import audit_report, schema

HOSTILE = ['=HYPERLINK("http://example.invalid","x")', "+SUM(A1)", "-2+3", "@cmd", "\t=1", "\r=1", ' a "quoted", one ']


def cells(path: Path) -> list[list[str]]:
    """Every row of the one CSV file under ``path``, as Python's csv module (RFC 4180) reads it."""
    [found] = path.glob("*.csv")
    with found.open(newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle))


def shown(value: str) -> str:
    """What the CSV must hold for a text value: the value, led by an apostrophe if a
    spreadsheet would take it for a formula."""
    return "'" + value if value[:1] in ("=", "+", "-", "@", "\t", "\r") else value


def volume(spark: Any, generators: list[str]) -> Any:
    ddl = ", ".join(f"{name} {kind}" for name, kind in schema.VOLUME_COLUMNS)
    return spark.createDataFrame([("2026-11-01", "MetadataCreate", "Event", g, 1) for g in generators], ddl)


def test_a_generator_that_is_a_formula_reaches_the_csv_as_text(spark: Any, tmp_path: Path) -> None:
    """The whole report over curated messages whose generators are formulas and padded text:
    the volume CSV holds each as text, whole; the Parquet table as sent."""
    columns = [*schema.CURATED_COLUMNS, *schema.CURATED_PARTITIONS]
    ddl = ", ".join(f"{name} {kind}" for name, kind in columns)

    def row(generator: str) -> tuple[Any, ...]:
        values = {name: None for name, _ in columns}
        values.update(messageId=generator, messageClass="Event", generator=generator, dt="2026-11-01")
        values.update(messageType="MetadataCreate")
        return tuple(values[name] for name, _ in columns)

    messages = spark.createDataFrame([row(g) for g in HOSTILE], ddl)
    rejects = spark.createDataFrame([], ", ".join(f"{n} {k}" for n, k in schema.REJECT_COLUMNS))
    duplicates = spark.createDataFrame([], ", ".join(f"{n} {k}" for n, k in schema.DUPLICATE_COLUMNS))
    audit_report.run(spark, messages, rejects, duplicates, None, str(tmp_path))
    header, *rows = cells(tmp_path / "csv" / "volume")
    assert header == [name for name, _ in schema.VOLUME_COLUMNS]
    assert sorted(r[3] for r in rows) == sorted(shown(g) for g in HOSTILE)
    parquet = spark.read.parquet(str(tmp_path / "volume")).collect()
    assert sorted(r["generator"] for r in parquet) == sorted(HOSTILE)


_TEXT = st.text(st.characters(blacklist_categories=["Cs"]), max_size=20)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.lists(_TEXT | st.sampled_from(HOSTILE), min_size=1, max_size=25))
def test_any_text_is_read_back_whole_and_never_as_a_formula(
    spark: Any, tmp_path_factory: pytest.TempPathFactory, values: list[str]
) -> None:
    out = tmp_path_factory.mktemp("csv")
    audit_report.write_csv(volume(spark, values), str(out))
    _, *rows = cells(out)
    assert sorted(r[3] for r in rows) == sorted(shown(v) for v in values)
    for r in rows:
        assert all(cell[:1] not in ("=", "+", "-", "@", "\t", "\r") for cell in r)
