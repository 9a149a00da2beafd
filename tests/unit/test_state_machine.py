"""The local runtime's state under random crashes, torn writes, compactions, truncations and byte
damage: every acknowledged request is recovered, or the start is refused naming a range of
requests that holds every one lost - never one silently dropped. The pollers' positions come back
as written, or rebuilt behind (a value once written, or none), never ahead.

A Hypothesis state machine over moto's real app behind the journal, in this process
(tests/support/durable.py). At most one fault is injected between two starts: the journal, the
snapshot, the positions file or the committed witness, each checksummed, is damaged once; a crash
may leave a torn frame of a request never answered.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from rdss.local import journal, snapshot
from rdss.local.damage import StateDamaged
from rdss.local.positions import Positions
from tests.support.durable import Emulated

STREAM = "kept"
SHARDS = ("shardId-000000000000", "shardId-000000000001")


def lost_range(said: str) -> tuple[int, int | None]:
    """The requests a refusal names as lost: (first, last), last None when it says "from N on"."""
    journal_lost = re.search(r"\): requests? (\d+)(?:-(\d+))? ", said)
    if journal_lost:
        first = int(journal_lost.group(1))
        return first, int(journal_lost.group(2) or first)
    from_on = re.search(r"requests from (\d+) on", said)
    if from_on:
        return int(from_on.group(1)), None
    held = re.search(r"it held requests 1-(\d+)", said)
    if held:
        return 1, None  # a snapshot: everything it held and the journal after it
    if "it held every request before" in said:
        return 1, None
    raise AssertionError(f"the refusal names no range: {said}")


class StateUnderFaults(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.path = Path(tempfile.mkdtemp(prefix="rdss-state-machine-")) / "state"
        self.running: Emulated | None = None
        #: (request index, data) of every acknowledged record, in order.
        self.acked: list[tuple[int, bytes]] = []
        #: every value each shard's position was ever given
        self.written: dict[str, set[str]] = {shard: set() for shard in SHARDS}
        self.positions: Positions | None = None
        self.faulted = False
        self.counter = 0
        self.start()
        assert self.running is not None
        self.running.create_stream(STREAM)
        self.stream_index = self.running.app._index
        self.put(3)

    def teardown(self) -> None:
        if self.running is not None:
            self.running.crash()
        shutil.rmtree(self.path.parent, ignore_errors=True)

    # -- starting -------------------------------------------------------------------------------
    def start(self) -> None:
        refused: StateDamaged | None = None
        try:
            self.running = Emulated(self.path, compact_every=10**9)
        except StateDamaged as error:
            refused = error
        if refused is not None:
            assert self.faulted, f"refused without any damage: {refused}"
            said = str(refused)
            assert "\n" not in said
            first, last = lost_range(said)
            event(f"refused: {said.split(' at bytes', 1)[0].split(' (', 1)[0]}")
            self.running = Emulated(self.path, compact_every=10**9, salvage=True)
            kept = self.running.records(STREAM)
            expected = [data for _, data in self.acked]
            assert kept == expected[: len(kept)], "salvage keeps a prefix, in order"
            for index, _data in self.acked[len(kept) :]:  # every one lost lies in the named range
                assert index >= first, (index, said)
                assert last is None or index <= last, (index, said)
            self.acked = self.acked[: len(kept)]
            for shard in SHARDS:
                self.written[shard].clear()  # salvage sets the positions aside
            if self.running.call("kinesis", "DescribeStreamSummary", {"StreamName": STREAM})[0] != 200:
                assert not self.acked or first <= self.stream_index, "the stream's creation was lost: it is named"
                self.running.create_stream(STREAM)  # salvaged from nothing: go on with a new stream
                self.stream_index = self.running.app._index
        else:
            assert self.running is not None
            kept = self.running.records(STREAM)
            if hasattr(self, "stream_index"):  # its creation was acknowledged
                assert self.running.call("kinesis", "DescribeStreamSummary", {"StreamName": STREAM})[0] == 200
            assert kept == [data for _, data in self.acked], "every acknowledged record, and nothing else"
            event("started after a fault" if self.faulted else "started")
            if self.running.recovery.torn_bytes:
                event("a torn tail cut")
        self.faulted = False
        self.positions = Positions(self.running.state)
        for shard in SHARDS:
            value = self.positions.snapshot().get("mapping:test", {}).get(shard)
            assert value is None or value in self.written[shard], "a position is one once written, never ahead"

    # -- while running --------------------------------------------------------------------------
    @precondition(lambda self: self.running is not None)
    @rule(count=st.integers(1, 4))
    def put(self, count: int) -> None:
        assert self.running is not None
        for _ in range(count):
            self.counter += 1
            data = b"record-%06d" % self.counter
            if self.running.put(STREAM, data):
                self.acked.append((self.running.app._index, data))

    @precondition(lambda self: self.running is not None)
    @rule(shard=st.sampled_from(SHARDS))
    def commit_position(self, shard: str) -> None:
        assert self.positions is not None
        value = str(len(self.acked))
        self.positions.of("mapping:test")[shard] = value
        self.written[shard].add(value)

    @precondition(lambda self: self.running is not None)
    @rule()
    def compact(self) -> None:
        assert self.running is not None
        self.running.app.compact()

    @precondition(lambda self: self.running is not None)
    @rule(torn=st.integers(0, 200))
    def crash(self, torn: int) -> None:
        """Die: the files as they are, and maybe the first bytes of a request never answered."""
        assert self.running is not None
        index = self.running.app._index + 1
        self.running.crash()
        self.running = None
        if torn:
            frame = journal.Entry(index, 1.0, 200, {"REQUEST_METHOD": "POST"}, b"unanswered" * 30).frame()
            with (self.path / "journal").open("ab") as file:
                file.write(frame[: min(torn, len(frame) - 1)])

    @precondition(lambda self: self.running is not None)
    @rule()
    def crash_between_snapshot_and_cut(self) -> None:
        """Die after a snapshot was written and before the journal let go of what it holds."""
        assert self.running is not None
        app, state = self.running.app, self.running.state
        with app._lock:
            snapshot.write(state.files, state.key, snapshot.dump(app._index))
        self.crash(0)

    @precondition(lambda self: self.running is not None)
    @rule()
    def stop(self) -> None:
        assert self.running is not None
        self.running.stop()
        self.running = None

    @precondition(lambda self: self.running is None)
    @rule()
    def restart(self) -> None:
        self.start()

    # -- faults, between a stop and a start -----------------------------------------------------
    def _damageable(self, name: str) -> bool:
        return self.running is None and not self.faulted and (self.path / name).exists()

    @precondition(lambda self: self._damageable("journal") and (self.path / "journal").stat().st_size > 0)
    @rule(where=st.floats(0, 1, exclude_max=True), bit=st.sampled_from([0x01, 0x08, 0x80]))
    def flip_in_journal(self, where: float, bit: int) -> None:
        self._flip("journal", where, bit)

    @precondition(lambda self: self._damageable("snapshot"))
    @rule(where=st.floats(0, 1, exclude_max=True), bit=st.sampled_from([0x01, 0x08, 0x80]))
    def flip_in_snapshot(self, where: float, bit: int) -> None:
        self._flip("snapshot", where, bit)

    @precondition(lambda self: self._damageable("positions.json"))
    @rule(where=st.floats(0, 1, exclude_max=True), bit=st.sampled_from([0x01, 0x08, 0x80]))
    def flip_in_positions(self, where: float, bit: int) -> None:
        self._flip("positions.json", where, bit)

    @precondition(lambda self: self._damageable("committed"))
    @rule(where=st.floats(0, 1, exclude_max=True))
    def flip_in_witness(self, where: float) -> None:
        self._flip("committed", where, 0x04)

    @precondition(lambda self: self._damageable("journal") and (self.path / "journal").stat().st_size > 0)
    @rule(keep=st.floats(0, 1, exclude_max=True))
    def truncate_journal(self, keep: float) -> None:
        path = self.path / "journal"
        path.write_bytes(path.read_bytes()[: int(path.stat().st_size * keep)])
        self.faulted = True

    @precondition(lambda self: self._damageable("snapshot"))
    @rule(keep=st.floats(0, 1, exclude_max=True))
    def truncate_snapshot(self, keep: float) -> None:
        path = self.path / "snapshot"
        path.write_bytes(path.read_bytes()[: int(path.stat().st_size * keep)])
        self.faulted = True

    def _flip(self, name: str, where: float, bit: int) -> None:
        path = self.path / name
        data = bytearray(path.read_bytes())
        data[int(len(data) * where)] ^= bit
        path.write_bytes(bytes(data))
        self.faulted = True

    @invariant()
    def acknowledged_are_ordered(self) -> None:
        indexes = [index for index, _ in self.acked]
        assert indexes == sorted(indexes)


StateUnderFaults.TestCase.settings = settings(
    max_examples=50,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

TestStateUnderFaults = StateUnderFaults.TestCase


def test_a_journal_cut_below_its_snapshot_takes_the_next_request_without_a_gap(monkeypatch):
    """Found by the machine above: a crash between a snapshot and the journal's cut leaves requests
    the snapshot holds in the journal; cut short below the snapshot's last, the journal held only
    stale ones, the next request was appended after them with a gap, and the start after that was
    refused as damaged though nothing was lost."""
    monkeypatch.setattr(f"{__name__}.event", lambda _: None)  # outside a Hypothesis test
    machine = StateUnderFaults()
    try:
        machine.crash_between_snapshot_and_cut()
        machine.restart()
        machine.crash_between_snapshot_and_cut()
        machine.truncate_journal(keep=0.5)
        machine.restart()
        machine.put(count=1)
        machine.crash_between_snapshot_and_cut()
        machine.restart()  # refused, "request 3 is missing (then 5)", before the fix
        assert machine.running is not None
        assert machine.running.records(STREAM) == [data for _, data in machine.acked]
    finally:
        machine.teardown()
