"""The local runtime's state directory: what ``rdss local up`` keeps on disk between runs.

Layout (all owned by the runtime, mode 0700):

* ``RDSS-LOCAL-STATE`` - the marker: a directory without it is never used (or emptied) as state;
* ``lock`` - held (``flock``) while a runtime runs on the directory: two runtimes appending to
  one journal would corrupt it;
* ``journal`` - the emulator's write-ahead journal (:mod:`rdss.local.journal`);
* ``snapshot`` - the emulator's state as of a journal index (:mod:`rdss.local.snapshot`);
* ``positions.json`` - the pollers' positions (:mod:`rdss.local.positions`).

The default directory is ``$XDG_STATE_HOME/rdss/local/<env>`` (``~/.local/state/rdss/local/<env>``
when ``XDG_STATE_HOME`` is unset or not absolute, as the XDG base directory specification says).
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

MARKER = "RDSS-LOCAL-STATE"
_MARKER_TEXT = "rdss local runtime state, format 1\n"
_OURS = (MARKER, "lock", "journal", "snapshot", "snapshot.tmp", "positions.json", "positions.json.tmp")


class StateError(Exception):
    """The state directory cannot be used (not ours, in use, not writable)."""


def default_directory(environment: str, env: dict[str, str] | None = None) -> Path:
    """Where ``rdss local up --env ENV`` keeps its state unless told otherwise."""
    env = dict(os.environ) if env is None else env
    base = env.get("XDG_STATE_HOME", "")
    root = Path(base) if base and os.path.isabs(base) else Path(env.get("HOME") or Path.home()) / ".local" / "state"
    return root / "rdss" / "local" / environment


class StateDirectory:
    """A state directory, opened (and locked) by one runtime."""

    def __init__(self, path: Path, *, fresh: bool = False) -> None:
        """Open ``path``, creating it if needed; with ``fresh``, forget what it held.

        Raises:
            StateError: not a state directory (a non-empty directory without the marker, or a
                file), in use by another runtime, or not usable.
        """
        self.path = path
        try:
            self._open(fresh)
        except OSError as error:
            raise StateError(f"state directory {path}: {error.strerror or error}") from error

    def _open(self, fresh: bool) -> None:
        path = self.path
        if path.exists() and not path.is_dir():
            raise StateError(f"state directory {path} is not a directory")
        if path.is_dir() and any(path.iterdir()) and not (path / MARKER).is_file():
            raise StateError(f"{path} is not empty and not an rdss local state directory: give another --state")
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._lock_fd = os.open(path / "lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock_fd)
            owner = (path / "lock").read_text().strip() or "another process"
            raise StateError(f"state directory {path} is in use by rdss local up (pid {owner})") from None
        os.ftruncate(self._lock_fd, 0)
        os.write(self._lock_fd, f"{os.getpid()}\n".encode())
        if fresh:
            for name in _OURS:
                if name not in (MARKER, "lock"):
                    (path / name).unlink(missing_ok=True)
        (path / MARKER).write_text(_MARKER_TEXT)

    @property
    def journal(self) -> Path:
        return self.path / "journal"

    @property
    def snapshot(self) -> Path:
        return self.path / "snapshot"

    @property
    def positions(self) -> Path:
        return self.path / "positions.json"

    def close(self) -> None:
        if getattr(self, "_lock_fd", -1) >= 0:
            os.close(self._lock_fd)  # releases the lock
            self._lock_fd = -1
