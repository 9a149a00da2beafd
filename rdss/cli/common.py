"""Helpers shared by the sub-commands: reading inputs, errors with exit codes, common options."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from rdss.gateway.url import DEFAULT_URL

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


def add_gateway_options(parser: argparse.ArgumentParser, application: str) -> None:
    """``--url`` and ``--application``, for ``Gateway(args.url, application=args.application)``.

    ``Gateway`` itself falls back to ``$RDSS_GATEWAY_URL``, then ``DEFAULT_URL``, when ``--url`` is not given.
    """
    parser.add_argument("--url", help=f"gateway URL (default: $RDSS_GATEWAY_URL or {DEFAULT_URL})")
    parser.add_argument("--application", default=application, help=f"application name (default: {application})")


def configure_service_logging() -> None:
    """Warnings with timestamps on standard error, for the long-running commands."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")
    logging.getLogger("pika").setLevel(logging.CRITICAL)  # its failures are reported as ours


# argparse ``type``s. The leading underscore is kept because argparse names the function in
# its error for a malformed number: "argument --count: invalid _positive_int value: 'x'".


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be positive")
    return value
