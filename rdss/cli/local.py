"""``rdss local up`` and ``rdss local demo``: the embedded runtime from the command line."""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rdss.cli.common import CommandError, configure_service_logging
from rdss.cli.options import (
    add_command,
    add_group,
    add_logging_options,
    add_number_option,
    add_state_option,
    below_state_directory,
)
from rdss.host import pointers as localstate
from rdss.local import KEPT_DEMO_ENVIRONMENT


def register(commands: Any) -> None:
    """The whole system on this machine: moto's server as AWS (real HTTP, real boto3 calls), the streams, tables
    and buckets of the topology the CDK app deploys, the broker and sequencer behind the project's event source
    mapping, Firehose and the sweep. Needs the local extra."""
    actions = add_group(
        commands, "local", register, help="run the whole system on this machine (no AWS account, no Docker)"
    )

    up = add_command(actions, "up", run_up, help="start the embedded runtime and serve until interrupted")
    up.add_argument(
        "--port",
        type=_port,
        help="loopback port for the embedded AWS, 0-65535 (0: a free one; default: the port this state directory "
        "served on before, else a free one, kept for the next start)",
    )
    up.add_argument("--env", type=_environment, default="local", help="deployment name (default: local)")
    up.add_argument(
        "--shards", type=_shards, default=2, help=f"shards per stream, 1-{MAX_SHARDS} (default 2; kept from the state)"
    )
    add_state_option(
        up,
        metavar="DIR",
        help="where the emulator's journal, snapshot and the pollers' positions are kept",
        default=below_state_directory("local/ENV"),
    )
    up.add_argument("--fresh", action="store_true", help="forget what the state directory holds and start empty")
    up.add_argument(
        "--salvage",
        action="store_true",
        help="when the state is damaged, start from what is intact (the damaged files are kept, and what is lost is "
        "listed beside them) instead of refusing to start",
    )
    add_number_option(
        up, "--compact-every", _compaction, default=5000, help="journalled requests between snapshots of the state"
    )
    add_logging_options(up)
    up.add_argument(
        "--vendor",
        action="append",
        default=[],
        metavar="NAME:produces|NAME:consumes=CHANNEL,...",
        help="let a vendor in (a role, as cdk.json's vendors make; rdss vendor config NAME prints its gateway "
        "configuration); :reads=4.0.0 for the Message API version its application reads; repeatable",
    )

    demo = add_command(
        actions, "demo", run_demo, help="publish a workload, let the system run, report where everything went"
    )
    demo.add_argument("--messages", type=Path, metavar="DIR", help="publish each file's bytes as one record instead")
    demo.add_argument("--report", type=Path, metavar="FILE", help="write the JSON report there")
    demo.add_argument("--no-analytics", action="store_true", help="skip the Glue jobs (local Spark)")
    demo.add_argument(
        "--keep",
        action="store_true",
        help=f"keep the deployment (channels, tables, archives) when the demo ends: its state is kept in --state, "
        f"and rdss local up --env {KEPT_DEMO_ENVIRONMENT} serves it again for rdss trace and every other command (on "
        "AWS_ENDPOINT_URL it is left there)",
    )
    add_state_option(
        demo,
        metavar="DIR",
        help="with --keep: where",
        default=f"where rdss local up --env {KEPT_DEMO_ENVIRONMENT} looks, "
        + below_state_directory(f"local/{KEPT_DEMO_ENVIRONMENT}"),
    )


def _quiet_processors(level: str = "WARNING") -> None:
    """The processors log JSON and emit EMF metrics on stdout, as they must in Lambda; on a
    terminal that would bury the summary. Lines at ``level`` and above still show; either can
    be set back (POWERTOOLS_METRICS_DISABLED, POWERTOOLS_LOG_LEVEL)."""
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", level)
    # Powertools filters its own logger's records out of the root handlers it finds (against
    # duplicates in Lambda); here the root handler is the only one they have (logs.adopt).
    os.environ.setdefault("POWERTOOLS_LOG_DEDUPLICATION_DISABLED", "true")


def run_demo(args: argparse.Namespace) -> int:
    """Start a fresh local runtime, publish a workload (every message type and class, replies, one invalid
    message per error code, an oversize and an expired message, duplicates, a multi-message sequence; or each
    file of --messages DIR as one record), wait until nothing moves, account for every input from the channels,
    the Local Data Repository and the archives, run the Glue jobs on local Spark (the glue extra and a JDK; else
    they are skipped, saying why) and print the summary. Everything it made goes when it ends, unless --keep.
    Exit 1 if an input is unaccounted for."""
    _quiet_processors("ERROR")  # the report says where every message went, the moves included
    from rdss.local import demo
    from rdss.local.state import StateError, default_directory

    if args.messages is not None and not args.messages.is_dir():
        raise CommandError(f"--messages: {args.messages} is not a directory")
    if args.state is not None and not args.keep:
        raise CommandError("--state says where --keep keeps the deployment: give --keep too")
    keep = (args.state or default_directory(KEPT_DEMO_ENVIRONMENT)) if args.keep else None
    try:
        body = demo.run(messages_dir=args.messages, report=args.report, analytics=not args.no_analytics, keep=keep)
    except FileNotFoundError as error:
        raise CommandError(str(error)) from error
    except StateError as error:
        raise CommandError(f"--keep: {error}") from error
    # "pending": a part the sequencer holds (checked in its table) until its sequence completes
    # or times out - a place, not a loss. Only a record found nowhere fails the demo.
    unaccounted = [i for i in body["inputs"] if i["outcome"] == "unaccounted"]
    return 1 if unaccounted else 0


def run_up(args: argparse.Namespace) -> int:
    """Start the embedded runtime (moto's server, the processors, Firehose, the sweep) and serve until
    interrupted. State is kept on disk: after a crash or a stop, the next start on the same --state has every
    message it acknowledged, and takes connections only once it has. While it serves, the commands that talk to
    a deployment (send, tail, request, trace, redrive, vendor config, bridge, archive, adaptor) and Gateway()
    use it when no --url or RDSS_GATEWAY_URL names another: its state file
    ($XDG_STATE_HOME/rdss/running/PID.json) says where it is and how to sign in, so no AWS_* export is needed;
    with several running, --local ENV|DIR picks one. Damaged state is refused, naming what is lost (--salvage
    starts from what is intact)."""
    vendors = _vendors(args.vendor, args.env)  # a malformed one is said before anything starts
    _quiet_processors()
    configure_service_logging(args, "rdss-local")
    from rdss.observability import outside as logs
    from rdss.observability.powertools import logger as processors

    logs.adopt(processors.name)  # the broker's and sequencer's lines go where the runtime's go

    from rdss.local.damage import StateDamaged
    from rdss.local.emulator import Emulator
    from rdss.local.positions import Positions
    from rdss.local.runtime import Runtime, Settings
    from rdss.local.server import PortUnavailable
    from rdss.local.snapshot import SnapshotError
    from rdss.local.state import StateDirectory, StateError, default_directory

    try:
        state = StateDirectory(args.state or default_directory(args.env), fresh=args.fresh)
    except StateError as error:
        raise CommandError(str(error)) from error
    kept_port = state.stored_port()
    port = args.port if args.port is not None else (kept_port or 0)
    try:
        # the port first, so that a port in use is said at once; connections wait for open()
        emulator = Emulator(port=port, state=state, compact_every=args.compact_every, salvage=args.salvage)
    except PortUnavailable as error:
        state.close()
        if args.port is None and kept_port:
            raise CommandError(
                f"{error} (the port this state directory served on, kept in {state.path / 'port'} so that the URLs "
                "printed for it stay right): stop what holds it, or give --port"
            ) from error
        raise CommandError(f"--port: {error}") from error
    try:
        recovery = emulator.recover()
        positions = Positions(state)
    except (SnapshotError, StateDamaged) as error:
        emulator.public.close()
        state.close()
        if isinstance(error, StateDamaged):
            raise CommandError(str(error)) from error
        raise CommandError(
            f"snapshot {state.snapshot}: {error}: start with --fresh, or with the rdss and moto that wrote it"
        ) from error
    state.keep_port(emulator.public.port)
    runtime = Runtime(
        emulator.private_endpoint(),
        Settings(environment=args.env, shards=args.shards, vendors=vendors),
        positions=positions,
    )
    try:
        runtime.provision()
        runtime.start()
        try:
            endpoint = emulator.open()
        except PortUnavailable as error:
            raise CommandError(f"--port: {error}") from error
        # what the other commands find it by, until we stop
        pointer = localstate.record(endpoint, runtime.deployment, state.path)
        _banner(endpoint, runtime, state.path, recovery, vendors, pointer)
        # Installed before saying so: whoever reads that line may stop us at once. The handler
        # only notes the signal, and the main thread polls for it: the kernel may deliver
        # SIGTERM to any of the runtime's threads, and Python runs handlers only in the main
        # thread, so one blocked for good (an Event.wait() without timeout) would never see it.
        received: list[int] = []
        signal.signal(signal.SIGTERM, lambda signum, _frame: received.append(signum))
        print("broker, sequencer, sweep and Firehose are running; Ctrl-C stops", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while not received:
                time.sleep(0.2)
    finally:
        emulator.public.close()  # nothing new comes in while the pumps deliver what they hold
        runtime.stop()
        emulator.stop()
        state.close()
    return 0


def _vendors(specs: list[str], environment: str) -> dict[str, Any]:
    """``--vendor`` NAME:produces|NAME:consumes=... of the deployment ``environment``: each name one
    IAM and CloudFormation accept, its role's within IAM's limit, and no two sharing stack outputs."""
    from rdss.deployment.topology import Deployment
    from rdss.deployment.vendors import check_vendor_name, check_vendor_names
    from rdss.local.vendor_stack import parse_vendor

    try:
        vendors = dict(parse_vendor(spec) for spec in specs)
    except ValueError as error:
        raise CommandError(f"--vendor {error}") from error
    try:
        for name in vendors:
            check_vendor_name(name, Deployment(environment))
        check_vendor_names(vendors)
    except ValueError as error:
        raise CommandError(f"--vendor: {error}") from error
    return vendors


def _banner(
    endpoint: Any, runtime: Any, state: Path, recovery: Any, vendors: dict[str, Any], pointer: Path | None
) -> None:
    from rich.console import Console

    from rdss.host.display import rich_text as line  # paths and names as written: never markup, never an escape

    console = Console(highlight=False)
    deployment = runtime.deployment
    console.rule("[bold]RDSS local runtime")
    console.print(line("endpoint   ", (endpoint.url, "cyan"), f"  (region {endpoint.region})"))
    if recovery.snapshot_index or recovery.replayed:
        kept = line(
            f"recovered in {recovery.seconds:.1f} s: snapshot of {recovery.snapshot_index:,} requests, "
            f"{recovery.replayed:,} replayed from the journal"
        )
        if recovery.diverged:
            kept.append(f", {recovery.diverged} answered otherwise than before", "red")
    else:
        kept = line("new")
    console.print(line("state      ", str(state), "  (").append_text(kept).append(")"))
    if recovery.salvaged:
        console.print(line(("salvaged", "red"), f": {recovery.salvaged}"))
    if pointer is not None:
        console.print(line(f"rdss and Gateway() find it by themselves (state file {pointer});"))
        others = [s for s in localstate.running() if s.pid != os.getpid()]
        if others:
            console.print(
                line(
                    f"{len(others)} other local runtime(s) run: the commands take --local "
                    f"{runtime.deployment.environment} or --local {state} to pick this one"
                )
            )
    console.print("point the AWS CLI or boto3 at it (or rdss under another state directory):")
    for name, value in endpoint.environment().items():
        console.print(line(f"  export {name}={value}"))
    console.print(line(f"  export RDSS_GATEWAY_URL='kinesis://{deployment.environment}?endpoint={endpoint.url}'"))
    console.print("channels (Kinesis streams):")
    for channel in deployment.topology.channels:
        console.print(line(f"  {channel.name:<11} {deployment.stream(channel.name)}"))
    console.print(line("tables: " + ", ".join(deployment.table(t.name) for t in deployment.topology.tables)))
    console.print(line("buckets: " + ", ".join(deployment.bucket(b.name) for b in deployment.topology.buckets)))
    for name in vendors:
        console.print(line(f"vendor {name}: rdss vendor config {name}"))


#: Seven streams of 50 shards hold 350, within an account's default quota of 500 shards.
MAX_SHARDS = 50


def _integer_in(low: int, high: int, refused: str) -> Callable[[str], int]:
    """An argparse ``type``: a whole number from ``low`` to ``high``; ``refused`` follows the
    text given in the error otherwise."""

    def parse(text: str) -> int:
        value = _integer(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text} {refused}")
        return value

    return parse


_port = _integer_in(0, 65535, "is not a port (0-65535)")
_shards = _integer_in(1, MAX_SHARDS, f"is out of range (1-{MAX_SHARDS})")
_compaction = _integer_in(1, 10_000_000, "is out of range (1-10,000,000)")


def _environment(text: str) -> str:
    """A deployment name fit for every resource name (S3's are the strictest) and a directory."""
    if not re.fullmatch(r"[a-z0-9](?:[a-z0-9-]{0,30}[a-z0-9])?", text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a deployment name (lower-case letters, digits and inner hyphens, at most 32)"
        )
    return text


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
