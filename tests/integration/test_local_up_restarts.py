"""``rdss local up`` restarted: snapshots work after whatever the commands did (trace, vendor config,
tail, a demo on its endpoint), a restart replays without a warning, and the public port - in every
URL printed for it - stays the same for one state directory."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from rdss.local.emulator import Endpoint
from tests.conftest import EXAMPLES, ROOT

pytestmark = [pytest.mark.integration, pytest.mark.slow]

VALID = EXAMPLES / "valid" / "metadata-create-command.json"


def environment(tmp: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("AWS_", "RDSS_"))}
    return env | {
        "HOME": str(tmp / "home"),
        "XDG_STATE_HOME": str(tmp / "xdg"),
        "PYTHONPATH": str(ROOT),
        "COLUMNS": "200",
        "RDSS_LOG_FORMAT": "text",
        "POWERTOOLS_LOG_LEVEL": "WARNING",
    }


class LocalUp:
    """One ``rdss local up`` process, everything it printed, and its port."""

    def __init__(self, env: dict[str, str], *argv: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "rdss", "local", "up", "--env", "kept", *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            text=True,
        )
        self.lines: list[str] = []
        self.ready = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)
            if "Ctrl-C stops" in line:
                self.ready.set()

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def wait_ready(self) -> int:
        assert self.ready.wait(180), self.output
        found = re.search(r"endpoint\s+http://127\.0\.0\.1:(\d+)", self.output)
        assert found, self.output
        return int(found.group(1))

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(300)
        self._reader.join(10)
        return code

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(30)
        self._reader.join(10)


def rdss(env: dict[str, str], *argv: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rdss", *argv], env=env, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture
def embedded(endpoint: Endpoint) -> None:
    if not endpoint.embedded:
        pytest.skip("rdss local up always runs its own embedded emulator: run by the moto suite")


@pytest.mark.usefixtures("embedded")
def test_snapshots_work_after_any_command_and_restarts_replay_without_a_warning(tmp_path: Path) -> None:
    env = environment(tmp_path)
    state = tmp_path / "state"
    argv = ("--state", str(state), "--vendor", "acme:produces", "--compact-every", "40", "--log-level", "INFO")
    first = LocalUp(env, *argv)
    try:
        port = first.wait_ready()
        sent = rdss(env, "send", str(VALID))
        assert sent.returncode == 0, sent.stderr
        message_id = re.search(r"sent (\S+) to input", sent.stdout).group(1)  # type: ignore[union-attr]
        for command in (
            ("trace", message_id),
            ("vendor", "config", "acme"),
            ("tail", "metadata", "--from-start", "--count", "1", "--idle", "30"),
            ("redrive", "--dry-run"),
        ):
            done = rdss(env, *command)
            assert done.returncode == 0, (command, done.stdout, done.stderr)
        exports = {  # what local up prints to export (a demo on another endpoint signs with them)
            "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "eu-west-2",
        }
        demo = rdss(env | exports, "local", "demo", "--no-analytics")
        assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
        for _ in range(3):
            assert rdss(env, "send", str(VALID)).returncode == 0
    finally:
        assert first.stop() == 0, first.output
    said = first.output
    assert "could not snapshot" not in said, said
    snapshots = re.findall(r"state snapshot at request (\d+)", said)
    assert len(snapshots) >= 3, said  # the compactor's, then the clean stop's
    assert (state / "journal").stat().st_size == 0  # the clean stop's snapshot holds everything

    second = LocalUp(env, *argv)
    try:
        assert second.wait_ready() == port  # the vendor's URL still right
        recovered = next(line for line in second.lines if line.startswith("state"))
        assert re.search(rf"snapshot of {int(snapshots[-1]):,} requests, 0 replayed", recovered), recovered
        assert rdss(env, "send", str(VALID)).returncode == 0
        assert rdss(env, "trace", message_id).returncode == 0
    finally:
        second.kill()  # no snapshot: the next start replays the journal
    third = LocalUp(env, *argv)
    try:
        assert third.wait_ready() == port
        recovered = next(line for line in third.lines if line.startswith("state"))
        assert re.search(r"[1-9][\d,]* replayed from the journal", recovered), recovered
        assert "answered otherwise" not in recovered
    finally:
        assert third.stop() == 0, third.output
    for start in (second, third):
        assert not [line for line in start.lines if "WARNING" in line or "ERROR" in line], start.output


@pytest.mark.usefixtures("embedded")
def test_the_public_port_is_kept_for_its_state_directory(tmp_path: Path) -> None:
    env = environment(tmp_path)
    state = tmp_path / "state"
    first = LocalUp(env, "--state", str(state))
    try:
        port = first.wait_ready()
    finally:
        assert first.stop() == 0, first.output
    assert (state / "port").read_text().strip() == str(port)

    with socket.socket() as taken:  # another program holds it now
        taken.bind(("127.0.0.1", port))
        taken.listen()
        refused = rdss(env, "local", "up", "--env", "kept", "--state", str(state), timeout=120)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1, refused.stderr
    assert f"port {port}: Address already in use" in lines[0]
    assert f"kept in {state / 'port'}" in lines[0]

    again = LocalUp(env, "--state", str(state))
    try:
        assert again.wait_ready() == port
    finally:
        assert again.stop() == 0, again.output
    elsewhere = LocalUp(env, "--state", str(state), "--port", "0")  # asked for another: kept from now on
    try:
        moved = elsewhere.wait_ready()
    finally:
        assert elsewhere.stop() == 0, elsewhere.output
    assert (state / "port").read_text().strip() == str(moved)
