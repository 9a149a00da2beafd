"""The sub-commands' parsers: a command, a group of commands, and every option more than one
command takes, each defined here once (its flags, default, help and the type that checks it), so
that a flag means the same thing, and says so in the same words, wherever ``rdss`` takes it."""

from __future__ import annotations

import argparse
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rdss.cli.common import CommandError, group_name, number, seconds, whole_number
from rdss.observability.outside import FORMATS

#: How a command runs: ``rdss.cli.main`` calls it with the parsed arguments and exits with what it returns.
Run = Callable[[argparse.Namespace], int]

#: The fastest ``--rate`` a command takes: a million a second (86 billion a day) is far past any
#: RDSS deployment, and keeps a paced replay's waits and every item of a bill finite numbers.
MAX_RATE = 1_000_000

_positive_int = whole_number(1)
_positive_float = seconds()


def add_command(
    commands: Any,
    name: str,
    run: Run,
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


def deployment_command(
    commands: Any,
    name: str,
    run: Run,
    *,
    help: str,  # noqa: A002 - argparse's own keyword, as add_command's
) -> argparse.ArgumentParser:
    """A command that talks to a deployment (:func:`add_command`): the deployment's options
    (:func:`add_deployment_option`) first."""
    parser = add_command(commands, name, run, help=help)
    add_deployment_option(parser)
    return parser


def add_group(
    commands: Any,
    name: str,
    register: Callable[[Any], None],
    *,
    help: str,  # noqa: A002 - argparse's own keyword, as add_command's
    metavar: str = "ACTION",
) -> Any:
    """A command made of sub-commands (``rdss replay start``): ``help`` is its line in the
    parent's help, and ``register``'s docstring (the function that adds its sub-commands, as a
    command's ``run`` says what it does) heads its own help. Returns the sub-commands' parsers, one
    of which must be named (``metavar`` is what the usage calls it)."""
    group = commands.add_parser(name, help=help, description=inspect.getdoc(register))
    return group.add_subparsers(dest=name, metavar=metavar, required=True)


def add_deployment_option(parser: argparse.ArgumentParser) -> None:
    """``--url``, and ``--local`` among several local runtimes: the deployment, as every command
    that talks to one takes it."""
    parser.add_argument(
        "--url",
        help="the deployment's gateway URL, e.g. kinesis://prod?region=eu-west-2 (default: $RDSS_GATEWAY_URL, "
        "else the running local runtime's)",
    )
    parser.add_argument(
        "--local",
        dest="local_runtime",
        metavar="ENV|DIR",
        help="when several rdss local up run, the one serving deployment ENV or keeping its state in DIR (default: "
        "$RDSS_LOCAL, else the one started last)",
    )


def add_json_option(parser: argparse.ArgumentParser, help: str) -> None:  # noqa: A002 - argparse's keyword
    """``--json``: the command prints JSON instead of text; ``help`` says what it prints (read
    with ``args.json``; :func:`rdss.cli.common.report` prints either)."""
    parser.add_argument("--json", action="store_true", help=help)


def add_number_option(
    parser: argparse.ArgumentParser,
    flag: str,
    parse: Callable[[str], float],
    *,
    default: float,
    help: str,  # noqa: A002 - argparse's own keyword
    metavar: str = "N",
    stated: str | None = None,
) -> None:
    """An option taking one number, checked when the arguments are parsed (``parse``: a
    :func:`rdss.cli.common.whole_number` or :func:`rdss.cli.common.seconds`), whose help ends with
    its default written from the one value it has, so that the two cannot drift apart; ``stated``
    says the default in words instead (``a free port`` for 0)."""
    if stated is None:
        said = f"default {default:,}" if isinstance(default, int) else f"default {default:g}"
    else:
        said = f"default: {stated}"
    parser.add_argument(flag, type=parse, default=default, metavar=metavar, help=f"{help} ({said})")


def add_record_limit_option(parser: argparse.ArgumentParser, purpose: str) -> None:
    """``--limit N``: how many records a channel a command that counts them reads at the most
    (``rdss status``, ``rdss console``); ``purpose`` says what it counts them for."""
    parser.add_argument(
        "--limit",
        type=whole_number(1, 10_000_000),
        default=100_000,
        metavar="N",
        help=f"read at most N records a channel {purpose}",
    )


def add_consumer_group_option(parser: argparse.ArgumentParser, default: str, help: str) -> None:  # noqa: A002
    """``--group GROUP``: the consumer group a command reads as (``help`` says which), a name
    :func:`rdss.cli.common.group_name` checks, ``default`` unless given."""
    parser.add_argument("--group", type=group_name, default=default, help=f"{help} (default: {default})")


def add_rate_option(parser: argparse.ArgumentParser, *, what: str, help: str) -> None:  # noqa: A002
    """``--rate N``: how many a second, above 0 and at most :data:`MAX_RATE` (``what`` names
    them where a rate is refused, ``help`` says what is paced or priced)."""
    parser.add_argument("--rate", type=number(0, MAX_RATE, what=what), metavar="N", help=help)


def add_state_option(parser: argparse.ArgumentParser, *, metavar: str, help: str, default: str) -> None:  # noqa: A002
    """``--state``: where a command keeps what it must find again when it starts again (``help``
    says what), ``default`` where it is kept unless given (:func:`below_state_directory`)."""
    parser.add_argument("--state", type=Path, metavar=metavar, help=f"{help} (default: {default})")


def below_state_directory(path: str = "") -> str:
    """How a help says ``path`` below rdss's state directory, as
    :func:`rdss.host.statedir.state_directory` finds it."""
    below = f"/{path}" if path else ""
    return f"$XDG_STATE_HOME/rdss{below}, else ~/.local/state/rdss{below}"


def add_poll_interval_option(parser: argparse.ArgumentParser) -> None:
    """``--interval S``: how long a command that polls a channel waits between reads."""
    parser.add_argument("--interval", type=seconds(0, 3600), default=1.0, metavar="S", help="seconds between polls")


def add_stop_options(parser: argparse.ArgumentParser, *, idle: str) -> None:
    """``--count`` and ``--idle`` of a command that reads until stopped; ``idle`` says what it
    waits for (``without a message``)."""
    parser.add_argument("--count", type=_positive_int, metavar="N", help="stop after N records")
    parser.add_argument("--idle", type=_positive_float, metavar="S", help=f"stop after S seconds {idle}")


def add_service_options(parser: argparse.ArgumentParser, *, idle: str) -> None:
    """``--count``, ``--idle`` and ``--json`` of a service command that runs until stopped, then
    prints its figures (:func:`add_stop_options`), and how it logs."""
    add_stop_options(parser, idle=idle)
    add_json_option(parser, "print the final figures as JSON")
    add_logging_options(parser)


def add_sender_options(parser: argparse.ArgumentParser, application: str) -> None:
    """``--to CHANNEL`` and the gateway's options: a command that publishes through a gateway."""
    parser.add_argument("--to", dest="channel", default="input", metavar="CHANNEL", help="default: input")
    add_gateway_options(parser, application)


def add_gateway_options(parser: argparse.ArgumentParser, application: str) -> None:
    """``--url`` and ``--application``, for ``Gateway(deployment_url(args.url), application=args.application)``
    (:func:`rdss.cli.common.deployment_url`: ``--url``, else ``$RDSS_GATEWAY_URL``, else exit 2).
    """
    add_deployment_option(parser)
    parser.add_argument("--application", default=application, help=f"application name (default: {application})")
    add_logging_options(parser)


def add_logging_options(parser: argparse.ArgumentParser) -> None:
    """``--log-format``, ``--log-level`` and ``-v``: how a service command logs (:mod:`rdss.observability.outside`;
    :func:`rdss.cli.common.configure_service_logging` reads them)."""
    group = parser.add_argument_group("logging (default: RDSS_LOG_FORMAT, RDSS_LOG_LEVEL, else syslog at INFO)")
    group.add_argument("--log-format", choices=FORMATS, help="syslog (RFC 5424 to the local syslog), json or text")
    group.add_argument("--log-level", metavar="LEVEL", help="DEBUG, INFO, WARNING, ERROR")
    group.add_argument(
        "-v", "--verbose", action="count", default=0, help="log more: -v every message (INFO), -vv DEBUG"
    )


def add_tenant_options(parser: argparse.ArgumentParser, *, of: str, env: str | None = None) -> None:
    """``--tenant-jisc-id ID``: the tenantJiscID of the 4.0.0 messages a command writes (``of``
    says which); with ``env``, ``--env ENV`` too, the environment in cdk.json whose setting is the
    default (``env`` says what it is used for). :func:`tenant_jisc_id` reads them."""
    default = " (default: --env's setting)" if env is not None else ""
    parser.add_argument("--tenant-jisc-id", type=int, metavar="ID", help=f"tenantJiscID {of}{default}")
    if env is not None:
        parser.add_argument("--env", help=f"the environment in cdk.json whose tenant_jisc_id {env}")


def tenant_jisc_id(args: argparse.Namespace) -> int | None:
    """The tenantJiscID :func:`add_tenant_options` gives: ``--tenant-jisc-id``, else ``--env``'s
    ``tenant_jisc_id`` setting, else None.

    Raises:
        CommandError: ``--env`` names no environment of cdk.json, or cdk.json cannot be read (usage).
    """
    tenant: int | None = args.tenant_jisc_id
    if tenant is None and args.env:
        from rdss.deployment.settings import ConfigError, load_file

        try:
            tenant = load_file(args.env).tenant_jisc_id
        except (ConfigError, OSError) as error:
            raise CommandError(str(error)) from error
    return tenant
