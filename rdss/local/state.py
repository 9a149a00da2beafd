"""The local runtime's state directory: what ``rdss local up`` keeps on disk between runs.

Layout (all owned by the runtime; the directory is made mode 0700, files 0600):

* ``RDSS-LOCAL-STATE`` - the marker, with the layout's format: a directory without it is never
  used (or emptied) as state, and one of another format is refused rather than misread;
* ``lock`` - held (``flock``) while a runtime runs on the directory: two runtimes appending to
  one journal would corrupt it;
* ``journal`` - the emulator's write-ahead journal, and ``committed`` the last request it
  acknowledged (:mod:`rdss.local.journal`);
* ``snapshot`` - the emulator's state as of a journal index, and ``key`` the secret that
  authenticates it (:mod:`rdss.local.snapshot`);
* ``positions.json`` (and ``positions.json.previous``) - the pollers' positions
  (:mod:`rdss.local.positions`);
* ``port`` - the public port, kept so that the URLs printed for this state stay right;
* ``*.damaged-<time>`` - what a start found damaged, kept as it was, beside a ``.txt`` that
  names what it held (:mod:`rdss.local.damage`).

Nothing is read before the directory and every entry in it pass :mod:`rdss.host.safefiles`' checks
(this user's, not writable by group or others, no symbolic links), as OpenSSH treats ``~/.ssh``.

The default directory is ``$XDG_STATE_HOME/rdss/local/<env>`` (``~/.local/state/rdss/local/<env>``
when ``XDG_STATE_HOME`` is unset or not absolute, as the XDG base directory specification says).
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

from rdss.host.safefiles import Directory, UnsafeFile

MARKER = "RDSS-LOCAL-STATE"
#: The layout's format: 2 frames the journal with checksums and authenticates snapshots.
FORMAT = 2
_MARKER_TEXT = f"rdss local runtime state, format {FORMAT}\n"
#: What ``--fresh`` forgets (the port and damaged copies stay: they are not the emulator's state).
_STATE = (
    "journal",
    "journal.tmp",
    "committed",
    "snapshot",
    "snapshot.tmp",
    "key",
    "key.tmp",
    "positions.json",
    "positions.json.tmp",
    "positions.json.previous",
)
_KEY_BYTES = 32


class StateError(Exception):
    """The state directory cannot be used (not ours, unsafe, in use, not writable)."""


def default_directory(environment: str, env: dict[str, str] | None = None) -> Path:
    """Where ``rdss local up --env ENV`` keeps its state unless told otherwise."""
    env = dict(os.environ) if env is None else env
    base = env.get("XDG_STATE_HOME", "")
    root = Path(base) if base and os.path.isabs(base) else Path(env.get("HOME") or Path.home()) / ".local" / "state"
    return root / "rdss" / "local" / environment


class StateDirectory:
    """A state directory, opened (checked and locked) by one runtime."""

    def __init__(self, path: Path, *, fresh: bool = False) -> None:
        """Open ``path``, creating it if needed; with ``fresh``, forget what it held.

        Raises:
            StateError: not a state directory (a non-empty directory without the marker, or a
                file), another user's or writable by others, a link among its files, in use by
                another runtime, or not usable.
        """
        self.path = path
        self._lock_fd = -1
        self.files: Directory
        try:
            self._open(fresh)
        except UnsafeFile as error:
            self.close()
            raise StateError(f"state directory {path}: {error}") from None
        except OSError as error:
            self.close()
            raise StateError(f"state directory {path}: {error.strerror or error}") from error
        except StateError:
            self.close()
            raise

    def _open(self, fresh: bool) -> None:
        path = self.path
        if path.exists() and not path.is_dir():
            raise StateError(f"state directory {path} is not a directory")
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                path.mkdir(mode=0o700)
                os.chmod(path, 0o700)  # whatever the umask
            except FileExistsError:
                pass  # made meanwhile: checked below like any other
        self.files = files = Directory(path)
        files.check_all()  # before anything in it is read
        names = files.names()
        if set(names) - {"lock"} and MARKER not in names:  # (a first start may have stopped after the lock)
            raise StateError(f"{path} is not empty and not an rdss local state directory: give another --state")
        if MARKER in names and not fresh:
            marker = files.read(MARKER, 256) or b""
            if marker != _MARKER_TEXT.encode():
                said = marker.decode("utf-8", "replace").strip()[:80]
                raise StateError(
                    f"{path} holds state of another rdss version ({said!r}; this version reads format {FORMAT}): "
                    "start with --fresh to begin again, or with the rdss that wrote it"
                )
        self._lock_fd = files.open("lock", os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = os.pread(self._lock_fd, 32, 0).decode("ascii", "replace").strip() or "another process"
            raise StateError(f"state directory {path} is in use by rdss local up (pid {owner})") from None
        os.ftruncate(self._lock_fd, 0)
        os.pwrite(self._lock_fd, f"{os.getpid()}\n".encode(), 0)
        if fresh:
            for name in _STATE:
                files.unlink(name)
        if files.read(MARKER, 256) != _MARKER_TEXT.encode():
            files.write(MARKER, _MARKER_TEXT.encode())
        self.key = self._key()

    def _key(self) -> bytes:
        """The secret snapshots are authenticated with: made once, this user's only."""
        key = self.files.read("key", 4096)
        if key is None:
            self.files.write("key", os.getrandom(_KEY_BYTES))
            key = self.files.read("key", 4096) or b""
        if len(key) != _KEY_BYTES:
            raise StateError(f"{self.path / 'key'} is damaged ({len(key)} bytes, not {_KEY_BYTES}): start with --fresh")
        return key

    # -- the public port ------------------------------------------------------------------------
    def stored_port(self) -> int | None:
        """The public port an earlier run of this state served on, if one did."""
        text = (self.files.read("port", 64) or b"").decode("ascii", "replace").strip()
        return int(text) if text.isdigit() and 0 < int(text) < 65536 else None

    def keep_port(self, port: int) -> None:
        if self.stored_port() != port:
            self.files.write("port", f"{port}\n".encode())

    # -- damaged files --------------------------------------------------------------------------
    def keep(self, name: str, why: str = "damaged") -> str:
        """Keep ``name`` as it is now under ``<name>.<why>-<time>`` (a second name for the same
        bytes: whatever happens to ``name`` later, the copy stays); returns the copy's name. A
        copy already made of this very file is reused, so a start refused again makes no more."""
        for existing in self.files.names():
            if existing.startswith(f"{name}.{why}-") and self.files.same_file(existing, name):
                return existing
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        copy, number = f"{name}.{why}-{stamp}", 1
        while self.files.exists(copy):
            number += 1
            copy = f"{name}.{why}-{stamp}.{number}"
        self.files.link(name, copy)
        return copy

    # -- names, for what is said to a person ----------------------------------------------------
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
        if self._lock_fd >= 0:
            os.close(self._lock_fd)  # releases the lock
            self._lock_fd = -1
        files = getattr(self, "files", None)
        if files is not None:
            files.close()
