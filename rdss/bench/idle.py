"""``rdss bench idle``: what ``rdss local up`` costs while nothing happens.

Starts the real command (``python -m rdss local up``, its own state directory in a temporary
directory), waits for its banner, lets it settle, then reads the process's CPU time (user +
system, all its threads) from ``/proc`` at the start and end of the measured window. The figure
is per cent of one core; the target is below 2 %.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rdss.bench.figures import Measured

TARGET_PERCENT = 2.0


@dataclass(frozen=True)
class Figures(Measured):
    seconds: float
    cpu_seconds: float
    settle_seconds: float

    @property
    def percent_of_one_core(self) -> float:
        return 100 * self.cpu_seconds / self.seconds

    def as_dict(self) -> dict[str, Any]:
        return {**super().as_dict(), "target_percent": TARGET_PERCENT}


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far, all threads (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(seconds: float = 30.0, *, settle: float = 5.0, startup_timeout: float = 180.0) -> Figures:
    """Measure ``rdss local up`` idle for ``seconds``, after ``settle`` seconds of quiet.

    Raises:
        RuntimeError: no ``/proc`` here, or the command did not start.
    """
    if not Path(f"/proc/{os.getpid()}/stat").exists():
        raise RuntimeError("this benchmark reads /proc (Linux)")
    with tempfile.TemporaryDirectory(prefix="rdss-bench-idle-") as state:
        env = {**os.environ, "COLUMNS": "200", "RDSS_LOG_FORMAT": "text"}
        env.pop("AWS_ENDPOINT_URL", None)
        process = subprocess.Popen(
            [sys.executable, "-m", "rdss", "local", "up", "--env", "idle", "--state", state],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            text=True,
        )
        ready, lines = threading.Event(), []

        def read() -> None:
            assert process.stdout is not None
            for line in process.stdout:  # to the end: a full pipe would block the process
                lines.append(line)
                if "Ctrl-C stops" in line:
                    ready.set()

        threading.Thread(target=read, daemon=True).start()
        try:
            if not ready.wait(startup_timeout):
                raise RuntimeError("rdss local up did not start:\n" + "".join(lines[-20:]))
            time.sleep(settle)
            started, used = time.monotonic(), cpu_seconds(process.pid)
            time.sleep(seconds)
            elapsed, used = time.monotonic() - started, cpu_seconds(process.pid) - used
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(120)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    return Figures(elapsed, used, settle)
