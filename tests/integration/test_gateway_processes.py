"""Consumers in separate processes against the emulator: a crash before a checkpoint loses
nothing and delivers nothing twice; a worker killed while holding leases is taken over.

Workers are ``python -m tests.support.gateway_worker`` processes; the embedded emulator runs in
this process on a loopback port and the workers reach it over HTTP like any client. Crashes are
SIGKILL: no clean-up runs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from rdss.model.workload import Workload
from tests.support.gateway_system import process_environment
from tests.support.system import System

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def start_worker(system: System, output: Path, *args: str) -> subprocess.Popen[str]:
    command = [
        sys.executable,
        "-m",
        "tests.support.gateway_worker",
        f"kinesis://{system.deployment.environment}",
        "metadata",
        str(output),
        *args,
    ]
    return subprocess.Popen(
        command, cwd=ROOT, env=process_environment(system), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def finish(worker: subprocess.Popen[str], timeout: float = 60) -> tuple[int, dict[str, Any] | None, str]:
    if "AWS_ENDPOINT_URL" in os.environ:  # LocalStack or an account: leases and reads take longer than moto's
        timeout *= 3
    out, err = worker.communicate(timeout=timeout)
    lines = [line for line in out.splitlines() if line.startswith("{")]
    return worker.returncode, (json.loads(lines[-1]) if lines else None), err


def wait_for(condition: Callable[[], bool], timeout: float = 30, what: str = "condition") -> None:
    if "AWS_ENDPOINT_URL" in os.environ:  # LocalStack or an account: every call takes longer than moto's
        timeout *= 3
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def publish(system: System, messages: list[dict[str, Any]]) -> list[str]:
    system.publish([orjson.dumps(m) for m in messages], channel="metadata")
    return [m["messageHeader"]["messageId"] for m in messages]


def lease_owners(system: System) -> dict[str, str | None]:
    items = system.client("dynamodb").scan(TableName=system.deployment.table("checkpoints"), ConsistentRead=True)
    return {i["shardId"]["S"]: i.get("leaseOwner", {}).get("S") for i in items["Items"]}


def idle(system: System) -> str:
    """How long a worker waits on empty reads before it decides its shards are drained.

    moto answers every GetRecords with all it has. Kinesis (and LocalStack) may return an
    empty page while records lie further on, and take longer to hand out leases: a worker that
    gives up after 1.5 s there has not read the stream, it has only begun to.
    """
    return "1.5" if system.endpoint.embedded else "10"


def test_a_crash_before_the_checkpoint_loses_nothing_and_delivers_nothing_twice(systems, tmp_path):
    system = systems(shards=2)
    output = tmp_path / "processed.txt"
    first = publish(system, Workload(61).mix(30))

    crashed = start_worker(system, output, "--crash-on-checkpoint")
    code, _, err = finish(crashed)
    assert code == -signal.SIGKILL, err  # killed at its first checkpoint write
    before_crash = lines(output)  # processed and recorded RECEIVED (moto: all 30 in one read)...
    assert before_crash
    assert set(before_crash) <= set(first)
    if system.endpoint.embedded:
        assert sorted(before_crash) == sorted(first)
    rows = system.client("dynamodb").scan(TableName=system.deployment.table("checkpoints"))["Items"]
    assert {row["checkpoint"]["S"] for row in rows} == {"TRIM_HORIZON"}  # ...but no position saved

    code, stats, err = finish(start_worker(system, output, "--idle", idle(system)))
    assert code == 0, err
    assert stats is not None
    assert stats["records"] == 30  # read again from the start of each shard
    assert stats["duplicates"] == len(before_crash)  # what was processed is dropped: not delivered twice
    assert stats["acked"] == 30 - len(before_crash)
    assert sorted(lines(output)) == sorted(first)  # each message once

    later = publish(system, Workload(62).mix(10))
    code, stats, err = finish(start_worker(system, output, "--idle", idle(system)))
    assert code == 0, err
    assert stats is not None
    assert (stats["records"], stats["duplicates"], stats["acked"]) == (10, 0, 10)  # resumed after the checkpoint
    assert sorted(lines(output)) == sorted(first + later)


def test_a_worker_killed_while_holding_leases_is_taken_over(systems, tmp_path):
    system = systems(shards=4)
    out_a, out_b = tmp_path / "a.txt", tmp_path / "b.txt"
    worker_a = start_worker(system, out_a, "--lease", "1")
    worker_b = None
    try:
        wait_for(
            lambda: len(lease_owners(system)) == 4 and None not in lease_owners(system).values(), what="a's leases"
        )
        [owner_a] = set(lease_owners(system).values())
        worker_b = start_worker(system, out_b, "--lease", "1")

        def balanced() -> bool:
            counts = Counter(lease_owners(system).values())
            return len(counts) == 2 and set(counts.values()) == {2} and None not in counts

        wait_for(balanced, what="two leases each")
        [owner_b] = set(lease_owners(system).values()) - {owner_a}

        first = publish(system, Workload(63).mix(40))
        wait_for(lambda: len(lines(out_a)) + len(lines(out_b)) >= 40, what="the first 40")
        assert lines(out_a)
        assert lines(out_b)  # both consumed: competing consumers

        worker_a.send_signal(signal.SIGKILL)
        worker_a.wait(10)
        later = publish(system, Workload(64).mix(40))
        wait_for(lambda: set(lines(out_a) + lines(out_b)) >= set(first + later), what="b to take over")
        assert set(lease_owners(system).values()) == {owner_b}
    finally:
        if worker_a.poll() is None:
            worker_a.kill()
        if worker_b is not None:
            worker_b.send_signal(signal.SIGTERM)
            code, stats, err = finish(worker_b)
            assert code == 0, err
    processed = lines(out_a) + lines(out_b)
    assert sorted(processed) == sorted(first + later)  # everything, each once
    assert stats is not None  # (records a read after its last checkpoint were dropped as duplicates)
    assert all(owner is None for owner in lease_owners(system).values())  # b released its leases on SIGTERM
