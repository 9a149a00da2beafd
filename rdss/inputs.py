"""Reading one input - a file, or standard input for ``-`` - with a bound on its size.

Below the command line, so that anything reading a file a user names (a message, a cdk.json)
refuses one too large for it (``/dev/zero``, a log given by mistake) without reading it whole.
"""

from __future__ import annotations

import sys
from pathlib import Path

#: The most ``rdss`` reads from one input (a file, standard input): a message may be split into
#: a sequence, so this is well above the spec's 1,000,000 bytes, and well below what would
#: exhaust memory on reading ``/dev/zero`` by mistake.
MAX_INPUT_BYTES = 64 * 1024 * 1024


class InputTooLarge(OSError):
    """An input longer than the command reads (``/dev/zero``, a log given for a message)."""

    def __init__(self, name: str, limit: int) -> None:
        super().__init__(f"larger than {limit / 1024 / 1024:g} MiB, the most rdss reads from one input")
        self.filename = name
        self.strerror = str(self.args[0])


def read_input(name: str | Path, limit: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of a file, or of standard input for the name ``-`` (a :class:`Path` is always
    a file), at most ``limit`` of them.

    Raises:
        OSError: the file cannot be read; :class:`InputTooLarge` when it holds more than ``limit``.
    """
    if name == "-":
        data = sys.stdin.buffer.read(limit + 1)
    else:
        with Path(name).open("rb") as file:
            data = file.read(limit + 1)
    if len(data) > limit:
        raise InputTooLarge("standard input" if name == "-" else str(name), limit)
    return data
