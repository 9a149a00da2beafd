"""``make test``'s pytest half: the suites run side by side, each in its own process and log.

The machine has two cores and several suites mostly wait (on moto, LocalStack, RabbitMQ,
subprocesses), so up to ``--jobs`` of them run at once, the longest first. Each suite's log
goes to ``build/test-logs/<suite>.log``; a suite that fails has its log's tail printed. The
closing lines give each suite's wall time, every skipped test with its reason, and one
``N passed, N failed, N skipped`` line for the whole run.

    python -m tests.support.suites [--jobs N] [SUITE ...]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LOGS = ROOT / "build" / "test-logs"
PYTHON = sys.executable
#: ``--durations=15``: each log names its slowest tests, where the time of a slow run went.
#: ``-rfEs``: the short summary names each failed, erroring and skipped test with its reason,
#: which the closing lines gather (a CI record may keep only the end of the output).
PYTEST = [PYTHON, "-m", "pytest", "-p", "no:cacheprovider", "-rfEs", "-q", "--durations=15"]
#: Wide lines: pytest cuts each summary line to the terminal's width, 80 columns in a log
ENVIRONMENT = {**os.environ, "COLUMNS": "240"}
#: What one suite adds. The Glue suite's Spark driver runs seconds-long jobs on small data: its
#: JIT stops at the first tier, whose compiling costs less than it saves there (measured on
#: tests/glue/test_audit_compaction.py: 44 s of machine CPU, not 53).
SUITE_ENVIRONMENT = {"glue": {"JAVA_TOOL_OPTIONS": "-XX:TieredStopAtLevel=1"}}


@dataclass
class Suite:
    name: str
    command: list[str]
    started: float = 0.0
    seconds: float = 0.0
    #: CPU seconds (user and system) of the suite's process and every process it waited for
    cpu: float = 0.0
    process: subprocess.Popen[bytes] | None = None
    counts: dict[str, int] = field(default_factory=dict)
    #: the log's lines, read once the suite has ended
    lines: list[str] = field(default_factory=list)

    @property
    def log(self) -> Path:
        return LOGS / f"{self.name}.log"


#: Longest first: the LocalStack run (most of it waiting on LocalStack) and the moto one.
#: ``--dist loadscope``: a module's tests on one worker, so a module-scoped fixture (trace's
#: messages sent once, a minute on LocalStack) is built once, not once per worker.
SUITES = {
    "localstack": [
        PYTHON,
        "-m",
        "tests.support.localstack",
        "run",
        "--",
        *PYTEST,
        "-n",
        "3",
        "--dist",
        "loadscope",
        "tests/integration",
    ],
    # two workers: most of its time is spent waiting on the emulator and on subprocesses, and
    # alone it was the longest suite (24 minutes of a 24-minute run, with 9 of CPU)
    "integration": [*PYTEST, "-n", "2", "--dist", "loadscope", "tests/integration"],
    "glue": [*PYTEST, "tests/glue", "tests/analytics"],
    # the classifier against the reference validators on 10,000s of mutants: minutes of the
    # reference's CPU, so a suite of its own, outside `make check`'s quick loop
    "fuzz": [*PYTEST, "tests/fuzz"],
    "amqp": [*PYTEST, "tests/amqp"],
    # rdss console in Debian's headless Chromium (make chromium), on one local runtime
    "console": [*PYTEST, "tests/console"],
    "cdk": [*PYTEST, "tests/cdk"],
    "package": [*PYTEST, "tests/package"],
    # two workers: in `make check` the unit suite is the long pole beside the CDK suite, and
    # one process left a core idle once the CDK suite had ended
    "unit": [*PYTEST, "-n", "2", "tests/unit"],
}

_COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed|deselected)")


def _summary(log: str) -> dict[str, int]:
    lines = [line for line in log.splitlines() if re.search(r"\d+ (passed|failed|error)", line)]
    if not lines:
        return {}
    counts: dict[str, int] = {}
    for number, kind in _COUNT.findall(lines[-1]):
        counts["error" if kind.startswith("error") else kind] = int(number)
    return counts


def run(names: list[str], jobs: int) -> int:
    LOGS.mkdir(parents=True, exist_ok=True)
    pending = [Suite(name, SUITES[name]) for name in names]
    running: list[Suite] = []
    done: list[Suite] = []
    began = time.monotonic()
    while pending or running:
        while pending and len(running) < jobs:
            suite = pending.pop(0)
            suite.started = time.monotonic()
            with suite.log.open("wb") as log:
                suite.process = subprocess.Popen(
                    suite.command,
                    cwd=ROOT,
                    env=ENVIRONMENT | SUITE_ENVIRONMENT.get(suite.name, {}),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            print(f"[{time.monotonic() - began:6.0f} s] {suite.name}: started", flush=True)
            running.append(suite)
        time.sleep(1)
        for suite in [s for s in running if s.process is not None and _ended(s)]:
            running.remove(suite)
            done.append(suite)
            suite.seconds = time.monotonic() - suite.started
            text = suite.log.read_text(errors="replace")
            suite.lines = text.splitlines()
            suite.counts = _summary(text)
            code = suite.process.returncode if suite.process else 1
            verdict = "passed" if code == 0 else f"FAILED (exit {code})"
            print(
                f"[{time.monotonic() - began:6.0f} s] {suite.name}: {verdict} in {suite.seconds:.0f} s {suite.counts}"
            )
            if code != 0:
                print(f"---- {suite.log} (tail) ----\n" + "\n".join(suite.lines[-60:]), flush=True)

    print("\nsuites (wall time each, they overlap; CPU time each, which the cores share):")
    for suite in done:
        print(f"  {suite.name:<12} {suite.seconds:6.0f} s  {suite.cpu:6.0f} s CPU  {suite.counts}")
    print(f"  {'all':<12} {time.monotonic() - began:6.0f} s  {sum(s.cpu for s in done):6.0f} s CPU")
    skipped = [
        f"  [{suite.name}] {line.removeprefix('SKIPPED ')}"
        for suite in done
        for line in suite.lines
        if line.startswith("SKIPPED ")
    ]
    if skipped:
        print("skipped, and why:\n" + "\n".join(skipped))
    unmodelled = sorted(
        {
            f"  [{suite.name}] {line.split('UserWarning: ', 1)[1]}"
            for suite in done
            for line in suite.lines
            if "UserWarning: " in line and "does not model" in line
        }
    )
    if unmodelled:
        print("what an endpoint does not model (checked where it does):\n" + "\n".join(unmodelled))
    broken = [
        f"  [{suite.name}] {line}" for suite in done for line in suite.lines if line.startswith(("FAILED ", "ERROR "))
    ]
    if broken:
        print("failed, and why:\n" + "\n".join(broken))
    failures = [s for s in done if s.process is None or s.process.returncode != 0]
    total = {kind: sum(s.counts.get(kind, 0) for s in done) for kind in ("passed", "failed", "skipped", "error")}
    failed = total["failed"] + total["error"]
    if failures and not failed:
        failed = len(failures)  # a suite that died before pytest counted anything
    print(f"{total['passed']} passed, {failed} failed, {total['skipped']} skipped")
    return 1 if failures else 0


def _ended(suite: Suite) -> bool:
    """Whether the suite's process has ended; if so its exit code and CPU time are recorded
    (``wait4``: the rusage of the process and of the processes it waited for - pytest's
    workers, LocalStack, Spark's JVM)."""
    assert suite.process is not None
    pid, status, usage = os.wait4(suite.process.pid, os.WNOHANG)
    if pid == 0:
        return False
    suite.process.returncode = os.waitstatus_to_exitcode(status)
    suite.cpu = usage.ru_utime + usage.ru_stime
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description="Run the test suites side by side.")
    parser.add_argument("suites", nargs="*", metavar="SUITE", help=f"default: all ({', '.join(SUITES)})")
    parser.add_argument("--jobs", type=int, default=3, help="suites at once (default 3)")
    args = parser.parse_args()
    unknown = set(args.suites) - set(SUITES)
    if unknown:
        parser.error(f"unknown suite(s) {sorted(unknown)}: choose from {', '.join(SUITES)}")
    covered = {part for command in SUITES.values() for part in command if part.startswith("tests/")}
    forgotten = sorted(
        str(d.relative_to(ROOT)) for d in (ROOT / "tests").iterdir() if d.is_dir() and any(d.glob("test_*.py"))
    )
    forgotten = [d for d in forgotten if d not in covered]
    if forgotten:
        parser.error(f"test folders no suite runs: {forgotten} (add them to SUITES in {Path(__file__).name})")
    return run(args.suites or list(SUITES), args.jobs)


if __name__ == "__main__":
    sys.exit(main())
