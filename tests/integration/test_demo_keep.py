"""``rdss local demo --keep`` leaves its deployment behind, archives and all, and the trace command
it prints works after it ends: on this machine once ``rdss local up`` serves the kept state again
(a real process, as a user starts it), on an endpoint someone else runs by its URL."""

from __future__ import annotations

import copy
import os
import shlex
import sys
from pathlib import Path

import orjson
import pytest

from rdss.cli import main
from rdss.local import KEPT_DEMO_ENVIRONMENT
from rdss.local.emulator import connect
from rdss.local.runtime import Runtime, Settings
from rdss.model.workload import Workload
from tests.support.localup import serving

pytestmark = pytest.mark.integration


def _messages(directory: Path) -> str:
    """A valid message and a broken copy of it; the valid one's messageId."""
    message = Workload(17).message("MetadataCreate", "Event")
    broken = copy.deepcopy(message)
    del broken["messageBody"]["objectTitle"]
    directory.mkdir()
    (directory / "1-valid.json").write_bytes(orjson.dumps(message))
    (directory / "2-broken.json").write_bytes(orjson.dumps(broken))
    return str(message["messageHeader"]["messageId"])


def _trace(command: str, capsys: pytest.CaptureFixture[str]) -> str:
    argv = shlex.split(command)
    assert argv[:2] == ["rdss", "trace"], argv
    capsys.readouterr()
    assert main(argv[1:]) == 0
    out: str = capsys.readouterr().out
    return out


def test_a_kept_demo_is_traced_after_it_ends(tmp_path: Path, monkeypatch, capsys):
    message_id = _messages(tmp_path / "messages")
    report = tmp_path / "report.json"
    argv = ["local", "demo", "--messages", str(tmp_path / "messages"), "--report", str(report), "--no-analytics"]
    if os.environ.get("AWS_ENDPOINT_URL"):  # LocalStack or an account: the deployment is left there
        assert main([*argv, "--keep"]) == 0
        body = orjson.loads(report.read_bytes())
        environment = body["kept"]["url"].removeprefix("kinesis://").split("?")[0]
        try:
            assert body["trace"]["command"] == f"rdss trace {message_id} --url {shlex.quote(body['kept']['url'])}"
            out = _trace(body["trace"]["command"], capsys)
        finally:
            endpoint = connect()
            Runtime(endpoint, Settings(environment=environment)).deprovision()
        assert out.splitlines()[-1] == "where it went: routed to metadata; 1 record(s) moved to invalid (GENERR001)"
        return
    state = tmp_path / "kept"
    assert main([*argv, "--keep", "--state", str(state)]) == 0
    body = orjson.loads(report.read_bytes())
    serve = f"rdss local up --env {KEPT_DEMO_ENVIRONMENT} --state {state}"
    assert body["kept"] == {"state": str(state), "serve": serve}
    assert body["trace"]["command"] == f"rdss trace {message_id}"
    printed = capsys.readouterr().out
    assert f"Kept in {state}: {serve} serves it again" in " ".join(printed.split())
    # the demo has ended, its emulator with it: serve the kept state as the summary says
    home = tmp_path / "xdg"
    env = {**os.environ, "XDG_STATE_HOME": str(home), "RDSS_LOG_FORMAT": "text", "COLUMNS": "200"}
    env.pop("AWS_ENDPOINT_URL", None)
    monkeypatch.setenv("XDG_STATE_HOME", str(home))  # where rdss trace finds the runtime that serves
    with serving([sys.executable, "-m", "rdss", *shlex.split(serve)[1:]], env):
        out = _trace(body["trace"]["command"], capsys)
    lines = out.splitlines()
    assert lines[-1] == "where it went: routed to metadata; 1 record(s) moved to invalid (GENERR001)"
    assert any("archived in s3://rdss-demo-audit/" in line for line in lines), out  # the archives were kept


def test_a_demo_not_kept_leaves_nothing_and_no_command(tmp_path: Path, capsys):
    _messages(tmp_path / "messages")
    report = tmp_path / "report.json"
    argv = ["local", "demo", "--messages", str(tmp_path / "messages"), "--report", str(report), "--no-analytics"]
    assert main(argv) == 0
    body = orjson.loads(report.read_bytes())
    assert "kept" not in body
    assert "command" not in body["trace"]  # no command would work: the deployment is gone
    assert "with --keep the deployment stays" in capsys.readouterr().out


def test_state_without_keep_is_a_usage_error(tmp_path: Path, capsys):
    assert main(["local", "demo", "--state", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == (
        "rdss local: --state says where --keep keeps the deployment: give --keep too"
    )
