"""``rdss local up`` leaves its state file, and every command that talks to a deployment finds the
local runtime through it: no ``--url``, no ``RDSS_GATEWAY_URL``, no ``AWS_*`` exports, no
credentials file. Once it stops, the file is gone and the commands say that none is named. Two
runtimes keep to themselves: each its own file, and ``--local`` picks one."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rdss.local.emulator import Endpoint
from tests.conftest import EXAMPLES, ROOT
from tests.support.localup import serving

pytestmark = pytest.mark.integration

VALID = EXAMPLES / "valid" / "metadata-create-command.json"


def bare_environment(tmp: Path) -> dict[str, str]:
    """What a new user's shell has: no AWS_* variable, no gateway URL, a home of its own."""
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "XDG_STATE_HOME": str(tmp / "state"),
        "PYTHONPATH": str(ROOT),
        "POWERTOOLS_LOG_LEVEL": "WARNING",
        "POWERTOOLS_METRICS_DISABLED": "true",
        "RDSS_LOG_FORMAT": "text",
        "RDSS_LOG_LEVEL": "WARNING",
        "COLUMNS": "200",
    }


def rdss(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rdss", *argv], env=env, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.fixture
def local_up(endpoint: Endpoint, tmp_path: Path) -> Iterator[tuple[dict[str, str], Path]]:
    if not endpoint.embedded:
        pytest.skip("`rdss local up` always starts its own embedded moto: run by the moto suite, not per endpoint")
    env = bare_environment(tmp_path)
    running = tmp_path / "state" / "rdss" / "running"
    with serving([sys.executable, "-m", "rdss", "local", "up", "--vendor", "acme:produces"], env):
        (state,) = running.glob("*.json")
        yield env, state
    assert not state.exists(), "the state file outlived its runtime"


def test_the_commands_find_the_local_runtime_without_exports(local_up: tuple[dict[str, str], Path]) -> None:
    env, state = local_up
    recorded = json.loads(state.read_text())
    assert recorded["url"].startswith("kinesis://local?endpoint=http://127.0.0.1:")
    assert recorded["pid"] > 0
    assert state.stat().st_mode & 0o077 == 0  # credentials, dummies as they are: this user's only

    sent = rdss(env, "send", str(VALID))
    assert sent.returncode == 0, sent.stderr
    message_id = re.search(r"sent (\S+) to input", sent.stdout).group(1)  # type: ignore[union-attr]

    config = rdss(env, "vendor", "config", "acme", "--json")
    assert config.returncode == 0, config.stderr
    vendor = json.loads(config.stdout)
    assert f"endpoint={recorded['endpoint']}" in vendor["url"]
    assert vendor["writes"] == {"input": "rdss-local-input"}

    redrive = rdss(env, "redrive", "--dry-run")
    assert redrive.returncode == 0, redrive.stderr

    tail = rdss(env, "tail", "input", "--from-start", "--count", "1", "--idle", "20")
    assert tail.returncode == 0, tail.stderr
    assert message_id in tail.stdout

    trace = rdss(env, "trace", message_id)
    assert trace.returncode == 0, trace.stdout + trace.stderr
    assert message_id in trace.stdout

    sdk = (
        "from rdss.gateway import Gateway\n"
        "from rdss.model.messages import new_message\n"
        "with Gateway(application='sdk') as gateway:\n"
        "    print(gateway.url.raw)\n"
        "    gateway.send(new_message('MetadataDelete', {'objectUuid': '5fd3b1e4-6f5a-4d5e-9c1b-7c2a0d9e8b11'}))\n"
    )
    done = subprocess.run([sys.executable, "-c", sdk], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == recorded["url"]


def test_with_the_runtime_stopped_the_commands_say_none_is_named(tmp_path: Path) -> None:
    env = bare_environment(tmp_path)
    # what a runtime killed with SIGKILL leaves: its process is gone, so the file is stale
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    state = tmp_path / "state" / "rdss" / "running" / f"{int(dead.stdout)}.json"
    state.parent.mkdir(parents=True, mode=0o700)
    url = "kinesis://local?endpoint=http://127.0.0.1:9&region=eu-west-2"
    state.write_text(
        json.dumps(
            {
                "url": url,
                "environment": "local",
                "prefix": "rdss",
                "endpoint": "http://127.0.0.1:9",
                "region": "eu-west-2",
                "credentials": {},
                "pid": int(dead.stdout),
            }
        )
    )
    for argv in (("send", str(VALID)), ("redrive", "--dry-run"), ("vendor", "config", "acme"), ("trace", "x")):
        done = rdss(env, *argv)
        assert done.returncode == 2, (argv, done.stderr)
        assert "no deployment named" in done.stderr, (argv, done.stderr)
        assert "Traceback" not in done.stderr


def test_two_runtimes_keep_to_themselves(endpoint: Endpoint, tmp_path: Path) -> None:
    """Each has its own state file; stopping one leaves the other found; among the two, a command
    says which it uses, and --local picks either by deployment or by state directory."""
    if not endpoint.embedded:
        pytest.skip("`rdss local up` always starts its own embedded moto: run by the moto suite, not per endpoint")
    env = bare_environment(tmp_path)
    running = tmp_path / "state" / "rdss" / "running"
    up = [sys.executable, "-m", "rdss", "local", "up"]
    with serving([*up, "--env", "one", "--state", str(tmp_path / "one")], env):
        with serving([*up, "--env", "two", "--state", str(tmp_path / "two")], env) as second:
            assert len(list(running.glob("*.json"))) == 2
            assert any("--local two" in line for line in second)  # its banner says how to pick it
            both = rdss(env, "redrive", "--dry-run")
            assert both.returncode == 0, both.stderr
            assert "2 local runtimes are running; using the one started last, deployment two" in both.stderr
            sent = rdss(env, "send", str(VALID), "--local", "one")
            assert sent.returncode == 0, sent.stderr
            assert "running" not in sent.stderr  # picked: nothing to say
            message_id = re.search(r"sent (\S+) to input", sent.stdout).group(1)  # type: ignore[union-attr]
            tail = ["tail", "input", "--from-start", "--count", "1"]
            found = rdss(env, *tail, "--idle", "20", "--local", str(tmp_path / "one"))
            assert message_id in found.stdout, found.stdout + found.stderr
            elsewhere = rdss(env, *tail, "--idle", "3", "--local", "two")
            assert message_id not in elsewhere.stdout
            wrong = rdss(env, "send", str(VALID), "--local", "three")
            assert wrong.returncode == 2
            lines = wrong.stderr.strip().splitlines()
            assert len(lines) == 1, wrong.stderr
            assert "no running local runtime has deployment or state 'three'" in lines[0]
        # the second stopped: its file went, the first's stays and is found alone, without a word
        (left,) = running.glob("*.json")
        assert json.loads(left.read_text())["environment"] == "one"
        sent = rdss(env, "send", str(VALID))
        assert sent.returncode == 0, sent.stderr
        assert "running" not in sent.stderr
