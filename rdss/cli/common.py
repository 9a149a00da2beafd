"""Helpers shared by the sub-commands: reading inputs, errors with exit codes, common options."""

from __future__ import annotations

import argparse
import logging
import sys
from dataclasses import replace
from pathlib import Path

from rdss.gateway.url import DEFAULT_URL
from rdss.logs import FORMATS, LogSettings, configure, parse_level

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
    add_logging_options(parser)


def add_logging_options(parser: argparse.ArgumentParser) -> None:
    """``--log-format``, ``--log-level`` and ``-v``: how a service command logs (:mod:`rdss.logs`)."""
    group = parser.add_argument_group("logging (default: RDSS_LOG_FORMAT, RDSS_LOG_LEVEL, else syslog at INFO)")
    group.add_argument("--log-format", choices=FORMATS, help="syslog (RFC 5424 to the local syslog), json or text")
    group.add_argument("--log-level", metavar="LEVEL", help="DEBUG, INFO, WARNING, ERROR")
    group.add_argument(
        "-v", "--verbose", action="count", default=0, help="log more: -v every message (INFO), -vv DEBUG"
    )


def configure_service_logging(args: argparse.Namespace, application: str) -> None:
    """Set up logging for a command that sends or receives messages (see :mod:`rdss.logs`):
    options first, then the environment.

    Raises:
        CommandError: a malformed level, or a malformed RDSS_LOG_* / RDSS_SYSLOG_* variable.
    """
    try:
        settings = LogSettings.from_environment()
        level = settings.level
        if getattr(args, "log_level", None):
            level = parse_level(args.log_level, "--log-level")
        elif getattr(args, "verbose", 0):
            level = logging.DEBUG if args.verbose > 1 else logging.INFO
        configure(application, settings=replace(settings, format=args.log_format or settings.format, level=level))
    except ValueError as error:
        raise CommandError(str(error)) from error


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
