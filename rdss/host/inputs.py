"""Reading one input - a file, or standard input for ``-`` - with a bound on its size, and telling
one message from newline-delimited JSON.

Below the command line, so that anything reading a file a user names (a message, a cdk.json)
refuses one too large for it (``/dev/zero``, a log given by mistake) without reading it whole.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import sys
from pathlib import Path

import orjson

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
    try:
        if name == "-":
            if sys.stdin is None:  # started with standard input closed (<&-): Python gives None, not a file
                raise OSError(errno.EBADF, "it is closed")
            data = sys.stdin.buffer.read(limit + 1)
        else:
            with Path(name).open("rb") as file:
                data = file.read(limit + 1)
    except OSError as error:
        # a read that fails (EIO from /proc/self/mem, a device, a network mount) names no file,
        # unlike an open that fails: the error says which input it was
        if error.filename is None:
            error.filename = "standard input" if name == "-" else str(name)
        raise
    if len(data) > limit:
        raise InputTooLarge("standard input" if name == "-" else str(name), limit)
    return data


class NotARegularFile(OSError):
    """A name for a file that is a FIFO, a device (``/dev/zero``), a directory or a socket."""

    def __init__(self, name: str) -> None:
        super().__init__(errno.EINVAL, "not a regular file")
        self.filename = name


def read_regular_file(path: Path, limit: int) -> bytes:
    """The bytes of the regular file ``path`` (a link to one is followed), at most ``limit`` of them.

    For a file the command finds by itself rather than one a user names for a message (a CDK
    template in a directory): a FIFO there would block the open and the read for ever, a link to
    ``/dev/zero`` would be read until ``limit``; both are refused before a byte is read. The file
    is opened without blocking and judged by the descriptor, so what is read is what was judged.

    Raises:
        OSError: it cannot be opened or read; :class:`NotARegularFile`; :class:`InputTooLarge`
            when it holds more than ``limit`` bytes.
    """
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise NotARegularFile(str(path))
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(descriptor, min(limit + 1 - size, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as error:
        if error.filename is None:
            error.filename = str(path)
        raise
    finally:
        os.close(descriptor)
    if size > limit:
        raise InputTooLarge(str(path), limit)
    return b"".join(chunks)


def ndjson(data: bytes) -> list[tuple[int, bytes]] | None:
    """The messages of newline-delimited JSON - a JSON object a line, as ``rdss tail`` prints them -
    each with its line number (from 1; blank lines skipped), its bytes as they are but the line's
    end (``\\n`` or ``\\r\\n``); None when ``data`` is one JSON value (a message, or an array: a message
    each is for the caller to ask for) or does not start with a JSON object on a line of its own
    (what it is, the classifier says).

    A later line that is not a message stays one: it is judged (and refused) by its own line.
    """
    if _parses(data):
        return None
    lines = [(number, line.removesuffix(b"\r")) for number, line in enumerate(data.split(b"\n"), 1) if line.strip()]
    if len(lines) < 2:
        return None
    try:
        first = orjson.loads(lines[0][1])
    except orjson.JSONDecodeError:
        first = json.loads(lines[0][1]) if _parses(lines[0][1]) else None
    return lines if isinstance(first, dict) else None


def _parses(data: bytes) -> bool:
    """Whether ``data`` is one JSON value (numbers orjson cannot hold, such as 10**400, included).

    Never raises: whatever the bytes, the message they are is the classifier's to judge (a value
    nested deeper than orjson's 1,024 levels is GENERR007 there, as for any malformed JSON).
    """
    try:
        orjson.loads(data)
    except orjson.JSONDecodeError:
        try:
            json.loads(data)
        except ValueError:  # UnicodeDecodeError and json.JSONDecodeError alike
            return False
        except RecursionError:  # the standard library's scanner recurses once a level of nesting
            return False
    return True
