"""A state directory another user could have written is refused before anything in it is read:
no planted snapshot runs, no planted link is followed, and nothing is written anywhere - each case
one line on standard error and exit 2 from ``rdss local up``."""

from __future__ import annotations

import hashlib
import hmac
import os
import pickle
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from rdss.local import snapshot
from rdss.local.state import StateDirectory, StateError
from tests.conftest import ROOT

OTHER_USER = 65534  # nobody


class Planted:
    """A pickle that, when loaded, creates the file ``proof``: what an attacker plants."""

    def __init__(self, proof: Path) -> None:
        self.proof = proof

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, (f"touch {self.proof}",))


def tree(root: Path) -> dict[str, tuple[int, int, int]]:
    """Every path under ``root`` with its size, mode and modification time: what a refusal must not change."""
    found = {}
    for path in sorted(root.rglob("*")):
        status = path.lstat()
        found[str(path.relative_to(root))] = (status.st_size, status.st_mode, status.st_mtime_ns)
    return found


def local_up(tmp_path: Path, state: Path) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path / "home"),
        "XDG_STATE_HOME": str(tmp_path / "xdg"),
        "PYTHONPATH": str(ROOT),
    }
    return subprocess.run(
        [sys.executable, "-m", "rdss", "local", "up", "--state", str(state), "--port", "0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def a_state_directory(tmp_path: Path) -> Path:
    """A state directory as an earlier ``local up`` left it (marker, key, lock), closed."""
    path = tmp_path / "state"
    StateDirectory(path).close()
    return path


def plant_snapshot(state: Path, proof: Path) -> None:
    (state / "snapshot").write_bytes(pickle.dumps(Planted(proof)))


def world_writable(state: Path, proof: Path) -> str:
    plant_snapshot(state, proof)
    os.chmod(state, 0o777)
    return "is writable by group or others (mode 0777)"


def another_users_directory(state: Path, proof: Path) -> str:
    plant_snapshot(state, proof)
    os.chown(state, OTHER_USER, OTHER_USER)
    os.chmod(state, 0o777)
    return f"is owned by another user (uid {OTHER_USER})"


def another_users_snapshot(state: Path, proof: Path) -> str:
    plant_snapshot(state, proof)
    os.chown(state / "snapshot", OTHER_USER, OTHER_USER)
    return f"snapshot is owned by another user (uid {OTHER_USER})"


def group_writable_journal(state: Path, proof: Path) -> str:
    (state / "journal").write_bytes(b"")
    os.chmod(state / "journal", 0o664)
    plant_snapshot(state, proof)
    return "journal is writable by group or others (mode 0664)"


def linked_lock(state: Path, proof: Path) -> str:
    (state / "lock").unlink()
    (state / "lock").symlink_to(proof.parent / "victim-1")
    return "lock is a symbolic link"


def linked_journal(state: Path, proof: Path) -> str:
    (state / "journal").symlink_to(proof.parent / "victim-2")
    return "journal is a symbolic link"


@pytest.mark.parametrize(
    "plant",
    [
        world_writable,
        another_users_directory,
        another_users_snapshot,
        group_writable_journal,
        linked_lock,
        linked_journal,
    ],
)
def test_an_unsafe_state_directory_is_refused_in_one_line_before_anything_is_read(
    tmp_path: Path, plant: Callable[[Path, Path], str]
) -> None:
    state = a_state_directory(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    victims = {outside / "victim-1": b"the victim's file\n", outside / "victim-2": b"another file of the victim\n"}
    for victim, content in victims.items():
        victim.write_bytes(content)
    proof = outside / "proof"
    says = plant(state, proof)
    before_state, before_outside = tree(state), tree(outside)

    result = local_up(tmp_path, state)

    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"rdss local: state directory {state}: ")
    assert says in lines[0]
    assert "Traceback" not in result.stderr
    assert not proof.exists(), "the planted snapshot ran"
    assert tree(state) == before_state  # nothing read into, nothing written
    assert tree(outside) == before_outside
    assert all(victim.read_bytes() == content for victim, content in victims.items())
    assert not (tmp_path / "xdg").exists() or not any((tmp_path / "xdg").rglob("*.json"))


def test_a_planted_snapshot_in_a_safe_directory_is_refused_unread(tmp_path: Path) -> None:
    """The directory is the user's own, but the snapshot was not written with its key (copied in,
    or planted while the directory was open to others): it is never unpickled."""
    state = a_state_directory(tmp_path)
    proof = tmp_path / "proof"
    plant_snapshot(state, proof)
    result = local_up(tmp_path, state)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "snapshot damaged (it is not a snapshot this version of rdss writes" in lines[0]
    assert "--salvage" in lines[0]
    assert not proof.exists()
    assert any(name.startswith("snapshot.damaged-") for name in os.listdir(state))


def test_a_signed_snapshot_naming_anything_but_moto_is_not_loaded(tmp_path: Path) -> None:
    """Even a snapshot that verifies (someone who had the key) names only moto's classes and a
    list of standard ones: ``os.system`` is refused by name, and nothing runs."""
    state = StateDirectory(tmp_path / "state")
    proof = tmp_path / "proof"
    payload = pickle.dumps({("moto.kinesis.models", "kinesis_backends"): Planted(proof)})
    header = b'{"moto": "%s", "index": 3, "size": %d}' % (__import__("moto").__version__.encode(), len(payload))
    dumped = len(header).to_bytes(4, "big") + header + payload
    mac = hmac.new(state.key, snapshot.MAGIC + dumped, hashlib.sha256).digest()
    (state.path / "snapshot").write_bytes(snapshot.MAGIC + mac + dumped)
    with pytest.raises(snapshot.SnapshotError, match=r"may not name posix\.system"):
        snapshot.load(state.files, state.key)
    assert not proof.exists()


def test_the_directory_is_made_for_this_user_alone(tmp_path: Path) -> None:
    old = os.umask(0o000)  # whatever the umask says
    try:
        state = StateDirectory(tmp_path / "deep" / "state")
    finally:
        os.umask(old)
    assert (state.path.stat().st_mode & 0o777) == 0o700
    assert all((path.stat().st_mode & 0o077) == 0 for path in state.path.iterdir())
    state.close()


def test_the_state_of_an_older_layout_is_refused_not_misread(tmp_path: Path) -> None:
    path = tmp_path / "state"
    path.mkdir(mode=0o700)
    (path / "RDSS-LOCAL-STATE").write_text("rdss local runtime state, format 1\n")
    (path / "journal").write_bytes(b"\x00\x00\x00\x10")
    with pytest.raises(StateError, match=r"holds state of another rdss version .* start with --fresh"):
        StateDirectory(path)
    StateDirectory(path, fresh=True).close()  # --fresh begins again
    assert not (path / "journal").exists()
