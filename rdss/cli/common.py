"""Helpers shared by the sub-commands: errors with exit codes, the deployment a command talks to,
output, and the argparse types that check every value given (the options themselves, each defined
once: :mod:`rdss.cli.options`)."""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import re
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import orjson

from rdss.host.display import printable, printable_json, safe
from rdss.observability.outside import LogSettings, configure, parse_level

if TYPE_CHECKING:
    from rdss.deployment.topology import Deployment
    from rdss.gateway.url import GatewayURL

USAGE = 2
INVALID = 1

#: The longest wait a seconds option takes (a year): anything longer is a typo, and past about
#: 292 years ``time.sleep`` and ``Event.wait`` overflow.
MAX_SECONDS = 365 * 24 * 3600.0


class CommandError(Exception):
    """A failure the command reports as one line on standard error, with an exit code."""

    def __init__(self, message: str, exit_code: int = USAGE) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def describe_os_error(error: OSError) -> str:
    """``cannot read x: No such file or directory`` without a traceback."""
    target = error.filename if error.filename is not None else "input"
    return f"cannot read {target}: {error.strerror or error}"


def deployment_url(url: str | None) -> str:
    """The gateway URL a command talks to: ``--url``, else ``$RDSS_GATEWAY_URL``, else the one
    this host is configured with (:func:`configured_url`).

    Raises:
        CommandError: none names a deployment (usage): a command never quietly aims at AWS.
    """
    named = url or os.environ.get("RDSS_GATEWAY_URL") or configured_url()
    if not named:
        raise CommandError(
            "no deployment named: give --url URL or set RDSS_GATEWAY_URL, e.g. kinesis://ENV?region=REGION "
            "(rdss vendor config prints a vendor's), amqp://USER@HOST/VHOST or memory://NAME; or start rdss local up, "
            "whose deployment the commands then use",
            USAGE,
        )
    return named


def configured_url() -> str | None:
    """The URL this host was configured with when neither ``--url`` nor ``$RDSS_GATEWAY_URL``
    names one: the running local runtime's (the state file ``rdss local up`` writes,
    :mod:`rdss.host.pointers`), else None.

    The one place where a configured deployment is looked up, so that every command finds it the
    same way.

    Raises:
        CommandError: ``--local`` (``RDSS_LOCAL``) names no running local runtime (usage).
    """
    from rdss.host.pointers import NoSuchRuntime
    from rdss.host.pointers import configured_url as local_runtime_url

    try:
        return local_runtime_url()
    except NoSuchRuntime as error:
        raise CommandError(str(error), USAGE) from None


@dataclass(frozen=True)
class AwsDeployment:
    """A Kinesis deployment a command reaches through its AWS resources (streams, tables, buckets,
    queues, the stack): the URL that named it, its names, and how to make its clients."""

    url: GatewayURL
    deployment: Deployment
    #: ``endpoint_url`` and ``region_name`` of its clients, from the URL (boto3's own otherwise)
    options: dict[str, str]

    def client(self, service: str) -> Any:
        """A client of ``service`` there (the local runtime's credentials if it is the local runtime's)."""
        from rdss.aws.clients import client

        return client(service, **self.options)


def aws_deployment(url: str | None, command: str) -> AwsDeployment:
    """The Kinesis deployment ``--url`` names (else ``$RDSS_GATEWAY_URL``, else the running local
    runtime's): ``kinesis://ENV?region=&endpoint=&prefix=``.

    Raises:
        CommandError: none named, a malformed URL, or not a kinesis:// one (usage).
    """
    from rdss.deployment.topology import Deployment
    from rdss.gateway.url import URLError, parse

    try:
        parsed = parse(deployment_url(url))
    except URLError as error:
        raise CommandError(str(error)) from error
    if parsed.scheme != "kinesis":
        raise CommandError(f"rdss {command} works on a Kinesis deployment (kinesis://ENV), not {parsed.scheme}://")
    options = {
        key: value
        for key, value in (("endpoint_url", parsed.param("endpoint")), ("region_name", parsed.param("region")))
        if value
    }
    return AwsDeployment(parsed, Deployment(parsed.name, prefix=parsed.param("prefix") or "rdss"), options)


def print_json(value: Any, *, indent: bool = False) -> None:
    """``value`` as JSON on standard output: one line, or indented for a person to read.

    Flushed at once: a service command prints figures while it runs, read by a pipe.
    """
    try:
        data = orjson.dumps(value, option=orjson.OPT_INDENT_2 if indent else 0)
    except orjson.JSONEncodeError:
        # a lone surrogate (a file name that is not UTF-8, as Python reads it) is no UTF-8 orjson
        # can write; JSON's own escape (\udcff) keeps the value and is ASCII
        data = json.dumps(value, indent=2 if indent else None, separators=None if indent else (",", ":")).encode()
    sys.stdout.buffer.write(printable_json(data) + b"\n")
    sys.stdout.flush()


def report(args: argparse.Namespace, figures: Mapping[str, Any], text: str) -> None:
    """A command's figures: one JSON line with ``--json``, else ``text``."""
    if args.json:
        print_json(figures)
    else:
        print(printable(text), flush=True)


@contextmanager
def aws_failures_are_usage() -> Iterator[None]:
    """Calls to AWS a command cannot do without: a refusal or a service out of reach is one line
    in readable words (:func:`rdss.aws.failures.describe`), exit 2, not botocore's traceback."""
    from botocore.exceptions import BotoCoreError, ClientError

    from rdss.aws.failures import describe

    try:
        yield
    except (ClientError, BotoCoreError) as error:
        raise CommandError(describe(error), USAGE) from error


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


def announce(text: str) -> None:
    """What a service command sets out to do, on standard error (its figures go to standard
    output), escaped and at once."""
    print(safe(text), file=sys.stderr, flush=True)


class Figures(Protocol):
    """What a service reports when it stops: its counts, as JSON."""

    def as_dict(self) -> dict[str, Any]: ...


F = TypeVar("F", bound=Figures)


def run_service(
    args: argparse.Namespace, announcement: str, work: Callable[[threading.Event], F], summary: Callable[[F], str]
) -> int:
    """A service command's run, once what it serves is open: say what it sets out to do (on
    standard error), do ``work`` until SIGINT or SIGTERM sets the event it is given (or its
    ``--idle`` or ``--count`` ends it), then print its figures (``--json``, else ``summary``'s
    line). Exit code 0: a service stopped is a service done."""
    stop = stop_on_signals()
    announce(announcement)
    figures = work(stop)
    report(args, figures.as_dict(), summary(figures))
    return 0


def configure_service_logging(args: argparse.Namespace, application: str) -> None:
    """Set up logging for a command that sends or receives messages (see :mod:`rdss.observability.outside`):
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


# argparse ``type``s: every number is checked when the arguments are parsed, finite and in range
# (``nan`` compares false with every bound, so a wait of ``nan`` seconds would never end, or a
# harvest ``--interval nan`` would never wait). Each raises ArgumentTypeError, whose text argparse
# prints as it is: "argument --idle: expected a number of seconds from ... , got 'nan'".


#: What Python makes of bytes that are not UTF-8 in an argument (surrogateescape): lone surrogates.
_NOT_UTF8 = re.compile("[\ud800-\udfff]")


def text(value: str) -> str:
    """An argparse ``type``, every argument's that has none of its own: text - a name, a channel,
    a URL - which is sent or written as UTF-8, so not the lone surrogates Python reads bytes that
    are not UTF-8 into (refused when the arguments are parsed, as a usage error)."""
    if _NOT_UTF8.search(value):
        raise argparse.ArgumentTypeError(f"{printable(value)}: not UTF-8 text")
    return value


def file_name(value: str) -> str:
    """An argparse ``type``: the name of a file or a directory, as given (a name on disk may hold
    bytes that are not UTF-8; it is opened as it is, and printed escaped)."""
    return value


#: A consumer group's name: it names RabbitMQ queues (at most 255 bytes) and checkpoint and lease keys.
MAX_GROUP_BYTES = 255


def group_name(value: str) -> str:
    """An argparse ``type``: a consumer group's name, one word of text. An empty name would have
    RabbitMQ name the queue itself (a queue no restarted consumer finds again), and a space or a
    control character has no place in a queue name or a key."""
    value = text(value)
    if not value or len(value.encode()) > MAX_GROUP_BYTES or any(c.isspace() or not c.isprintable() for c in value):
        raise argparse.ArgumentTypeError(
            f"{printable(repr(value))}: a consumer group is 1 to {MAX_GROUP_BYTES} bytes of text with no spaces or "
            "control characters"
        )
    return value


def vendor_name(value: str) -> str:
    """An argparse ``type``: a vendor's name (:func:`rdss.deployment.vendors.check_vendor_name`)."""
    from rdss.deployment.vendors import check_vendor_name

    try:
        return check_vendor_name(value)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"{value!r}: {error}") from None


def whole_number(low: int = 1, high: int | None = None) -> Callable[[str], int]:
    """An argparse ``type``: a whole number from ``low`` to ``high`` (no upper bound if None)."""

    def parse(text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            value = None
        if value is None or value < low or (high is not None and value > high):
            span = f"from {low:,} to {high:,}" if high is not None else f"of at least {low:,}"
            raise argparse.ArgumentTypeError(f"expected a whole number {span}, got {text!r}")
        return value

    return parse


def number(low: float, high: float, *, what: str = "a number", low_open: bool = True) -> Callable[[str], float]:
    """An argparse ``type``: a finite number above ``low`` (or from ``low``, when not ``low_open``)
    and at most ``high``."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        above = value > low if low_open else value >= low
        if not (math.isfinite(value) and above and value <= high):
            bound = "above" if low_open else "of at least"
            raise argparse.ArgumentTypeError(
                f"expected {what} {bound} {_figure(low)} and at most {_figure(high)}, got {text!r}"
            )
        return value

    return parse


def _figure(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:g}"


def seconds(low: float = 0.0, high: float = MAX_SECONDS) -> Callable[[str], float]:
    """An argparse ``type``: a finite number of seconds above ``low`` (0: any positive wait)
    and at most ``high`` (a year)."""
    return number(low, high, what="a number of seconds", low_open=low == 0)
