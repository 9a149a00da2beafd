"""Damaged state is named, never quietly dropped: a journal damaged before its end, a snapshot that
does not verify, a positions file that is empty, garbage or misshapen. Against moto's real app
behind the journal, in this process (tests/support/durable.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from rdss.local import journal
from rdss.local.damage import StateDamaged
from rdss.local.positions import Positions
from rdss.local.state import StateDirectory
from tests.conftest import ROOT
from tests.support.durable import Emulated

STREAM = "kept"
MESSAGES = 60


def acknowledged(path: Path, count: int = MESSAGES, *, compact_every: int = 5000) -> list[bytes]:
    """A stream, ``count`` records on it, all acknowledged; then a crash (no snapshot)."""
    first = Emulated(path, compact_every=compact_every)
    first.create_stream(STREAM)
    sent = [b"message-%04d" % n for n in range(count)]
    assert all(first.put(STREAM, data) for data in sent)
    first.crash()
    return sent


def flip(path: Path, position: int, bit: int = 0x10) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= bit
    path.write_bytes(bytes(data))


def test_a_flip_a_third_into_the_journal_refuses_the_start_naming_what_is_lost(tmp_path: Path) -> None:
    path = tmp_path / "state"
    sent = acknowledged(path)
    size = (path / "journal").stat().st_size
    flip(path / "journal", size // 3)
    damaged = (path / "journal").read_bytes()

    with pytest.raises(StateDamaged) as refused:
        Emulated(path)
    said = str(refused.value)
    assert "\n" not in said
    assert said.startswith("journal damaged at bytes ")
    assert "a frame fails its checksum" in said
    assert f"-{MESSAGES + 1} (from POST Kinesis_20131202.PutRecord at " in said  # the last one named
    assert "--salvage" in said
    assert (path / "journal").read_bytes() == damaged  # nothing changed
    copies = [name for name in os.listdir(path) if name.startswith("journal.damaged-") and not name.endswith(".txt")]
    assert len(copies) == 1
    assert (path / copies[0]).read_bytes() == damaged
    listed = (path / f"{copies[0]}.txt").read_text()
    assert listed.count("Kinesis_20131202.PutRecord") >= MESSAGES * 2 // 3 - 1

    with pytest.raises(StateDamaged):  # refused again: no second copy
        Emulated(path)
    assert len([n for n in os.listdir(path) if n.startswith("journal.damaged-") and not n.endswith(".txt")]) == 1

    salvaged = Emulated(path, salvage=True)
    kept = salvaged.records(STREAM)
    assert kept == sent[: len(kept)]  # the intact prefix, in order
    assert MESSAGES // 4 < len(kept) < MESSAGES // 2
    assert "salvaged" in (salvaged.recovery.salvaged or "")
    assert (path / copies[0]).read_bytes() == damaged  # the copy stays whole
    assert salvaged.put(STREAM, b"after")  # and it carries on
    salvaged.stop()
    again = Emulated(path)
    assert again.records(STREAM) == [*kept, b"after"]
    again.stop()


def test_a_journal_cut_short_of_what_was_acknowledged_is_refused(tmp_path: Path) -> None:
    """Cut at a frame boundary the journal reads as whole: the committed witness says otherwise."""
    path = tmp_path / "state"
    acknowledged(path, 10)
    state = StateDirectory(path)
    found = journal.scan(state.files)
    frames = list(journal.entries(state.files, found.end))
    state.close()
    cut = len(b"".join(e.frame() for e in frames[:-3]))
    os.truncate(path / "journal", cut)
    with pytest.raises(StateDamaged, match=r"request 11 was acknowledged \(the file was cut short\)"):
        Emulated(path)


def test_a_torn_final_frame_is_cut_and_every_acknowledged_record_kept(tmp_path: Path) -> None:
    path = tmp_path / "state"
    sent = acknowledged(path, 12)
    with (path / "journal").open("ab") as file:  # a crash mid-write of a 13th, never answered
        file.write(journal.Entry(14, 1.0, 200, {"REQUEST_METHOD": "POST"}, b"x" * 500).frame()[:300])
    restarted = Emulated(path)
    assert restarted.recovery.torn_bytes == 300
    assert restarted.recovery.salvaged is None
    assert restarted.records(STREAM) == sent
    restarted.stop()


def test_every_flipped_byte_of_a_snapshot_is_refused_and_never_read(tmp_path: Path) -> None:
    path = tmp_path / "state"
    first = Emulated(path)
    first.create_stream(STREAM)
    for n in range(5):
        assert first.put(STREAM, b"record-%d" % n)
    first.stop()  # a clean stop: a snapshot, the journal empty
    snapshot = (path / "snapshot").read_bytes()
    assert (path / "journal").stat().st_size == 0
    positions = sorted({*range(0, 120), *range(120, len(snapshot), max(1, len(snapshot) // 200)), len(snapshot) - 1})
    for position in positions:
        for bit in (0x01, 0x80):
            flip(path / "snapshot", position, bit)
            with pytest.raises(StateDamaged, match=r"^snapshot damaged \(") as refused:
                Emulated(path)
            assert "\n" not in str(refused.value)
            (path / "snapshot").write_bytes(snapshot)
    restored = Emulated(path)
    assert restored.records(STREAM) == [b"record-%d" % n for n in range(5)]
    restored.stop()


def test_a_damaged_snapshot_salvaged_starts_empty_and_keeps_the_files(tmp_path: Path) -> None:
    path = tmp_path / "state"
    first = Emulated(path, compact_every=3)
    first.create_stream(STREAM)
    for n in range(7):
        assert first.put(STREAM, b"record-%d" % n)
    first.stop()
    flip(path / "snapshot", 200)
    salvaged = Emulated(path, salvage=True)
    assert salvaged.records(STREAM) == []
    assert "starting from an empty emulator" in (salvaged.recovery.salvaged or "")
    names = os.listdir(path)
    assert any(n.startswith("snapshot.damaged-") for n in names)
    salvaged.stop()


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"", "empty"),
        (b"\x00garbage\xff", "not JSON"),
        (b"[]", "not a positions file"),
        (b'{"positions": {"mapping:broker": {"shardId-000000000000": 5}}, "crc32": 0}', "are not {poller"),
        (None, "its checksum does not match"),  # one character changed inside a string: still JSON
    ],
)
@pytest.mark.parametrize("previous", [True, False], ids=["previous kept", "no previous"])
def test_a_damaged_positions_file_is_rebuilt_in_one_warning(
    tmp_path: Path, content: bytes | None, reason: str, previous: bool, caplog: pytest.LogCaptureFixture
) -> None:
    state = StateDirectory(tmp_path / "state")
    positions = Positions(state)
    positions.of("mapping:broker")["shardId-000000000000"] = "41"
    positions.of("mapping:broker")["shardId-000000000000"] = "42"
    if not previous:
        (state.path / "positions.json.previous").unlink()
    written = (state.path / "positions.json").read_bytes()
    (state.path / "positions.json").write_bytes(content if content is not None else written.replace(b"42", b"43"))
    with caplog.at_level("WARNING"):
        rebuilt = Positions(state)
    assert reason in (rebuilt.rebuilt or "")
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == [rebuilt.rebuilt]
    expected = {"mapping:broker": {"shardId-000000000000": "41"}} if previous else {}
    assert rebuilt.snapshot() == expected  # behind, never ahead: what was read again is dropped downstream
    assert any(name.startswith("positions.json.damaged-") for name in os.listdir(state.path))
    assert Positions(state).snapshot() == expected  # written back whole
    assert Positions(state).rebuilt is None
    state.close()


def test_local_up_on_a_damaged_journal_exits_2_with_one_line(tmp_path: Path) -> None:
    path = tmp_path / "state"
    acknowledged(path, 20)
    flip(path / "journal", (path / "journal").stat().st_size // 2)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "XDG_STATE_HOME": str(tmp_path / "xdg"),
        "PYTHONPATH": str(ROOT),
    }
    result = subprocess.run(
        [sys.executable, "-m", "rdss", "local", "up", "--state", str(path), "--port", "0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("rdss local: journal damaged at bytes ")
    assert "Traceback" not in result.stderr
    assert not any((tmp_path / "xdg").rglob("*.json")) if (tmp_path / "xdg").exists() else True
    listing = next(path.glob("journal.damaged-*.txt")).read_text()
    assert orjson.dumps("PutRecord").strip(b'"').decode() in listing


def test_a_journal_gone_while_requests_were_acknowledged_is_refused_then_salvaged(tmp_path: Path) -> None:
    path = tmp_path / "state"
    acknowledged(path, 5)
    (path / "journal").unlink()
    with pytest.raises(StateDamaged, match=r"it ends at request 0, but request 6 was acknowledged"):
        Emulated(path)
    salvaged = Emulated(path, salvage=True)
    assert salvaged.records(STREAM) == []  # nothing was left to keep: said, not silent
    salvaged.stop()
    Emulated(path).stop()  # and from then on it starts
