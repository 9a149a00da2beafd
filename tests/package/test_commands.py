"""Every ``rdss`` subcommand, run from the installed wheel as the docs show it, outside the checkout.

The offline commands (validate, new, split, join, tour, the benchmarks with short options) and
``rdss local demo --no-analytics`` run on their own; the commands that talk to a deployment run
against a ``rdss local up`` of the same venv, found through its state file alone (no ``--url``, no
exports). A command fails the test on a non-zero exit (unless the table says which exit and line
it must give, for the few that need what a plain install lacks) or on any traceback.
:func:`test_every_subcommand_is_run` keeps the table complete: a new subcommand must be added.
"""

from __future__ import annotations

import argparse
import http.cookiejar
import json
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from rdss.cli import build_parser
from tests.conftest import EXAMPLES
from tests.package.conftest import LocalRuntime, bare_environment, serve
from tests.support.oai_pmh_server import OaiPmhServer, Record

pytestmark = pytest.mark.slow

#: Those a plain install (no glue extra, no RabbitMQ, no checkout) cannot run, with the one line
#: that must say why (exit 2).
NEEDS_MORE = {
    ("bench", "glue"): "pip install 'rdss-messaging[glue]'",
    ("bench", "coldstart"): "run it from a checkout",
    ("bench", "amqp"): "no broker: pass --url or set RDSS_AMQP_URL",
    ("bench", "bridge"): "no broker: pass --url or set RDSS_AMQP_URL",
}


@dataclass
class Ran:
    argv: tuple[str, ...]
    code: int
    out: str
    err: str
    seconds: float


RAN: dict[tuple[str, ...], Ran] = {}


def leaves(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path
    for action in subs:
        for name, sub in action.choices.items():
            yield from leaves(sub, (*path, name))


def rdss(venv: Path, env: dict[str, str], cwd: Path, *argv: str, timeout: float = 120) -> Ran:
    started = time.monotonic()
    result = subprocess.run(
        [str(venv / "bin/rdss"), *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    ran = Ran(tuple(argv), result.returncode, result.stdout, result.stderr, time.monotonic() - started)
    RAN.setdefault(_command(argv), ran)
    assert "Traceback" not in result.stderr + result.stdout, (argv, result.stderr[-4000:])
    return ran


def _command(argv: tuple[str, ...]) -> tuple[str, ...]:
    """The subcommand ``argv`` runs: its first word, or two for a group's."""
    return tuple(argv[:2]) if argv[0] in {"local", "bench", "vendor", "adaptor", "analytics", "replay"} else argv[:1]


def ok(ran: Ran) -> Ran:
    assert ran.code == 0, (ran.argv, ran.out[-2000:], ran.err[-4000:])
    return ran


@pytest.fixture(scope="module")
def runtime(venv: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRuntime]:
    started = time.monotonic()
    for served in serve(venv, tmp_path_factory.mktemp("user"), "--vendor", "acme:produces"):
        RAN[("local", "up")] = Ran(("local", "up"), 0, "".join(served.output), "", time.monotonic() - started)
        yield served


def test_offline_commands(venv: Path, tmp_path: Path) -> None:
    env = bare_environment(tmp_path)
    valid = sorted(str(p) for p in (EXAMPLES / "valid").glob("*.json"))
    assert ok(rdss(venv, env, tmp_path, "validate", *valid)).out.count(": valid") == len(valid)
    made = ok(rdss(venv, env, tmp_path, "new", "MetadataCreate")).out
    (tmp_path / "create.json").write_text(made)
    ok(rdss(venv, env, tmp_path, "split", "create.json", "--out", "parts", "--limit", "1000"))
    parts = sorted(str(p) for p in (tmp_path / "parts").iterdir())
    assert len(parts) > 1
    joined = ok(rdss(venv, env, tmp_path, "join", *parts)).out
    assert json.loads(joined)["messageBody"] == json.loads(made)["messageBody"]
    assert "done" in ok(rdss(venv, env, tmp_path, "tour", "--messages", "1000")).out
    figures = json.loads(
        ok(rdss(venv, env, tmp_path, "bench", "validate", "--messages", "300", "--rounds", "1", "--json")).out
    )
    assert set(figures["versions"]) == {"3.0.2", "4.0.0"}
    assert figures["translation"]["up_per_s"] > 0
    assert figures["translation"]["down_per_s"] > 0
    up = ok(rdss(venv, env, tmp_path, "translate", "--to", "4.0.0", "--tenant-jisc-id", "7", "create.json")).out
    assert json.loads(up)["messageHeader"]["version"] == "4.0.0"
    assert json.loads(up)["messageHeader"]["messageId"] == json.loads(made)["messageHeader"]["messageId"]
    (tmp_path / "create-4.json").write_text(up)
    assert ok(rdss(venv, env, tmp_path, "validate", "--json", "create-4.json")).out.count('"version":"4.0.0"') == 1
    translated = json.loads(
        ok(rdss(venv, env, tmp_path, "bench", "translate", "--messages", "100", "--rounds", "1", "--json")).out
    )
    assert translated["up_per_s"] > 0


def test_benchmarks(venv: Path, tmp_path: Path) -> None:
    env = bare_environment(tmp_path)
    sent = json.loads(
        ok(rdss(venv, env, tmp_path, "bench", "send", "--messages", "100", "--shards", "1", "--json")).out
    )
    assert sent
    brokered = ok(rdss(venv, env, tmp_path, "bench", "broker", "--records", "100", "--batch", "100", "--json")).out
    assert json.loads(brokered)
    archived = json.loads(ok(rdss(venv, env, tmp_path, "bench", "archive", "--messages", "200", "--json")).out)
    assert archived
    bill = json.loads(ok(rdss(venv, env, tmp_path, "bench", "cost", "--env", "dev", "--rate", "1.16", "--json")).out)
    assert bill["total_usd_per_month"] > 0
    idle = json.loads(ok(rdss(venv, env, tmp_path, "bench", "idle", "--seconds", "2", "--json", timeout=180)).out)
    assert idle
    kept = json.loads(
        ok(
            rdss(venv, env, tmp_path, "bench", "state", "--puts", "60", "--compact-every", "20", "--json", timeout=300)
        ).out
    )
    assert kept["after"]["snapshot_ok"]
    for (group, name), says in NEEDS_MORE.items():
        ran = rdss(venv, env, tmp_path, group, name, "--json")
        assert ran.code == 2, (ran.argv, ran.out, ran.err)
        lines = ran.err.strip().splitlines()
        assert len(lines) == 1, ran.err
        assert says in lines[0], lines


def test_local_demo_accounts_for_every_input(venv: Path, tmp_path: Path) -> None:
    ran = ok(
        rdss(
            venv,
            bare_environment(tmp_path),
            tmp_path,
            "local",
            "demo",
            "--no-analytics",
            "--report",
            "r.json",
            timeout=300,
        )
    )
    report = json.loads((tmp_path / "r.json").read_text())
    assert len(report["inputs"]) > 20, ran.out
    assert report["channels"]["invalid"] > 0, report["channels"]  # the built-in workload's invalid messages
    assert report["analytics"] == {"skipped": "disabled"}


def test_commands_against_a_local_runtime(venv: Path, runtime: LocalRuntime, tmp_path: Path) -> None:
    env, cwd = runtime.env, tmp_path
    (cwd / "create.json").write_text(ok(rdss(venv, env, cwd, "new", "MetadataCreate")).out)
    message_id = json.loads((cwd / "create.json").read_text())["messageHeader"]["messageId"]
    ok(rdss(venv, env, cwd, "send", "create.json"))
    tailed = ok(rdss(venv, env, cwd, "tail", "metadata", "--from-start", "--count", "1", "--idle", "20")).out
    assert message_id in tailed
    (cwd / "read.json").write_text(ok(rdss(venv, env, cwd, "new", "MetadataRead", "--class", "Command")).out)
    unanswered = rdss(venv, env, cwd, "request", "read.json", "--timeout", "1")
    assert unanswered.code == 1, unanswered  # nobody answers reads on a bare runtime: a verdict
    assert "no reply" in unanswered.err
    refused = rdss(venv, env, cwd, "request", "create.json")
    assert refused.code == 2, refused
    assert "is not a request" in refused.err
    traced = ok(rdss(venv, env, cwd, "trace", message_id)).out
    assert "routed to metadata" in traced
    ok(rdss(venv, env, cwd, "redrive", "--dry-run"))
    since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 3600))
    start = ("replay", "start", "pkg", "--since", since, "--json")
    assert json.loads(ok(rdss(venv, env, cwd, *start, "--dry-run")).out)["status"] == "dry run"
    replayed = json.loads(ok(rdss(venv, env, cwd, *start)).out)  # Firehose may deliver more meanwhile
    assert (replayed["status"], replayed["sent"]) == ("done", replayed["selected"]), replayed
    assert ok(rdss(venv, env, cwd, "replay", "list")).out.startswith("pkg: done")
    assert json.loads(ok(rdss(venv, env, cwd, "replay", "status", "pkg", "--json")).out)["sent"] == replayed["sent"]
    assert ok(rdss(venv, env, cwd, "replay", "cancel", "pkg")).out.strip() == "replay pkg cancelled"
    state = json.loads(ok(rdss(venv, env, cwd, "status", "--json")).out)
    shown = console_page(venv, env, cwd)
    assert shown.count("data-channel=") == len(state["channels"])
    assert {c["channel"]: c["lastDay"] for c in state["channels"]}["input"] >= 1
    assert state["vendors"]["acme"]["produces"] == ["input"]
    assert "RDSS_GATEWAY_URL" in ok(rdss(venv, env, cwd, "vendor", "config", "acme")).out
    ok(rdss(venv, env, cwd, "archive", "--to", "archive", "--idle", "3", "--count", "1"))
    assert any(p.is_file() for p in (cwd / "archive").rglob("*"))
    ok(
        rdss(
            venv,
            env,
            cwd,
            "bridge",
            "--to",
            "memory://elsewhere",
            "--channel",
            "metadata",
            "--count",
            "1",
            "--idle",
            "5",
        )
    )
    server = OaiPmhServer(
        [Record("oai:r:1", "2026-01-02T00:00:00Z", {"title": ["Sediment cores"], "type": ["Dataset"]})]
    )
    try:
        harvested = ok(rdss(venv, env, cwd, "adaptor", "oai-pmh", server.url, "--once", "--state", "harvest.json"))
    finally:
        server.stop()
    assert harvested


def console_page(venv: Path, env: dict[str, str], cwd: Path) -> str:
    """``rdss console``: the overview through the printed URL (its token), and Chart.js from the
    wheel; the server stopped after."""
    started = time.monotonic()
    server = subprocess.Popen(
        [str(venv / "bin/rdss"), "console"], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        said = [server.stdout.readline() for _ in range(2)]
        url = said[1].strip()
        assert url.startswith("http://127.0.0.1:"), said
        assert "/?token=" in url, said
        browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
        with browser.open(url, timeout=120) as response:
            page = response.read().decode()
        with browser.open(url.partition("?")[0] + "static/vendor/chart.umd.min.js", timeout=60) as response:
            assert b"Chart" in response.read()
    finally:
        server.terminate()
        _, err = server.communicate(timeout=30)
    assert "Traceback" not in err, err[-4000:]
    RAN[("console",)] = Ran(("console",), 0, page[:200], err, time.monotonic() - started)
    return page


def test_the_analytics_report_file(venv: Path, tmp_path: Path) -> None:
    """``rdss analytics report`` over a report job's output (its layout: summary.json, csv/<table>/):
    one file, Chart.js inlined from the wheel."""
    report = tmp_path / "report"
    (report / "csv" / "volume").mkdir(parents=True)
    summary = {
        "period": {"first": "2026-11-01", "last": "2026-11-01"},
        "received": 3,
        "messages": 3,
        "rejects": {"total": 0, "byReason": {}},
        "duplicates": {"records": 0, "rate": 0.0},
        "volume": {},
        "errors": {},
        "incompleteSequences": 0,
        "latencySeconds": {"p50": 1.0, "p90": 1.0, "p99": 1.0, "max": 1.0},
    }
    (report / "summary.json").write_text(json.dumps(summary))
    (report / "csv" / "volume" / "part-00000.csv").write_text(
        "dt,messageType,messageClass,generator,messages\n2026-11-01,MetadataCreate,Event,<b>x</b>,3\n"
    )
    env = bare_environment(tmp_path)
    ok(rdss(venv, env, tmp_path, "analytics", "report", "report", "--html", "report.html"))
    html = (tmp_path / "report.html").read_text()
    assert "Chart.js v4" in html  # inlined from the wheel's copy
    assert "&lt;b&gt;x&lt;/b&gt;" in html
    assert "<b>x</b>" not in html  # the generator is text in the table, \u003c-escaped in the chart data


def test_every_subcommand_is_run() -> None:
    """Last in the module: every leaf of the parser ran above (or is a NEEDS_MORE one, checked)."""
    expected = set(leaves(build_parser()))
    assert expected - set(RAN) == set(), sorted(expected - set(RAN))
