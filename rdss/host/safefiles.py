"""Files in one directory of the user's own, opened the way OpenSSH and GnuPG open theirs.

:class:`Directory` holds the directory open (a file descriptor), so every name is looked up in
that directory and nowhere else, whatever is renamed or replaced around it later. Before anything
in it is read, :meth:`Directory.open` checks the directory itself, and each file as it is opened:

* owned by this user (or by root), never by another - another user could have planted it;
* not writable by group or others - another user could change it afterwards;
* a file never reached through a symbolic link (``O_NOFOLLOW``) - a link planted as ``journal``
  would otherwise have the runtime fill or truncate whatever file it points at.

A file that fails a check is refused with :class:`UnsafeFile`, one line naming it and why.
Writes that replace a file go to a new file beside it (created exclusively), synced, then renamed
over it, so a reader sees the old contents or the new ones, never half of them.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path


class UnsafeFile(Exception):
    """A file or directory another user could have written, or one reached through a link."""


#: What a state file is opened with, always: no link followed, not inherited by children.
_ALWAYS = os.O_NOFOLLOW | os.O_CLOEXEC


def check(status: os.stat_result, shown: Path, *, directory: bool = False) -> None:
    """Refuse what another user could have written: the owner, group/other write bits, the type.

    Raises:
        UnsafeFile: one line saying which check failed.
    """
    if stat.S_ISLNK(status.st_mode):
        raise UnsafeFile(f"{shown} is a symbolic link: refused (state files are never reached through links)")
    if directory and not stat.S_ISDIR(status.st_mode):
        raise UnsafeFile(f"{shown} is not a directory")
    if not directory and not stat.S_ISREG(status.st_mode):
        raise UnsafeFile(f"{shown} is not a regular file: refused")
    if status.st_uid not in (os.geteuid(), 0):
        raise UnsafeFile(
            f"{shown} is owned by another user (uid {status.st_uid}): refused, as it may have been planted"
        )
    if status.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        mode = stat.S_IMODE(status.st_mode)
        raise UnsafeFile(
            f"{shown} is writable by group or others (mode {mode:04o}): refused, as another user could change it "
            f"(chmod go-w {shown})"
        )


class Directory:
    """A directory held open; files in it opened by name, checked, links never followed."""

    def __init__(self, path: Path) -> None:
        """Open ``path`` (which must exist) and check it.

        Raises:
            UnsafeFile: the directory fails a check.
            OSError: it cannot be opened.
        """
        self.path = path
        self.fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            check(os.fstat(self.fd), path, directory=True)
        except UnsafeFile:
            os.close(self.fd)
            raise

    def shown(self, name: str) -> Path:
        return self.path / name

    def names(self) -> list[str]:
        return sorted(os.listdir(self.fd))

    def check_all(self) -> None:
        """Check every entry (without opening any): before anything in the directory is read.

        Raises:
            UnsafeFile: the first entry that fails a check.
        """
        for name in self.names():
            status = os.stat(name, dir_fd=self.fd, follow_symlinks=False)
            check(status, self.shown(name), directory=stat.S_ISDIR(status.st_mode))

    def open(self, name: str, flags: int, mode: int = 0o600) -> int:
        """A descriptor of ``name``, opened with ``flags`` (plus no-follow), then checked.

        Raises:
            UnsafeFile: a link, another user's, writable by others, or not a regular file.
            FileNotFoundError: absent and ``flags`` do not create it.
        """
        try:
            fd = os.open(name, flags | _ALWAYS, mode, dir_fd=self.fd)
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise UnsafeFile(f"{self.shown(name)} is a symbolic link: refused") from None
            raise
        try:
            check(os.fstat(fd), self.shown(name))
        except UnsafeFile:
            os.close(fd)
            raise
        return fd

    def exists(self, name: str) -> bool:
        try:
            os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        return True

    def size(self, name: str) -> int:
        """The size of ``name`` (0 when absent)."""
        try:
            return os.stat(name, dir_fd=self.fd, follow_symlinks=False).st_size
        except FileNotFoundError:
            return 0

    def read(self, name: str, limit: int | None = None) -> bytes | None:
        """The contents of ``name`` (at most ``limit`` bytes), None when it is absent."""
        try:
            fd = self.open(name, os.O_RDONLY)
        except FileNotFoundError:
            return None
        with os.fdopen(fd, "rb") as file:
            return file.read() if limit is None else file.read(limit)

    def write(self, name: str, data: bytes) -> None:
        """Replace ``name`` with ``data``: written beside it, synced, renamed over it."""
        temporary = name + ".tmp"
        self.unlink(temporary)
        fd = self.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        self.rename(temporary, name)

    def rename(self, source: str, target: str, *, sync: bool = True) -> None:
        """Rename ``source`` over ``target`` and sync the directory (the rename is then durable)."""
        os.replace(source, target, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        if sync:
            self.sync()

    def link(self, source: str, target: str) -> None:
        """A second name for ``source``'s contents (kept whatever happens to ``source`` later)."""
        os.link(source, target, src_dir_fd=self.fd, dst_dir_fd=self.fd, follow_symlinks=False)
        self.sync()

    def same_file(self, first: str, second: str) -> bool:
        try:
            one = os.stat(first, dir_fd=self.fd, follow_symlinks=False)
            other = os.stat(second, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        return (one.st_dev, one.st_ino) == (other.st_dev, other.st_ino)

    def unlink(self, name: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=self.fd)

    def sync(self) -> None:
        os.fsync(self.fd)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
