"""The Athena named queries (rdss/analytics/queries.py), run for real on what a local job run wrote.

LocalStack has no Athena; this is the closest honest check here. Each query is parsed with
sqlglot in Athena's dialect, every table and column it names is checked against the Glue tables
the CDK app declares, and it is transpiled to DuckDB and run over those tables as Athena would
see them: the curated and report Parquet the jobs wrote, and the raw archives read the way the
``audit_raw``/``errors_raw`` tables read them (tables.py). The figures are asserted against what
the run was given: a generated archive of recent traffic, with resends, malformed lines, broken
copies and sequences, and the errors archive the broker would have written.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from datetime import timedelta
from typing import Any

import pytest
import sqlglot
from sqlglot import exp
from sqlglot.errors import OptimizeError
from sqlglot.optimizer.qualify import qualify

from rdss.analytics.queries import NamedQuery, named_queries
from tests.analytics.conftest import JobRun
from tests.analytics.tables import GlueTable

QUERIES = {query.name: query for query in named_queries()}


def athena(query: NamedQuery) -> exp.Expression:
    return sqlglot.parse_one(query.sql, read="athena")


def rows(run: JobRun, name: str) -> list[dict[str, Any]]:
    """The query's result on the run's tables, as DuckDB computes the transpiled SQL."""
    result = run.duckdb.execute(athena(QUERIES[name]).sql(dialect="duckdb"))
    names = [column[0] for column in result.description]
    return [dict(zip(names, row, strict=True)) for row in result.fetchall()]


def test_every_declared_query_is_tested(run: JobRun, tables: dict[str, GlueTable]) -> None:
    tested = {name.removeprefix("test_").replace("_", "-") for name in globals() if name.startswith("test_")}
    assert set(QUERIES) <= tested
    # and every table the app declares reads something of the run (a layout the table's
    # location or partition projection does not reach would read nothing)
    assert {name for name, files in run.files.items() if files == 0} == set()
    assert set(run.files) == set(tables)


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_it_parses_and_names_only_declared_tables_and_columns(name: str, tables: dict[str, GlueTable]) -> None:
    expression = athena(QUERIES[name])
    named = {table.name for table in expression.find_all(exp.Table)}
    ctes = {cte.alias for cte in expression.find_all(exp.CTE)}
    assert named - ctes <= set(tables), (
        f"{name} reads tables the catalog does not declare: {named - ctes - set(tables)}"
    )
    catalog = {table.name: dict(table.columns + table.partitions) for table in tables.values()}
    # raises on a column no table in scope declares (validate_qualify_columns)
    qualify(expression, schema=catalog, dialect="athena", validate_qualify_columns=True)


def test_the_check_refuses_a_column_or_table_the_catalog_does_not_declare(tables: dict[str, GlueTable]) -> None:
    catalog = {table.name: dict(table.columns + table.partitions) for table in tables.values()}
    with pytest.raises(OptimizeError, match="messageid2"):
        qualify(
            athena(NamedQuery("x", "", "SELECT messageId2 FROM messages")),
            schema=catalog,
            dialect="athena",
            validate_qualify_columns=True,
        )
    expression = athena(NamedQuery("x", "", "SELECT count(*) FROM curated_messages"))
    assert {table.name for table in expression.find_all(exp.Table)} - set(tables) == {"curated_messages"}


def test_volume_per_type_per_day(run: JobRun) -> None:
    since = (run.today - timedelta(days=30)).isoformat()
    expected = Counter((m.dt, m.message_type) for m in run.accepted if m.dt >= since)
    found = rows(run, "volume-per-type-per-day")
    assert {(r["dt"], r["messageType"]): r["messages"] for r in found} == expected
    assert any(m.dt < since for m in run.accepted), "the archive should reach further back than 30 days"
    assert [r["dt"] for r in found] == sorted((r["dt"] for r in found), reverse=True)


def test_error_rate_per_code(run: JobRun) -> None:
    found = rows(run, "error-rate-per-code")
    expected = {(*day, channel, code): records for (day, channel, code), records in run.refused_per_day.items()}
    assert {(r["year"], r["month"], r["day"], r["channel"], r["errorCode"]): r["records"] for r in found} == expected
    for row in found:
        published = run.lines_per_day[(row["year"], row["month"], row["day"])]
        assert row["published"] == published
        assert row["rate"] == pytest.approx(row["records"] / published)


def test_duplicates(run: JobRun) -> None:
    (row,) = rows(run, "duplicates")
    discarded = sum(run.resent.values())
    assert (row["duplicated_messages"], row["discarded_records"]) == (len(run.resent), discarded)
    # the report's definition: duplicates among the records the broker accepted
    assert row["duplicate_rate"] == pytest.approx(discarded / (len(run.accepted) + discarded))
    assert row["duplicate_rate"] == pytest.approx(run.summary["duplicates"]["rate"])


def test_incomplete_sequences(run: JobRun) -> None:
    positions: dict[str, set[int]] = defaultdict(set)
    totals: dict[str, int] = {}
    for message in run.accepted:
        if message.total is not None and message.total > 1:
            positions[message.sequence].add(message.position)
            totals[message.sequence] = message.total
    expected = {sequence for sequence, seen in positions.items() if len(seen) < totals[sequence]}
    assert expected, "the archive should hold a sequence with a part missing"
    assert set(totals) - expected, "and a complete one"
    found = rows(run, "incomplete-sequences")
    assert {r["sequence"]: (r["total"], r["parts_seen"]) for r in found} == {
        sequence: (totals[sequence], len(positions[sequence])) for sequence in expected
    }
    assert run.summary["incompleteSequences"] == len(expected)


def test_latency(run: JobRun) -> None:
    since = (run.today - timedelta(days=30)).isoformat()
    latencies: dict[tuple[str, str], list[float]] = defaultdict(list)
    for message in run.accepted:
        if message.dt >= since and message.latency is not None:
            latencies[(message.dt, message.message_type)].append(message.latency)
    found = rows(run, "latency")
    assert {(r["dt"], r["messageType"]): r["messages"] for r in found} == {k: len(v) for k, v in latencies.items()}
    for row in found:
        seconds = latencies[(row["dt"], row["messageType"])]
        assert float(row["max_seconds"]) == pytest.approx(max(seconds))
        assert min(seconds) <= row["p50_seconds"] <= row["p95_seconds"] <= row["p99_seconds"] <= max(seconds)
        assert row["p50_seconds"] == pytest.approx(statistics.median(seconds), abs=(max(seconds) - min(seconds)) / 4)
