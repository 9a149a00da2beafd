"""The out-of-process redelivery counter: durable across processes, forgiving in advance."""

from __future__ import annotations

import subprocess
import sys

from rdss.gateway.amqp.redeliveries import SqliteRedeliveries


def test_counts_survive_the_process_and_are_shared(tmp_path):
    path = tmp_path / "counts.sqlite"
    script = (
        "import sys; from rdss.gateway.amqp.redeliveries import SqliteRedeliveries as S; "
        "c = S(sys.argv[1]); print(c.increment(['q/m'])['q/m']); import os; os._exit(0)"  # no clean close
    )
    outputs = [
        subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, check=True).stdout
        for _ in range(3)
    ]
    assert [int(o) for o in outputs] == [1, 2, 3]
    counter = SqliteRedeliveries(path)
    assert counter.count("q/m") == 3
    counter.forget(["q/m"])
    assert counter.count("q/m") == 0
    counter.close()


def test_forgiving_takes_the_next_redelivery_off_in_advance(tmp_path):
    counter = SqliteRedeliveries(tmp_path / "counts.sqlite")
    counter.forgive(["q/a"])  # its consumer lost the connection while holding it
    assert counter.increment(["q/a", "q/b"]) == {"q/a": 0, "q/b": 1}
    assert counter.increment(["q/a"]) == {"q/a": 1}
    counter.close()


def test_old_rows_are_purged_when_a_counter_opens(tmp_path):
    clock = [1_000_000.0]
    counter = SqliteRedeliveries(tmp_path / "counts.sqlite", clock=lambda: clock[0])
    counter.increment(["q/old"])
    counter.close()
    clock[0] += 8 * 24 * 3600
    again = SqliteRedeliveries(tmp_path / "counts.sqlite", clock=lambda: clock[0])
    assert again.count("q/old") == 0
    again.close()
