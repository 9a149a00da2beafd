"""The analytics report with pictures: the report job's output (``glue_jobs/audit_report.py``:
``summary.json`` and a CSV per table under ``csv/<table>/``) as charts and tables.

:func:`read_report` reads the output; :func:`charts` turns its tables into chart
specifications (labels and datasets, nothing else), which Chart.js draws - in the console
(``rdss console --report DIR``) and in the self-contained HTML file :func:`render_html` writes
(``rdss analytics report DIR --html OUT``), for analysts who never start the console.

Everything in the tables came from messages (a messageType, a generator, an error code): it
reaches the page only as text through Jinja2's autoescaping or as JSON data the page's script
reads (never as markup), and the file's Content-Security-Policy lets only its own two scripts
run (their SHA-256 hashes).
"""

from __future__ import annotations

import base64
import csv
import hashlib
from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from typing import Any

import orjson

#: The report's tables in the order the page shows them (glue_jobs/schema.py REPORT_TABLES).
TABLES = ("volume", "error_rates", "duplicate_rates", "latency", "incomplete_sequences")
#: The script that draws every ``<canvas data-chart>`` from the page's ``chart-data`` JSON.
RENDERER = "charts.js"


def read_report(directory: Path) -> dict[str, Any]:
    """``{"summary": ..., "tables": {name: [row, ...]}}`` from a report job's output directory.

    Raises:
        FileNotFoundError: ``directory`` holds no ``summary.json`` (not a report's output).
    """
    summary = orjson.loads((directory / "summary.json").read_bytes())
    tables: dict[str, list[dict[str, str]]] = {}
    for name in TABLES:
        rows: list[dict[str, str]] = []
        for part in sorted((directory / "csv" / name).glob("*.csv")):
            with part.open(newline="", encoding="utf-8") as handle:
                rows += [{key: _unquoted(value) for key, value in row.items()} for row in csv.DictReader(handle)]
        tables[name] = rows
    return {"summary": summary, "tables": tables}


def _unquoted(value: str | None) -> str:
    """A CSV cell as the job wrote it, minus the apostrophe it puts before a text a spreadsheet
    would run as a formula (shown as text here anyway)."""
    value = value or ""
    return value[1:] if value[:1] == "'" and value[1:2] in ("=", "+", "-", "@", "\t", "\r") else value


def charts(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The report's tables as chart specifications: ``{"id", "title", "type", "labels", "datasets"}``
    (and ``stacked``, for the parts of one whole)."""
    tables = report["tables"]
    return [
        _pivot("volume", "Messages per day, by messageType", tables["volume"], "dt", "messageType", "messages", "bar"),
        _pivot(
            "error-rates",
            "Error records per day, by channel and errorCode",
            tables["error_rates"],
            "dt",
            ("channel", "errorCode"),
            "records",
            "bar",
        ),
        _columns("duplicates", "Duplicates per day", tables["duplicate_rates"], "dt", ("records", "duplicates"), "bar"),
        _columns(
            "latency",
            "Publish-to-archive latency (seconds), per day and messageType",
            tables["latency"],
            ("dt", "messageType"),
            ("p50Seconds", "p90Seconds", "p99Seconds", "maxSeconds"),
            "line",
        ),
        _pivot(
            "incomplete",
            "Incomplete sequences, by messageType",
            tables["incomplete_sequences"],
            "messageType",
            "messageType",
            None,
            "bar",
        ),
    ]


def _key(row: dict[str, str], columns: str | tuple[str, ...]) -> str:
    names = (columns,) if isinstance(columns, str) else columns
    return " ".join(row.get(name, "") for name in names)


def _number(value: str) -> float:
    try:
        return float(value)
    except ValueError:
        return 0.0


def _pivot(
    chart: str,
    title: str,
    rows: list[dict[str, str]],
    label: str | tuple[str, ...],
    series: str | tuple[str, ...],
    value: str | None,
    kind: str,
) -> dict[str, Any]:
    """One dataset per distinct ``series`` value, one point per distinct ``label`` (``value``
    None: the rows counted)."""
    labels = sorted({_key(r, label) for r in rows})
    sets: dict[str, list[float]] = {}
    for row in rows:
        values = sets.setdefault(_key(row, series), [0.0] * len(labels))
        values[labels.index(_key(row, label))] += 1.0 if value is None else _number(row.get(value, ""))
    datasets = [{"label": name, "data": data} for name, data in sorted(sets.items())]
    # one whole (the day's messages, its errors) in parts: stacked
    return {"id": chart, "title": title, "type": kind, "labels": labels, "datasets": datasets, "stacked": True}


def _columns(
    chart: str, title: str, rows: list[dict[str, str]], label: str | tuple[str, ...], values: Iterable[str], kind: str
) -> dict[str, Any]:
    """One dataset per column of ``values``, one point per row."""
    ordered = sorted(rows, key=lambda r: _key(r, label))
    return {
        "id": chart,
        "title": title,
        "type": kind,
        "labels": [_key(r, label) for r in ordered],
        "datasets": [{"label": v, "data": [_number(r.get(v, "")) for r in ordered]} for v in values],
    }


def renderer() -> str:
    """The chart-drawing script (package data beside this module)."""
    return (resources.files("rdss.analytics") / "static" / RENDERER).read_text(encoding="utf-8")


def render_html(report: dict[str, Any], *, title: str = "RDSS analytics report") -> str:
    """A self-contained page: Chart.js and the renderer inlined, the data as JSON, no request
    to anywhere (``default-src 'none'``), only those two scripts allowed to run."""
    import jinja2

    from rdss.host.resources import chart_js

    scripts = [chart_js().read_text(encoding="utf-8"), renderer()]
    style = (resources.files("rdss.analytics") / "static" / "report.css").read_text(encoding="utf-8")
    hashes = " ".join(f"'sha256-{_digest(s)}'" for s in scripts)
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("rdss.analytics", "templates"), autoescape=True, undefined=jinja2.StrictUndefined
    )
    return environment.get_template("report.html").render(
        title=title,
        policy=f"default-src 'none'; script-src {hashes}; style-src 'sha256-{_digest(style)}'; img-src data:",
        scripts=scripts,
        style=style,
        charts=charts(report),
        report=report,
    )


def _digest(text: str) -> str:
    return base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()
