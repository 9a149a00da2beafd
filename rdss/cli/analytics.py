"""``rdss analytics report``: the analytics report job's output as one HTML file with charts."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rdss.cli.common import CommandError, describe_os_error, file_name
from rdss.cli.options import add_command, add_group


def register(commands: Any) -> None:
    """The analytics report job's output (its summary and tables) for analysts: `rdss analytics report DIR
    --html OUT` renders it as one self-contained HTML file with charts."""
    verbs = add_group(
        commands, "analytics", register, help="the analytics report's output, with pictures", metavar="VERB"
    )
    report = add_command(verbs, "report", run_report, help="render a report job's output as a self-contained HTML file")
    report.add_argument(
        "directory", type=file_name, metavar="DIR", help="the report job's output: summary.json and csv/<table>/"
    )
    report.add_argument("--html", type=file_name, required=True, metavar="OUT", help="the HTML file to write")


def run_report(args: argparse.Namespace) -> int:
    """Writes the report job's tables (volume, error rates, duplicates, latency, incomplete
    sequences) and summary as one HTML file with charts: Chart.js inlined, no request to anywhere,
    readable from file:// by an analyst who never starts the console. Every value from the report
    is shown as text."""
    from rdss.analytics.report import read_report, render_html

    directory = Path(args.directory)
    try:
        report = read_report(directory)
    except FileNotFoundError as error:
        raise CommandError(f"{args.directory}: no summary.json (give the report job's output directory)") from error
    except OSError as error:
        raise CommandError(describe_os_error(error)) from error
    out = Path(args.html)
    try:
        out.write_text(render_html(report), encoding="utf-8")
    except OSError as error:
        raise CommandError(describe_os_error(error)) from error
    print(f"report written to {out}")
    return 0
