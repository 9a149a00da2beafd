"""Helpers shared by the sub-commands: reading inputs, errors with exit codes."""

from __future__ import annotations

import sys
from pathlib import Path

USAGE = 2
INVALID = 1


class CommandError(Exception):
    """A failure the command reports as one line on standard error, with an exit code."""

    def __init__(self, message: str, exit_code: int = USAGE) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def read_input(name: str) -> bytes:
    """The bytes of a file, or of standard input for ``-``.

    Raises:
        OSError: the file cannot be read.
    """
    if name == "-":
        return sys.stdin.buffer.read()
    return Path(name).read_bytes()


def describe_os_error(error: OSError) -> str:
    """``cannot read x: No such file or directory`` without a traceback."""
    target = error.filename if error.filename is not None else "input"
    return f"cannot read {target}: {error.strerror or error}"
