"""``rdss bench ...``: the benchmarks of the hot paths (:mod:`rdss.bench`)."""

from __future__ import annotations

import argparse
import dataclasses
import statistics
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from rdss.cli.bench_model import add_reference_options, run_translate, run_validate
from rdss.cli.benchkit import at_least_one, bench_module, printed_as_json
from rdss.cli.common import CommandError, print_json, whole_number
from rdss.cli.options import MAX_RATE, Run, add_command, add_group, add_json_option, add_number_option, add_rate_option
from rdss.host.display import printable

#: ``bench cost --peer`` choices (rdss.cost.peers.PEERS, named here so the parser need not import it).
PEER_NAMES = ("sqs-powertools", "eventbridge", "msk-serverless")


def register(commands: Any) -> None:
    """Benchmark a hot path."""
    kinds = add_group(commands, "bench", register, help="benchmark a hot path", metavar="BENCHMARK")

    def benchmark(
        name: str, summary: str, run: Run, size: tuple[str, int, str], *, seed: int | None = None, rounds: int = 0
    ) -> argparse.ArgumentParser:
        """A benchmark's parser (``run``'s docstring is its description): its size option (flag,
        default, what is counted), --json, and the ``seed`` and timed ``rounds`` it takes by default."""
        flag, default, what = size
        parser = add_command(kinds, name, run, help=summary)
        add_number_option(parser, flag, whole_number(1, 100_000_000), default=default, help=what)
        add_json_option(parser, "print the figures as JSON")
        if seed is not None:
            parser.add_argument("--seed", type=whole_number(0), default=seed)
        if rounds:
            parser.add_argument(
                "--rounds", type=whole_number(1, 1000), default=rounds, help="timed passes; the median is reported"
            )
        return parser

    check = benchmark(
        "validate",
        "the classifier vs the reference validator and orjson",
        run_validate,
        ("--messages", 2000, "messages"),
        seed=7,
        rounds=5,
    )
    add_reference_options(check)
    benchmark(
        "translate",
        "the Message Translators, 3.0.2 <-> 4.0.0, beside the classifier",
        run_translate,
        ("--messages", 2000, "messages"),
        seed=7,
        rounds=5,
    )

    glue = benchmark(
        "glue",
        "the audit compaction job on local Spark vs one Python process",
        run_glue,
        ("--records", 1_000_000, "raw records"),
        seed=11,
    )
    glue.add_argument("--workdir", type=Path, metavar="DIR", help="where archives and outputs go (default: a temp dir)")
    glue.add_argument("--keep", action="store_true", help="keep the generated archives and outputs")
    add_number_option(
        glue,
        "--broken-every",
        whole_number(0),
        default=100,
        help="one broken copy of a message (the broker refuses it) per N records, and the errors archive "
        "the job reads beside the audit archive; 0: neither",
    )
    add_number_option(
        glue,
        "--repeat-every",
        int,
        default=1000,
        help="one archive entry per N archived a second time, as a restarted archiver does (the job counts "
        "each record once); 0: none",
    )

    stored = benchmark(
        "archive",
        "what archiving costs per record: entry bytes, gzip members, Firehose's billed bytes, CPU",
        run_archive,
        ("--messages", 10_000, "realistic messages"),
    )
    stored.add_argument("--seed", type=int, default=7)  # any integer, as it always took (not only from 0)

    broker = benchmark(
        "broker", "the broker handler on realistic Kinesis events", run_broker, ("--records", 2000, "messages")
    )
    add_number_option(broker, "--batch", whole_number(1, 10_000), default=1000, metavar="B", help="records per event")
    broker.add_argument("--stub-aws", action="store_true", help="answer AWS calls in memory: the CPU-only rate")

    send = benchmark(
        "send",
        "the gateway's batch send (PutRecords) against the emulator",
        run_send,
        ("--messages", 10_000, "messages"),
    )
    add_number_option(send, "--shards", whole_number(1, 64), default=2, metavar="S", help="shards of the input stream")
    send.add_argument("--realistic", action="store_true", help="the realistic mix (3.6 kB) instead of small messages")
    send.add_argument(
        "--journal",
        action="store_true",
        help="the embedded emulator keeps its journal (as rdss local up does), in a temporary state directory",
    )

    state = benchmark(
        "state",
        "put latency and snapshot time of a journalled emulator, before and after an rdss trace",
        run_state,
        ("--puts", 1000, "PutRecord calls per phase"),
    )
    add_number_option(
        state,
        "--compact-every",
        whole_number(1, 10_000_000),
        default=250,
        help="journalled requests between snapshots, as rdss local up's option",
    )

    amqp_url = "an amqp:// broker (default: $RDSS_AMQP_URL, else a private node)"
    amqp = benchmark(
        "amqp",
        "the RabbitMQ backend: publisher confirms, send_all, receive",
        run_amqp,
        ("--messages", 5000, "messages"),
    )
    amqp.add_argument("--url", help=amqp_url)
    amqp.add_argument("--small", action="store_true", help="small messages (~0.5 kB) instead of the realistic mix")
    bridge = benchmark(
        "bridge", "the Messaging Bridge, Kinesis (emulator) <-> RabbitMQ", run_bridge, ("--messages", 2000, "messages")
    )
    bridge.add_argument("--url", help=amqp_url)

    idle = add_command(kinds, "idle", run_idle, help="rdss local up's CPU while idle, in per cent of one core")
    add_number_option(idle, "--seconds", _window, default=30.0, metavar="S", help="the measured window")
    add_json_option(idle, "print the figures as JSON")

    cost = add_command(
        kinds, "cost", run_cost, help="what a deployment costs a month at a steady rate, item by item (or a peer's)"
    )
    cost.add_argument("--env", help="the environment in cdk.json (dev, staging, prod)")
    add_rate_option(
        cost,
        what="a number of messages per second",
        help=f"messages per second into input (above 0, at most {MAX_RATE:,})",
    )
    cost.add_argument("--peer", choices=PEER_NAMES, help="price this peer instead of the project")
    cost.add_argument(
        "--config",
        type=Path,
        metavar="PATH",
        help="a cdk.json holding the rdss context (default: the checkout's, or the copy the wheel carries)",
    )
    cost.add_argument(
        "--archive",
        choices=("batched", "per-record"),
        default="batched",
        help="the archive as the archiver writes it (batched, default) or Firehose reading each stream (per-record)",
    )
    cost.add_argument("--region", help="price at this region's list prices (default: the environment's region)")
    cost.add_argument(
        "--measure",
        action="store_true",
        help="measure the per-message figures and the per-call latency now (about 20 s)",
    )
    cost.add_argument(
        "--explain",
        action="store_true",
        help="print each item's formula and inputs, and what would flip the ranking against each peer",
    )
    cost.add_argument("--figures", action="store_true", help="print the per-message figures instead of a bill")
    cost.add_argument("--prices", action="store_true", help="print the price table instead of a bill")
    add_json_option(cost, "print the bill as JSON")

    coldstart = add_command(
        kinds,
        "coldstart",
        run_coldstart,
        help="each Lambda asset's zipped size and cold import time (Python 3.12; from a checkout)",
    )
    add_number_option(coldstart, "--rounds", whole_number(1, 1000), default=7, help="fresh processes per figure")
    coldstart.add_argument(
        "--logs",
        metavar="ENV",
        help="also report deployment ENV's Init Durations, from its functions' REPORT log lines",
    )
    add_json_option(coldstart, "print the figures as JSON")


def run_archive(args: argparse.Namespace) -> int:
    """Frame N realistic messages as archive entries, as the archiver does, and pack them into gzip members:
    bytes per entry, per member and as Firehose bills them (5 KB steps per record), and the CPU per entry."""
    at_least_one(args, "messages")
    return _shown(args, bench_module("archive").run(args.messages, seed=args.seed), _archive_text)


def _archive_text(figures: Any) -> Iterator[str]:
    yield (
        f"{figures.messages:,} realistic messages: {figures.raw_bytes_per_record:,.0f} bytes a record, "
        f"{figures.entry_bytes_per_record:,.0f} as an archive entry"
    )
    yield (
        f"  before entries Firehose billed {figures.billed_bytes_per_record_before:,.0f} bytes a record "
        f"(each rounded up to 5 KB) and S3 stored {figures.stored_bytes_per_record_before:,.0f}"
    )
    yield f"  one archiver invocation carries at most {figures.records_per_invocation_limit:,} of them (6 MB event)"
    yield "  records a batch   gzip bytes/record   records/Firehose record   billed bytes/record   CPU us/record"
    for batch in figures.batches:
        yield (
            f"  {batch.records:>15,}   {batch.member_bytes_per_record:>17,.0f}   {batch.records_per_member:>23,.1f}"
            f"   {batch.billed_bytes_per_record:>19,.0f}   {batch.microseconds_per_record:>13,.0f}"
        )


def run_broker(args: argparse.Namespace) -> int:
    """Invoke the broker handler - the AMGI app behind the Kinesis adaptor, exactly as deployed - on realistic
    event-source-mapping events of --batch records, against the embedded emulator (real HTTP for every AWS call; the
    local extra) or, with --stub-aws, clients answering in memory (the broker's own CPU cost). Records/s and AWS
    calls per 1,000 messages.
    """
    at_least_one(args, "records", "batch")
    return _shown(
        args, bench_module("broker").run(args.records, batch=args.batch, stub_aws=args.stub_aws), _broker_text
    )


def _broker_text(figures: Any) -> Iterator[str]:
    yield f"{figures.records:,} records in events of {figures.batch:,}, AWS: {figures.aws}"
    yield f"  {figures.records_per_second:>10,.0f} records/s ({figures.seconds:.2f} s)"
    yield _aws_calls(figures, "AWS data-plane calls per 1,000 messages")


def run_send(args: argparse.Namespace) -> int:
    """Send N messages through Gateway.send_all as a vendor's application does (classified, recorded TO_SEND and SENT
    in its own Local Data Repository, batched PutRecords) against the embedded emulator (the local extra), or
    $AWS_ENDPOINT_URL when set. Messages/s and calls per 1,000 messages.
    """
    at_least_one(args, "messages", "shards")
    figures = bench_module("send").run(
        args.messages, shards=args.shards, realistic=args.realistic, journal=args.journal
    )
    return _shown(args, figures, _send_text)


def _send_text(figures: Any) -> Iterator[str]:
    yield (
        f"{figures.messages:,} messages of {figures.mean_bytes:,.0f} bytes on average, Gateway.send_all, "
        f"{figures.shards} shard(s), AWS: {figures.aws}"
    )
    yield f"  {figures.messages_per_second:>10,.0f} messages/s ({figures.seconds:.2f} s)"
    yield (
        f"  {figures.put_records_per_1000:>10.1f} PutRecords calls per 1,000 messages "
        f"({figures.put_records_calls} for {figures.messages:,})"
    )
    yield _aws_calls(figures, "AWS calls per 1,000 messages in all")


def run_state(args: argparse.Namespace) -> int:
    """An embedded emulator keeping its journal and snapshots in a temporary state directory, as rdss local up
    does: PutRecord latency (p50, p99, one call at a time over HTTP) while the compactor snapshots every
    --compact-every requests, then one snapshot timed (in all, and how long writers waited); then rdss trace runs
    against it, and the same again. The local extra."""
    return _shown(args, bench_module("state").run(args.puts, compact_every=args.compact_every), _state_text)


def _state_text(figures: Any) -> Iterator[str]:
    yield (
        f"{figures.puts:,} PutRecord calls a phase (3.6 kB), a snapshot every {figures.compact_every:,} requests; "
        f"rdss trace between the phases ({figures.trace_seconds:.1f} s)"
    )
    yield "               put p50   put p99   put max   snapshots (failed)   snapshot s   writers waited s       bytes"
    for name, phase in (("before trace", figures.before), ("after trace", figures.after)):
        snapshot = (
            f"{phase.snapshot_seconds:>10.3f}   {phase.snapshot_paused:>16.3f}   {phase.snapshot_bytes:>9,}"
            if phase.snapshot_ok
            else f"{'failed':>10}"
        )
        yield (
            f"  {name:<12} {phase.p50_ms:>6.1f} ms {phase.p99_ms:>6.1f} ms {phase.max_ms:>6.1f} ms"
            f"   {phase.snapshots:>9} ({phase.failures})   {snapshot}"
        )


def run_idle(args: argparse.Namespace) -> int:
    """Start rdss local up (a temporary state directory), let it settle, and measure its CPU time
    (all threads) over a window: per cent of one core, target below 2 %."""
    try:
        figures = bench_module("idle").run(args.seconds)
    except RuntimeError as error:
        raise CommandError(str(error)) from error
    return _shown(args, figures, _idle_text)


def _idle_text(figures: Any) -> Iterator[str]:
    verdict = "below" if figures.percent_of_one_core < figures.as_dict()["target_percent"] else "NOT below"
    yield (
        f"rdss local up, idle: {figures.percent_of_one_core:.2f} % of one core "
        f"({figures.cpu_seconds:.2f} CPU-s in {figures.seconds:.1f} s, after {figures.settle_seconds:.0f} s to settle)"
        f"; {verdict} the 2 % target"
    )


def _window(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 1 <= seconds <= 3600:  # also refuses nan and inf
        raise argparse.ArgumentTypeError(f"{text} is out of range (1-3600 seconds)")
    return seconds


def run_amqp(args: argparse.Namespace) -> int:
    """Time the RabbitMQ backend on a real broker (--url or $RDSS_AMQP_URL; from a checkout, a private node is started
    when neither is given): send_all with Mosaic envelopes and plain RDSS JSON, the transport alone with publisher
    confirms, one publish and confirm at a time (the baseline), and receiving through a gateway. The amqp extra.
    """
    return _rates(args, lambda amqp: amqp.run(args.messages, url=args.url, realistic=not args.small))


def run_bridge(args: argparse.Namespace) -> int:
    """Time the Messaging Bridge moving N messages Kinesis (the embedded emulator) -> RabbitMQ (--url or
    $RDSS_AMQP_URL; from a checkout, a private node when neither is given) and back. The amqp and local extras.
    """
    return _rates(args, lambda amqp: amqp.run_bridge(args.messages, url=args.url))


def _rates(args: argparse.Namespace, measure: Callable[[Any], Any]) -> int:
    """The RabbitMQ benchmarks: message rates, one line each."""
    at_least_one(args, "messages")
    try:
        figures = measure(bench_module("amqp"))
    except RuntimeError as error:
        raise CommandError(str(error)) from error
    return _print_rates(args, figures)


def _shown(args: argparse.Namespace, figures: Any, text: Callable[[Any], Iterable[str]]) -> int:
    """A benchmark's figures: one JSON line with --json, else ``text``'s lines; exit code 0."""
    if not printed_as_json(args, figures.as_dict()):
        print("\n".join(text(figures)))
    return 0


def _aws_calls(figures: Any, what: str) -> str:
    """The AWS calls a benchmark made per 1,000 messages, and each API's count: the cost figure
    the broker and send benchmarks share."""
    calls = ", ".join(f"{name} {count}" for name, count in figures.calls.items())
    return f"  {figures.calls_per_1000:>10.1f} {what} ({calls})"


def _print_rates(args: argparse.Namespace, figures: Any) -> int:
    if printed_as_json(args, figures.as_dict()):
        return 0
    print(f"{figures.messages:,} messages of {figures.mean_bytes:,.0f} bytes on average, {figures.broker}")
    for what, rate in figures.rates.items():
        print(f"  {what:<42} {rate:>10,.0f} msg/s")
    return 0


def run_glue(args: argparse.Namespace) -> int:
    """Generate an audit archive as Firehose writes it (duplicates, malformed lines, sequences, broken copies the
    broker refused and the errors archive saying so), then time the audit compaction job on it as a user runs it
    (local Spark, start-up included), on a quarter of it to show how the cost grows, and the same work in one Python
    process (orjson and pyarrow). Needs the glue extra and a Java 17 JDK.
    """
    from rdss.bench import glue
    from rdss.host.resources import GlueUnavailable, glue_jobs_dir

    if args.records < 4:
        raise CommandError("--records must be at least 4")
    if args.repeat_every < 0:
        raise CommandError("--repeat-every must be 0 or more")
    try:
        glue_jobs_dir()  # what is missing is said before minutes of generating an archive for nothing
        figures = glue.run(
            args.records,
            seed=args.seed,
            workdir=args.workdir,
            keep=args.keep,
            broken_every=args.broken_every,
            repeat_every=args.repeat_every,
        )
    except GlueUnavailable as error:
        raise CommandError(str(error)) from error
    if printed_as_json(args, figures.as_dict()):
        return 0
    counts = figures.counts
    print(
        f"{figures.records:,} raw records in {figures.objects:,} objects, {figures.gzip_bytes / 1e6:,.1f} MB of gzip"
        f" ({figures.gzip_bytes / figures.records:.0f} bytes a record): {counts['messages']:,} messages,"
        f" {counts['duplicates']:,} duplicates, {counts['rejects']:,} rejects (malformed lines and broken copies),"
        f" {counts['archivedAgain']:,} entries archived again (each record counted once)"
    )
    if figures.errors_records:
        print(
            f"  errors archive: {figures.errors_records:,} records, matched by digest: {counts['brokerRejections']:,}"
        )
    print(
        f"  Spark job (local[*], start-up included)  {figures.spark_seconds:>7.1f} s"
        f"   {figures.spark_per_s:>9,.0f} records/s"
    )
    print(
        f"  Spark job on N/4 = {figures.quarter_records:,} records  {figures.quarter_seconds:>7.1f} s"
        f"   time(N)/time(N/4) = {figures.scaling_ratio:.2f} (linear = 4.00)"
    )
    print(
        f"  one Python process (orjson + pyarrow)    {figures.single_process_seconds:>7.1f} s"
        f"   {figures.single_process_per_s:>9,.0f} records/s"
        f"   Spark runs at {figures.single_process_seconds / figures.spark_seconds:.2f}x its speed"
    )
    busy = "unknown" if figures.busy_before is None else f"{figures.busy_before:.0%}"
    print(f"  machine: {figures.cores} cores, {busy} busy with other work just before the runs")
    return 0


def run_cost(args: argparse.Namespace) -> int:
    """The monthly bill of an environment (its cdk.json settings) at a steady rate of realistic
    messages, item by item, at the list prices of the deployment's region (rdss.cost.prices), or a
    peer's by the same rules."""
    from rdss.cost import estimate as cost
    from rdss.cost import peers as cost_peers
    from rdss.cost import prices
    from rdss.deployment.capacity import MEASURED
    from rdss.deployment.settings import load_file

    if args.prices:
        try:
            region = args.region or (load_file(args.env, args.config).region if args.env else prices.DEFAULT_REGION)
            listed = prices.table(region)
        except ValueError as error:
            raise CommandError(str(error)) from error
        table = {name: dataclasses.asdict(price) for name, price in listed.items()}
        if not printed_as_json(args, table):
            print(f"{region} list prices")
            for name, price in listed.items():
                print(f"{name:<38} {price.usd:>12,.7g} $ / {price.unit:<26} {price.source} ({price.as_of})")
        return 0
    # measuring runs the broker (Powertools' tracer: the `tracing` extra); the shipped figures need nothing
    figures = MEASURED
    if args.measure:
        measuring = bench_module("cost_measure")
        latency, _ = measuring.call_latency()
        figures = dataclasses.replace(measuring.measure(), call_seconds=round(latency, 6))
    if args.figures:
        print_json(figures.as_dict(), indent=not args.json)
        return 0
    if not args.env or args.rate is None:
        raise CommandError("--env and --rate are required (or --figures, --prices)")
    try:
        settings = load_file(args.env, args.config)
        if args.peer:
            bill = cost_peers.peer(args.peer, settings, args.rate, figures=figures, region=args.region)
        else:
            bill = cost.project(settings, args.rate, figures=figures, archive=args.archive, region=args.region)
    except ValueError as error:  # ConfigError included: no cdk.json, no such environment, a malformed one
        raise CommandError(str(error)) from error
    if printed_as_json(args, bill.as_dict()):
        return 0
    who = args.peer or f"rdss, {args.archive} archive"
    print(
        printable(  # the environment's name is the user's (a --config of their own)
            f"{who}: {args.env} settings at {args.rate:,g} messages/s ({bill.messages_per_month:,.0f} a month), "
            f"{bill.region} list prices as of {prices.AS_OF}"
        )
    )
    for item, dollars in sorted(bill.items.items(), key=lambda kv: -kv[1]):
        print(f"  {item:<44} {dollars:>12,.2f} $/month  {dollars / bill.total:6.1%}")
        if args.explain:
            for formula in bill.formulas.get(item, ()):
                print(f"      = {formula}")
    print(f"  {'total':<44} {bill.total:>12,.2f} $/month")
    print(f"  {'per million messages':<44} {bill.usd_per_million:>12,.4f} $")
    for note in bill.notes:
        print(f"  note: {note}")
    if args.explain and not args.peer:
        from rdss.cost import sensitivity

        for name in cost_peers.PEERS:
            line = sensitivity.line(settings, args.rate, name, figures=figures, region=args.region)
            print(f"  sensitivity: {line}")
    return 0


def run_coldstart(args: argparse.Namespace) -> int:
    """Build each Lambda asset as cdk synth builds it (stacks/bundling.py) and import its handler in fresh Python 3.12
    processes, beside importing boto3 alone from the same asset: zipped size and cold import time, the median of
    --rounds, and the ratio, the median of each round's (handler and reference timed back to back, in CPU time). It
    measures what the CDK app builds from the source tree, so it runs from a checkout (make setup), not from an
    installed package.
    """
    from rdss.bench import coldstart

    at_least_one(args, "rounds")
    try:
        figures = coldstart.run(args.rounds, logs=args.logs)
    except ModuleNotFoundError as error:
        if error.name is None or not error.name.startswith("stacks"):
            raise
        raise CommandError(
            "it measures the Lambda assets the CDK app (stacks/) builds, which an installed package does not hold: "
            "run it from a checkout, after make setup (.venv/bin/rdss bench coldstart)"
        ) from error
    if printed_as_json(args, [f.as_dict() for f in figures]):
        return 0
    print(
        f"Lambda assets (arm64, zipped) and handler cold imports (x86_64 twin, Python 3.12, median of {args.rounds}):"
    )
    for f in figures:
        print(
            f"  {f.function:<10} {f.zipped_bytes / 1e6:6.2f} MB, {f.package_files:>3} rdss files, "
            f"import {f.import_seconds * 1000:6.0f} ms vs boto3 alone {f.reference_seconds * 1000:5.0f} ms "
            f"({f.ratio:.2f}x)" + (_init_durations(f.init_durations_ms) if args.logs else "")
        )
    return 0


def _init_durations(durations: tuple[float, ...]) -> str:
    if not durations:
        return ", no Init Duration logged"
    ordered = sorted(durations)
    median = statistics.median(ordered)
    return f", Init Duration {median:.0f} ms (median of {len(ordered)}, {ordered[0]:.0f}-{ordered[-1]:.0f})"
