"""``rdss replay``: send archived records again, through the broker or to one consumer group."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from rdss.cli.common import (
    INVALID,
    CommandError,
    aws_deployment,
    aws_failures_are_usage,
    print_json,
    stop_on_signals,
    text,
)
from rdss.cli.options import add_group, add_json_option, add_rate_option, deployment_command
from rdss.cli.redrive import deployment_names
from rdss.host.display import printable, shorten
from rdss.model import timestamps


def register(commands: Any) -> None:
    """Replays: archived records sent again, each once per replay, with progress kept."""
    actions = add_group(
        commands, "replay", register, help="send archived records again: through the broker, or to one consumer group"
    )
    start = deployment_command(actions, "start", run_start, help="start (or resume) a replay")
    start.add_argument("name", metavar="NAME", type=text, help="the replay's name (resume it by starting it again)")
    start.add_argument("--since", required=True, metavar="T", help="RFC 3339: records that arrived from then")
    start.add_argument("--until", metavar="T", help="RFC 3339: ... until then (default: now)")
    start.add_argument("--channel", choices=("input", "invalid", "error"), default="input", help="default: input")
    start.add_argument("--type", dest="message_type", metavar="TYPE", type=text, help="only this messageType")
    start.add_argument("--code", metavar="CODE", type=text, help="only records with this errorCode")
    start.add_argument(
        "--id", dest="ids", action="append", default=[], metavar="MESSAGEID", type=text, help="only these (repeatable)"
    )
    start.add_argument(
        "--into", default="input", metavar="input|group:GROUP", type=text, help="where to send them (default: input)"
    )
    start.add_argument("--dry-run", action="store_true", help="count what would be sent; send nothing")
    add_rate_option(start, what="records/s", help="at most N records/s")
    add_json_option(start, "print the summary as JSON")

    listing = deployment_command(actions, "list", run_list, help="the replays and their status")
    add_json_option(listing, "as JSON")

    status = deployment_command(actions, "status", run_status, help="one replay's options, status and counts")
    status.add_argument("name", metavar="NAME", type=text)
    add_json_option(status, "as JSON")

    cancel = deployment_command(
        actions, "cancel", run_cancel, help="stop a replay: a running start stops at its next batch"
    )
    cancel.add_argument("name", metavar="NAME", type=text)


def _moment(option: str, value: str | None) -> datetime:
    try:
        return timestamps.parse(value) if value else timestamps.now()
    except ValueError as error:
        raise CommandError(f"{option}: {error}") from error


def _replayer(args: argparse.Namespace, command: str) -> Any:
    from rdss.processors.replay import Replayer

    target = aws_deployment(args.url, command)
    # the stack's names are read from AWS and its clients made, as redrive does: a client that
    # cannot be made (no region) or a stack out of reach is one line
    with aws_failures_are_usage():
        return Replayer(deployment_names(target), target.client)


def run_start(args: argparse.Namespace) -> int:
    """Select the archived records of --channel (input, invalid or error) that arrived between --since and --until
    (and of --type, with --code, or with one of the --id messageIds), read from the audit and errors archives in S3,
    and send each again: with --into input (the default) back through the broker, which routes it once more - marked
    by a messageHistory hop rdss-replay/NAME, claimed under the replay (not dropped as the duplicate of the message it
    was), against a grant written in the broker's table, which no producer can write; with --into group:GROUP straight
    onto its routed channel, where only GROUP's receivers take it (hop rdss-replay/NAME/GROUP). Progress is kept in the
    deployment's checkpoints table: start NAME again with the same options to resume an interrupted replay (nothing it
    sent is sent again). One run at a time: a start claims NAME while it runs (a second start is refused; a run killed
    outright holds it a minute at most). Ctrl-C or SIGTERM stops it at its next call to AWS, resumable. --dry-run
    counts; --rate bounds the pace. Exit 1 when records were refused.
    """
    from rdss.processors.replay import Selection, Spec

    try:
        selection = Selection(
            since=_moment("--since", args.since),
            until=_moment("--until", args.until),
            channel=args.channel,
            message_type=args.message_type,
            code=args.code,
            ids=tuple(args.ids),
        )
        spec = Spec(args.name, selection, args.into)
    except ValueError as error:
        raise CommandError(str(error)) from error
    replayer = _replayer(args, "replay")
    stop = stop_on_signals()
    bar = _Bar() if sys.stderr.isatty() and not args.json else None
    try:
        with aws_failures_are_usage():
            summary = replayer.run(
                spec, dry_run=args.dry_run, rate=args.rate, on_batch=bar.show if bar else None, stop=stop.is_set
            )
    except LookupError as error:  # ReplayExists, ReplayRunning, NotDeployed
        raise CommandError(str(error.args[0])) from error
    finally:
        if bar is not None:
            bar.close()
    if args.json:
        print_json(summary.as_dict())
    else:
        print(printable(summary.line()))
        for problem in summary.problems:
            print(printable(f"  refused: {problem}"))
    return INVALID if summary.failed else 0


class _Bar:
    """A progress line on a terminal (standard error), redrawn each batch."""

    def __init__(self) -> None:
        self.drawn = False

    def show(self, summary: Any) -> None:
        done = summary.sent + summary.already + summary.skipped
        print(
            f"\rreplay {printable(summary.name)}: {done} of {summary.selected} selected handled, {summary.sent} sent",
            end="",
            file=sys.stderr,
            flush=True,
        )
        self.drawn = True

    def close(self) -> None:
        if self.drawn:
            print(file=sys.stderr)


@contextmanager
def _checkpoints(replayer: Any) -> Iterator[None]:
    """Calls on the replays' progress, kept in the deployment's checkpoints table (what list,
    status and cancel read): AWS's failures are one line, and a table that is not there is named
    (the environment's name is most likely wrong), as ``rdss redrive`` names a queue."""
    from rdss.processors.replay_progress import NotDeployed

    try:
        with aws_failures_are_usage(), replayer.needs("checkpoints"):
            yield
    except NotDeployed as error:
        raise CommandError(str(error.args[0])) from error


def _no_such(name: str) -> int:
    print(printable(f"no replay {shorten(name, 60)}"), file=sys.stderr)
    return INVALID


def _named(name: str) -> bool:
    """Whether ``name`` can name a replay (one that cannot is not looked for)."""
    from rdss.model.replay import NAME

    return NAME.match(name) is not None


def run_list(args: argparse.Namespace) -> int:
    """The replays of the deployment (kept 35 days after their last change), each with its status and counts."""
    replayer = _replayer(args, "replay list")
    with _checkpoints(replayer):
        rows = replayer.progress.list()
    if args.json:
        print_json(rows)
    elif not rows:
        print("no replays")
    for row in rows if not args.json else ():
        print(printable(_describe(row)))
    return 0


def _describe(row: dict[str, Any]) -> str:
    held = row.get("leaseUntil")
    return (
        f"{row['name']}: {row.get('status')}, {row.get('sent', 0)} sent"
        + (f" of {row['selected']} selected" if "selected" in row else "")
        + f", started {row.get('created')}, last {row.get('updated')}"
        + (f", held by run {row.get('leaseOwner')} until {timestamps.format(_epoch(held))}" if held else "")
    )


def _epoch(seconds: int) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def run_status(args: argparse.Namespace) -> int:
    """One replay: its options (selection and target), status, the records it selected and sent. Exit 1 when there
    is no replay of that name."""
    if not _named(args.name):
        return _no_such(args.name)
    replayer = _replayer(args, "replay status")
    with _checkpoints(replayer):
        row = replayer.progress.get(args.name)
    if row is None:
        return _no_such(args.name)
    if args.json:
        print_json(row)
    else:
        print(printable(_describe(row)))
        print(printable(f"  options: {row.get('options')}"))
    return 0


def run_cancel(args: argparse.Namespace) -> int:
    """Cancel a replay: a start running it stops before its next batch, and it cannot be resumed (what it sent stays
    sent). Exit 1 when there is no replay of that name."""
    if not _named(args.name):
        return _no_such(args.name)
    replayer = _replayer(args, "replay cancel")
    with _checkpoints(replayer):
        found = replayer.progress.cancel(args.name)
    if not found:
        return _no_such(args.name)
    print(printable(f"replay {args.name} cancelled"))
    return 0
