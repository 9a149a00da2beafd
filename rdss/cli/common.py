"""Helpers shared by the sub-commands: reading inputs, errors with exit codes, common options."""

from __future__ import annotations

import argparse
import inspect
import logging
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson

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


def add_command(
    commands: Any,
    name: str,
    run: Callable[[argparse.Namespace], int],
    *,
    help: str,  # noqa: A002 - argparse's own keyword, so a command reads like add_parser
) -> argparse.ArgumentParser:
    """A sub-command: ``help`` is its line in the parent's help; ``run``'s docstring, as the
    one place that says what the command does, heads its own help (argparse folds its white
    space); ``rdss.cli.main`` calls ``run`` with the parsed arguments and exits with what it returns."""
    description = inspect.getdoc(run)
    parser: argparse.ArgumentParser = commands.add_parser(name, help=help, description=description)
    parser.set_defaults(run=run)
    return parser


def print_json(value: Any, *, indent: bool = False) -> None:
    """``value`` as JSON on standard output: one line, or indented for a person to read.

    Flushed at once: a service command prints figures while it runs, read by a pipe.
    """
    sys.stdout.buffer.write(orjson.dumps(value, option=orjson.OPT_INDENT_2 if indent else 0) + b"\n")
    sys.stdout.flush()


def report(args: argparse.Namespace, figures: Mapping[str, Any], text: str) -> None:
    """A command's figures: one JSON line with ``--json``, else ``text``."""
    if args.json:
        print_json(figures)
    else:
        print(text, flush=True)


@contextmanager
def unreachable_is_usage() -> Iterator[None]:
    """A service command's start: a URL naming no messaging system, or one that cannot be reached
    or refuses the set-up, is the caller's to fix (exit 2 with the gateway's words), not a crash."""
    from rdss.gateway import GatewayError, TransportError, URLError

    try:
        yield
    except (URLError, TransportError, GatewayError) as error:
        raise CommandError(str(error), USAGE) from error


def stop_on_signals() -> threading.Event:
    """An event SIGINT and SIGTERM set: a service command finishes its batch and stops cleanly
    (its final figures printed) instead of dying mid-write."""
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    return stop


def add_service_options(parser: argparse.ArgumentParser, *, idle: str) -> None:
    """``--idle``, ``--count`` and ``--json`` of a service command that runs until stopped, then
    prints its figures; ``idle`` says what it waits for (``without a message``)."""
    parser.add_argument("--idle", type=_positive_float, metavar="S", help=f"stop after S seconds {idle}")
    parser.add_argument("--count", type=_positive_int, metavar="N", help="stop after N records")
    parser.add_argument("--json", action="store_true", help="print the final figures as JSON")
    add_logging_options(parser)


def add_sender_options(parser: argparse.ArgumentParser, application: str) -> None:
    """``--to CHANNEL`` and the gateway's options: a command that publishes through a gateway."""
    parser.add_argument("--to", dest="channel", default="input", metavar="CHANNEL", help="default: input")
    add_gateway_options(parser, application)


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
