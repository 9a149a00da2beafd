"""audit_report.py on real local Spark, over a compacted generated archive and an errors archive."""

from __future__ import annotations

import csv
import json
import threading
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pyarrow.parquet as pq
import pytest

from glue_jobs import audit_report, schema
from rdss.archive import entries as archive
from rdss.deployment.topology import Deployment
from rdss.model.decoration import decorate
from rdss.model.errors import ErrorCode
from rdss.status import console
from rdss.status.sources import ConsoleSource
from tests.glue.conftest import Compacted
from tests.glue.test_audit_compaction import hive_type, plain, read_rows
from tests.support import archives

#: (channel, code, payload): what the broker would have moved to the invalid and error archives
FAILED = [
    ("invalid", ErrorCode.GENERR004, b'{"messageHeader":{"messageId":"x"},"messageBody":{}}'),
    ("invalid", ErrorCode.GENERR004, b'{"messageHeader":{"messageId":"y"},"messageBody":{}}'),
    ("invalid", ErrorCode.GENERR007, b"not json at all"),  # wrapped: no header to decorate
    ("error", ErrorCode.GENERR003, b'{"messageHeader":{"messageId":"z"},"messageBody":{}}'),
]


@pytest.fixture(scope="module")
def report(spark: Any, compacted: Compacted, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    root = tmp_path_factory.mktemp("report")
    moment = datetime(2026, 11, 1, 12, 30, tzinfo=UTC)
    for channel in ("invalid", "error"):
        records = [decorate(payload, code, "") for kind, code, payload in FAILED if kind == channel]
        path = root / "errors" / archive.object_key(f"errors/{channel}/", moment, f"rdss-test-{channel}")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(archives.framed(records, stream=f"rdss-test-{channel}"))
    messages, rejects, duplicates = audit_report.read_curated(spark, str(compacted.output))
    errors = audit_report.read_errors(spark, str(root / "errors"))
    document = audit_report.run(spark, messages, rejects, duplicates, errors, str(root / "out"))
    return root / "out", document


def table(report: tuple[Path, dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return plain(report[0] / name)


def test_every_table_is_written_as_parquet_and_csv_with_its_glue_schema(report: tuple[Path, dict[str, Any]]) -> None:
    out, _ = report
    for name, columns in schema.REPORT_TABLES.items():
        files = sorted((out / name).glob("*.parquet"))
        assert files, name
        assert [(f.name, hive_type(f.type)) for f in pq.read_schema(files[0])] == list(columns)
        with next((out / "csv" / name).glob("*.csv")).open(newline="") as handle:
            header = next(csv.reader(handle))
        assert header == [column for column, _ in columns]
    assert json.loads((out / schema.REPORT_SUMMARY).read_text()) == report[1]


def test_volume_counts_every_curated_message(report: tuple[Path, dict[str, Any]], compacted: Compacted) -> None:
    rows = read_rows(compacted.output / "messages")
    expected = Counter((r["dt"], r["messageType"], r["messageClass"], r["generator"]) for r in rows)
    volume = table(report, "volume")
    assert {(r["dt"], r["messageType"], r["messageClass"], r["generator"]): r["messages"] for r in volume} == expected
    assert report[1]["volume"]["messageType"] == dict(Counter(r["messageType"] for r in rows))


def test_error_rates_per_code(report: tuple[Path, dict[str, Any]], compacted: Compacted) -> None:
    rates = table(report, "error_rates")
    assert {(r["channel"], r["errorCode"]): r["records"] for r in rates} == {
        ("invalid", "GENERR004"): 2,
        ("invalid", "GENERR007"): 1,
        ("error", "GENERR003"): 1,
    }
    received = sum(
        1 for r in read_rows(compacted.output / "messages") if r["archivedAt"].date().isoformat() == "2026-11-01"
    )
    received += sum(
        1 for r in plain(compacted.output / "rejects") if r["archivedAt"].date().isoformat() == "2026-11-01"
    )
    for row in rates:
        assert row["dt"] == "2026-11-01"
        assert row["received"] == received
        assert row["rate"] == pytest.approx(row["records"] / received)
    total = compacted.counts["messages"] + compacted.counts["rejects"]
    assert report[1]["errors"]["invalid"]["GENERR004"] == {"records": 2, "rate": pytest.approx(2 / total)}


def test_duplicate_rate(report: tuple[Path, dict[str, Any]], compacted: Compacted) -> None:
    rates = table(report, "duplicate_rates")
    assert sum(r["duplicates"] for r in rates) == compacted.archive.duplicates
    assert sum(r["records"] for r in rates) == compacted.archive.messages + compacted.archive.duplicates
    overall = report[1]["duplicates"]
    assert overall["records"] == compacted.archive.duplicates
    assert overall["rate"] == pytest.approx(
        compacted.archive.duplicates / (compacted.archive.messages + compacted.archive.duplicates)
    )


def test_incomplete_sequences(report: tuple[Path, dict[str, Any]], compacted: Compacted) -> None:
    positions: dict[str, set[int]] = {}
    totals: dict[str, int] = {}
    for row in read_rows(compacted.output / "messages"):
        if row["total"] and row["total"] > 1:
            positions.setdefault(row["sequence"], set()).add(row["position"])
            totals[row["sequence"]] = row["total"]
    expected = {sequence for sequence, seen in positions.items() if len(seen) < totals[sequence]}
    assert expected, "the generated archive should hold a sequence with a part missing"
    assert totals.keys() - expected, "and a complete one"
    rows = table(report, "incomplete_sequences")
    assert {r["sequence"] for r in rows} == expected
    assert all(r["parts"] == len(positions[r["sequence"]]) for r in rows)
    assert report[1]["incompleteSequences"] == len(expected)


def test_latency_percentiles(report: tuple[Path, dict[str, Any]], compacted: Compacted) -> None:
    rows = read_rows(compacted.output / "messages")
    latencies = [
        (r["archivedAt"] - r["publishedTimestamp"]).total_seconds()
        for r in rows
        if r["archivedAt"] is not None and r["publishedTimestamp"] is not None
    ]
    overall = report[1]["latencySeconds"]
    assert 0 <= min(latencies) <= overall["p50"] <= overall["p90"] <= overall["p99"] <= overall["max"]
    assert overall["max"] == pytest.approx(max(latencies))
    per_day = table(report, "latency")
    assert sum(r["messages"] for r in per_day) == len(latencies)
    assert all(r["p50Seconds"] <= r["p90Seconds"] <= r["p99Seconds"] <= r["maxSeconds"] for r in per_day)


def test_the_summary_accounts_for_every_line(report: tuple[Path, dict[str, Any]], compacted: Compacted) -> None:
    document = report[1]
    assert document["received"] == compacted.counts["messages"] + compacted.counts["rejects"]
    assert document["rejects"]["total"] == compacted.counts["rejects"]
    assert sum(document["rejects"]["byReason"].values()) == compacted.counts["rejects"]
    days = sorted({row["dt"] for row in read_rows(compacted.output / "messages")})
    assert document["period"] == {"first": days[0], "last": days[-1]}


def test_the_local_entry_point_without_an_errors_archive(
    spark: Any, compacted: Compacted, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--input", str(compacted.output), "--output", str(tmp_path / "out")]
    assert audit_report.main(argv, spark=spark) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["errors"] == {}
    assert printed["messages"] == compacted.counts["messages"]
    assert plain(tmp_path / "out" / "error_rates") == []
    assert orjson.loads((tmp_path / "out" / schema.REPORT_SUMMARY).read_bytes()) == printed


def test_missing_values_are_counted_under_a_string_key(spark: Any) -> None:
    # an invalid message that was archived (and curated) with only a messageId
    columns = [*schema.CURATED_COLUMNS, *schema.CURATED_PARTITIONS]
    row = {name: None for name, _ in columns}
    row.update(messageId="only-an-id", dt="2026-11-01", messageType=schema.UNKNOWN_TYPE)
    ddl = ", ".join(f"{name} {kind}" for name, kind in columns)
    messages = spark.createDataFrame([tuple(row[name] for name, _ in columns)], ddl)
    rejects = spark.createDataFrame([], ", ".join(f"{n} {k}" for n, k in schema.REJECT_COLUMNS))
    duplicates = spark.createDataFrame([], ", ".join(f"{n} {k}" for n, k in schema.DUPLICATE_COLUMNS))
    document = audit_report.summary(messages, rejects, duplicates, None)
    json.dumps(document, sort_keys=True)  # every key a string
    assert document["volume"]["generator"] == {audit_report.NO_VALUE: 1}
    assert document["volume"]["messageClass"] == {audit_report.NO_VALUE: 1}


def test_the_html_report_draws_every_table_offline_and_shows_text_as_text(
    report: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    from rdss.analytics.report import charts, read_report, render_html
    from rdss.cli import main
    from tests.support.browser import chromium, wait_drawn

    out, document = report
    read = read_report(out)
    assert read["summary"] == document
    for name in schema.REPORT_TABLES:  # the CSV read back is the Parquet table, row for row
        assert len(read["tables"][name]) == len(table(report, name)), name
    html = tmp_path / "report.html"
    assert main(["analytics", "report", str(out), "--html", str(html)]) == 0
    text = html.read_text()
    assert text == render_html(read)
    assert "http://" not in text.replace("http://www.w3.org", "")  # nothing fetched from anywhere
    assert "<script src" not in text
    browser = chromium()
    try:
        browser.get(html.as_uri())
        wait_drawn(browser, {c["id"] for c in charts(read)})
        volume = browser.execute_script(
            "return Chart.getChart(document.querySelector('canvas[data-chart=volume]'))"
            ".data.datasets.map(d => d.data.reduce((a, b) => a + b, 0)).reduce((a, b) => a + b, 0)"
        )
        assert volume == document["messages"]
        errors = [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"]
        assert not errors, errors  # the policy let both inline scripts run, and nothing else was asked for
        shots = Path(__file__).resolve().parents[2] / "build" / "console"
        shots.mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(str(shots / "analytics-report.png"))
        # rdss console --report shows the same charts (its report page reads nothing else)
        server, settings = console.serve(ConsoleSource(Deployment("report"), client=_no_client, report=out))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            # the token URL of the report page itself: the overview would read the deployment,
            # which this console has none of (its 500 was the first page a CI run saw)
            browser.get(console.url(settings).replace("/?token=", "/report?token=", 1))
            wait_drawn(browser, {c["id"] for c in charts(read)})
            browser.save_screenshot(str(shots / "console-report.png"))
        finally:
            server.shutdown()
            server.server_close()
    finally:
        browser.quit()


def _no_client(service: str) -> Any:
    raise AssertionError(f"the report page reads no {service}")
