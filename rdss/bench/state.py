"""``rdss bench state``: what the local runtime's state costs a writer, before and after an
``rdss trace``.

An embedded emulator keeps its journal in a temporary state directory, as ``rdss local up`` does,
snapshotting every ``compact_every`` requests. One phase puts ``puts`` records, one PutRecord at a
time over HTTP (a producer's latency: applied, journalled, synced, answered), then takes a
snapshot and times it. Then ``rdss trace`` runs against it (the real command, in its own process:
it reads streams, tables, buckets and the functions' configurations, which leaves moto state a
snapshot must carry), and the same phase runs again. A snapshot that cannot be taken is counted,
not fatal: its journal keeps everything.
"""

from __future__ import annotations

import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rdss.bench.figures import Measured
from rdss.deployment.topology import Deployment


@dataclass(frozen=True)
class Phase:
    """One round of puts and the snapshot after it."""

    puts: int
    p50_ms: float
    p99_ms: float
    max_ms: float
    #: Snapshots the compactor took during the puts, and the snapshots that failed.
    snapshots: int
    failures: int
    #: The snapshot after the puts: seconds in all, seconds writers waited, bytes (0 when it failed).
    snapshot_seconds: float
    snapshot_paused: float
    snapshot_bytes: int
    snapshot_ok: bool


@dataclass(frozen=True)
class Figures(Measured):
    puts: int
    compact_every: int
    before: Phase
    after: Phase
    trace_seconds: float


class _Errors(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1


def run(puts: int = 1000, *, compact_every: int = 250) -> Figures:
    """Measure ``puts`` PutRecord calls and a snapshot, before and after an ``rdss trace``."""
    from rdss.local.emulator import Emulator, provision
    from rdss.local.state import StateDirectory

    deployment = Deployment(f"bench{uuid.uuid4().hex[:6]}")
    errors = _Errors()
    durable = logging.getLogger("rdss.local.durable")
    level = durable.level
    durable.setLevel(min(durable.getEffectiveLevel(), logging.ERROR))  # its failures reach the count
    durable.addHandler(errors)
    with tempfile.TemporaryDirectory(prefix="rdss-bench-state-") as directory:
        state = StateDirectory(Path(directory) / "state")
        emulator = Emulator(state=state, compact_every=compact_every)
        try:
            emulator.recover()
            endpoint = emulator.open()
            provision(endpoint, deployment, shards=1)
            kinesis = endpoint.client("kinesis")
            before = _phase(emulator, kinesis, deployment, puts, errors)
            started = time.monotonic()
            _trace(endpoint, deployment)
            trace_seconds = time.monotonic() - started
            after = _phase(emulator, kinesis, deployment, puts, errors)
        finally:
            emulator.stop(snapshot=False)
            state.close()
            durable.removeHandler(errors)
            durable.setLevel(level)
    return Figures(puts, compact_every, before, after, trace_seconds)


def _phase(emulator: Any, kinesis: Any, deployment: Deployment, puts: int, errors: _Errors) -> Phase:
    app = emulator.app
    stream = deployment.stream("input")
    snapshots, failures = app.snapshots, errors.count
    latencies = []
    for index in range(puts):
        started = time.perf_counter()
        kinesis.put_record(StreamName=stream, Data=b"x" * 3600, PartitionKey=f"k{index}")
        latencies.append(time.perf_counter() - started)
    time.sleep(0.2)  # a snapshot the last put asked for, done
    taken, failed = app.snapshots - snapshots, errors.count - failures
    kinesis.put_record(StreamName=stream, Data=b"x", PartitionKey="last")  # so that the snapshot has work
    started = time.monotonic()
    try:
        app.compact()
        ok = True
    except Exception:  # counted, as the compactor counts it: the journal keeps everything
        ok = False
    seconds = time.monotonic() - started
    last = getattr(app, "last_snapshot", None)
    quantiles = statistics.quantiles(latencies, n=100)
    return Phase(
        puts=puts,
        p50_ms=1000 * statistics.median(latencies),
        p99_ms=1000 * quantiles[98],
        max_ms=1000 * max(latencies),
        snapshots=taken,
        failures=failed,
        snapshot_seconds=seconds,
        snapshot_paused=last.paused if ok and last is not None else 0.0,
        snapshot_bytes=last.size if ok and last is not None else 0,
        snapshot_ok=ok,
    )


def _trace(endpoint: Any, deployment: Deployment) -> None:
    """``rdss trace`` of a message nobody sent, against the emulator: what it reads, it reads."""
    url = f"kinesis://{deployment.environment}?endpoint={endpoint.url}&region={endpoint.region}"
    env = {**os.environ, **endpoint.environment(), "RDSS_GATEWAY_URL": url}
    subprocess.run(
        [sys.executable, "-m", "rdss", "trace", str(uuid.uuid4())],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
