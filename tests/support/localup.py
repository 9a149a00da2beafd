"""``rdss local up`` as a test starts it: a child process whose output is read to the end (a pipe
nobody reads fills up and blocks its next write), waited for until it serves, stopped with
SIGTERM - it must exit 0."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path

#: What ``rdss local up`` prints once it takes connections.
READY = "Ctrl-C stops"


@contextlib.contextmanager
def serving(
    argv: list[str], env: Mapping[str, str], *, cwd: Path | None = None, ready: float = 90, stop: float = 180
) -> Iterator[list[str]]:
    """Run ``argv`` (an ``rdss local up`` command line); yield its output lines so far (the list
    grows as it prints) once it serves."""
    process = subprocess.Popen(
        argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=dict(env), text=True
    )
    lines: list[str] = []
    served = threading.Event()

    def read_output() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            if READY in line:
                served.set()

    reader = threading.Thread(target=read_output, daemon=True)
    reader.start()
    try:
        assert served.wait(ready), "".join(lines)
        yield lines
    finally:
        process.send_signal(signal.SIGTERM)
        # stopping drains the pumps and the embedded server: slow when the machine is loaded
        assert process.wait(timeout=stop) == 0, "".join(lines)
        reader.join(10)
