"""``rdss status``: a deployment's state on one screen."""

from __future__ import annotations

import argparse
import time
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from rdss.cli.common import USAGE, CommandError, aws_deployment, print_json, whole_number
from rdss.cli.options import add_json_option, add_number_option, add_record_limit_option, deployment_command
from rdss.host.display import printable


def register(commands: Any) -> None:
    parser = deployment_command(
        commands, "status", run, help="a deployment's state at a glance: channels, lag, errors, parked batches"
    )
    add_json_option(parser, "one JSON object instead of the screen")
    parser.add_argument("--watch", action="store_true", help="refresh in place until interrupted (a terminal)")
    add_number_option(
        parser, "--interval", whole_number(1, 3600), default=5, metavar="SECONDS", help="--watch: between refreshes"
    )
    add_record_limit_option(parser, "to count it (a busier channel's count is a floor, shown with +)")


def run(args: argparse.Namespace) -> int:
    """A deployment's state, read from the deployment itself (the local runtime, LocalStack or
    AWS): per channel the records of the last hour and day; per consumer group the age of the
    oldest record it has not read (lag); the invalid and error channels by error code; the
    batches parked for rdss redrive; the open sequences; the vendors and what their roles may
    do; the newest archive object and the input records not archived since; the alarms in
    ALARM; the replays (rdss replay) and their progress. A source that cannot be read is
    named, and the rest still shows. Exit 2 if the deployment cannot be reached."""
    from rdss.status.snapshot import Snapshot

    target = aws_deployment(args.url, "status")
    snapshot = Snapshot(target.deployment, target.client, limit=args.limit)
    if args.watch and not args.json:
        return _watch(snapshot, args.interval)
    status = _take(snapshot)
    if args.json:
        print_json(status.as_dict(), indent=True)
    else:
        print("\n".join(lines(status.as_dict())))
    return 0


def _take(snapshot: Any) -> Any:
    try:
        status = snapshot.take()
    except (ClientError, BotoCoreError) as error:
        raise CommandError(str(error), USAGE) from error
    channels = [f"channel {c.name}" for c in snapshot.deployment.topology.channels]
    if "channels" in status.unread or all(name in status.unread for name in channels):
        # not one stream could be read: no deployment there to show (or none reachable)
        why = status.unread.get("channels") or status.unread[channels[0]]
        raise CommandError(f"cannot read deployment {snapshot.deployment.environment}: {why}", USAGE)
    return status


def _watch(snapshot: Any, interval: int) -> int:
    from rich.console import Console
    from rich.live import Live
    from rich.text import Text

    console = Console(emoji=False, highlight=False)
    with Live(console=console, auto_refresh=False) as live:
        while True:
            status = _take(snapshot)
            live.update(Text("\n".join(lines(status.as_dict()))), refresh=True)
            time.sleep(interval)


def lines(status: dict[str, Any]) -> list[str]:
    """The screen: every value that came from the deployment escaped (an error code or a key is
    whatever a producer or a peer wrote)."""
    out = [
        f"deployment {printable(status['environment'])} at {status['at']}",
        "",
        "channels        last hour   last day",
    ]
    for channel in status["channels"]:
        plus = "+" if channel["capped"] else ""
        out.append(f"  {channel['channel']:<12} {channel['lastHour']:>9,}{plus:1} {channel['lastDay']:>9,}{plus}")
    out.append("")
    if status["lag"]:
        out.append("consumer groups (oldest unread record)")
        for group in status["lag"]:
            owners = f", {len(group['owners'])} worker(s)" if group["owners"] else ", no worker"
            out.append(
                f"  {printable(group['group'])} on {group['channel']}: {_age(group['oldestUnreadSeconds'])} behind "
                f"({group['shards']} shard(s){owners})"
            )
    else:
        out.append("consumer groups: none has a checkpoint")
    for channel in ("invalid", "error"):
        codes = status["errorCodes"].get(channel, {})
        moved = status["movedByConsumers"].get(channel, 0)
        listed = ", ".join(f"{printable(code)} {count:,}" for code, count in sorted(codes.items()))
        extra = f"; moved by consumers {moved:,}" if moved else ""
        out.append(f"{channel} (last day): {listed or 'nothing'}{extra}")
    parked = ", ".join(f"{name} {count:,}" for name, count in status["parkedBatches"].items() if count)
    out.append(f"parked batches: {parked or 'none'}" + (" (rdss redrive puts them back)" if parked else ""))
    sequences = status["openSequences"]
    oldest = f", oldest {_age(sequences['oldestSeconds'])}" if sequences["oldestSeconds"] is not None else ""
    out.append(f"open sequences: {sequences['count']:,}{oldest}")
    vendors = status["vendors"]
    out.append(f"vendors: {', '.join(printable(name) for name in sorted(vendors)) or 'none'}")
    for name, access in sorted(vendors.items()):
        produces = ", ".join(access["produces"]) or "nothing"
        consumes = ", ".join(access["consumes"]) or "nothing"
        out.append(f"  {printable(name)}: puts on {produces}; reads {consumes}")
    for channel, newest in sorted(status["archives"].items()):
        out.append(f"archive of {channel}: newest s3://{printable(newest['bucket'])}/{printable(newest['key'])}")
    if status["archiveBacklog"] is not None:
        out.append(f"input records not archived yet: {status['archiveBacklog']:,}")
    out.append(f"alarms in ALARM: {', '.join(printable(a) for a in status['alarms']) or 'none'}")
    out.append(f"replays: {len(status['replays'])}" if status["replays"] else "replays: none")
    for replay in status["replays"]:
        selected = f" of {replay['selected']:,} selected" if replay["selected"] is not None else ""
        out.append(
            printable(
                f"  {replay['name']}: {replay['status']}, {replay['sent']:,} sent{selected} into {replay['into']}, "
                f"last {replay['updated']}"
            )
        )
    for source, why in sorted(status["unread"].items()):
        out.append(f"not read: {printable(source)}: {printable(why)}")
    return out


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
