"""``rdss local demo``: the whole system on this machine, end to end, with a report.

Starts the embedded AWS, provisions the deployment, publishes a workload (built in, or one
record per file of a directory, bytes unchanged, in file-name order), lets broker, sequencer,
sweep and the Firehose delivery streams run until nothing moves, accounts for every input
from what the system left behind, runs the Glue jobs locally on the archive and prints a
summary. The report (``--report``) follows the contract::

    {"inputs": [{"file", "records", "outcome", "channels", "errorCode"}],
     "channels": {"<name>": <records>}, "audit": {"objects": n, "records": n}, "analytics": {...}}
"""

from __future__ import annotations

import tempfile
import time
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from rdss import messages
from rdss.local.accounting import Accounting, Input, account
from rdss.local.emulator import Endpoint, connect
from rdss.local.runtime import Runtime, Settings
from rdss.resources import examples_dir
from rdss.sequences import split
from rdss.workload import Workload


def builtin_inputs(bulk: int = 300) -> list[tuple[str, list[bytes]]]:
    """A realistic workload: every type and class, replies, invalid messages of every code,
    duplicates, a deposit too large for one message (sent as a sequence through the splitter)
    and a bulk of ordinary traffic."""
    # published in the minutes before now, so publish-to-archive latency reads as it would live
    workload = Workload(2026, generator="rdss-demo-1.0.0", base_time=datetime.now(UTC), spread=timedelta(seconds=30))
    items: list[tuple[str, list[bytes]]] = []
    named: dict[str, dict[str, Any]] = {}
    for message_type, message_class, _ in _PAIRS:
        message = workload.message(message_type, message_class)
        if message_class == "Document" and message_type in ("MetadataRead", "VocabularyRead"):
            request = named[f"{_kebab(message_type)}-command"]
            message = messages.reply(request, message["messageBody"], generator=workload.generator)
        name = f"{_kebab(message_type)}-{message_class.lower()}"
        named[name] = message
        items.append((name, [orjson.dumps(message)]))
    for path in sorted((examples_dir() / "invalid").glob("*.json")):
        code = path.name.split("-", 1)[0]
        if not any(existing.startswith(f"invalid/{code}") for existing, _ in items):
            # as the file is, indented: the archive keeps each record whole whatever it holds
            items.append((f"invalid/{path.name}", [path.read_bytes()]))
    oversize = workload.large(1_000_100)
    items.append(("oversize-deposit", [orjson.dumps(oversize)]))
    for name in ("metadata-create-event", "vocabulary-patch-event", "metadata-delete-event"):
        items.append((f"duplicate-of-{name}", [orjson.dumps(named[name])]))
    deposit = workload.large(2_500_000)
    parts = split(deposit)
    items.append((f"large-deposit ({len(parts)}-part sequence)", [orjson.dumps(p) for p in parts]))
    for index, message in enumerate(workload.mix(bulk)):
        items.append((f"bulk-{index:04d}", [orjson.dumps(message)]))
    return items


def file_inputs(directory: Path) -> list[tuple[str, list[bytes]]]:
    """One record per file, bytes unchanged, in file-name order."""
    files = sorted(p for p in directory.iterdir() if p.is_file())
    if not files:
        raise FileNotFoundError(f"no files in {directory}")
    return [(p.name, [p.read_bytes()]) for p in files]


def run(
    *,
    messages_dir: Path | None = None,
    report: Path | None = None,
    analytics: bool = True,
    console: Console | None = None,
    endpoint: Endpoint | None = None,
) -> dict[str, Any]:
    console = console or Console()
    started = time.monotonic()
    console.rule("[bold]RDSS messaging: the whole system on this machine")
    owned = endpoint is None
    endpoint = endpoint or connect()
    where = "embedded moto server" if endpoint.embedded else "AWS_ENDPOINT_URL"
    console.print(f"AWS: {where} at [cyan]{endpoint.url}[/]")
    runtime: Runtime | None = None
    try:
        settings = Settings(environment=f"demo{uuid.uuid4().hex[:6]}", firehose_buffer_seconds=2.0)
        runtime = Runtime(endpoint, settings)
        with console.status("provisioning streams, tables and buckets from the topology..."):
            runtime.provision()
        items = file_inputs(messages_dir) if messages_dir else builtin_inputs()
        source = f"{messages_dir}" if messages_dir else "the built-in workload"
        payloads = [p for _, records in items for p in records]
        published = runtime.publish(payloads)
        console.print(f"published {len(items)} input(s), {len(payloads)} record(s) from {escape(source)}")
        for record in published:
            if record.refused is not None:
                console.print(f"[red]refused by the stream[/]: {escape(f'{record.refused[0]} {record.refused[1]}')}")
        inputs, cursor = [], 0
        for name, records in items:
            inputs.append(Input(name, published[cursor : cursor + len(records)]))
            cursor += len(records)
        with console.status("broker, sequencer, sweep and Firehose at work..."):
            runtime.drain()
        result = account(runtime, inputs)
        traced = _trace_one(runtime, result)
        summary: dict[str, Any] = {"skipped": "disabled"} if not analytics else {}
        if analytics:
            with console.status("running the Glue jobs on the archive with local Spark..."):
                summary = _analytics(runtime)
        body = {
            "inputs": [a.as_report() for a in result.inputs],
            "channels": result.channels,
            "audit": _audit(result, sum(1 for p in published if p.refused is None)),
            "analytics": summary,
        }
        if traced is not None:
            body["trace"] = traced
        _render(console, result, body, time.monotonic() - started, messages_dir is None)
        if report is not None:
            report.parent.mkdir(parents=True, exist_ok=True)
            report.write_bytes(orjson.dumps(body, option=orjson.OPT_INDENT_2) + b"\n")
            console.print(f"report written to [cyan]{report}[/]")
        return body
    finally:
        if runtime is not None and owned and endpoint.embedded:
            runtime.stop()  # the embedded server goes, and everything in it
        elif runtime is not None:  # an endpoint someone else runs (LocalStack, an account) keeps nothing of it
            runtime.deprovision()
        if owned:
            endpoint.stop()


def _trace_one(runtime: Runtime, result: Accounting) -> dict[str, Any] | None:
    """``rdss trace`` on one input, the most telling there is: a message some records of which
    were dropped as duplicates or found invalid, else one moved to invalid, else a sequence."""
    from rdss.trace import Tracer

    by_id: dict[str, set[str]] = {}
    for item in result.inputs:
        if item.message_id:
            by_id.setdefault(item.message_id, set()).add(item.outcome)
    ranked = sorted(
        (i for i in result.inputs if i.message_id),
        key=lambda i: (
            len(by_id[i.message_id or ""]) < 2,  # records of one id that went different ways
            i.outcome != "invalid",
            i.records < 2,
        ),
    )
    if not ranked:
        return None
    chosen = ranked[0]
    assert chosen.message_id is not None
    endpoint = runtime.endpoint
    tracer = Tracer(
        runtime.deployment,
        kinesis=endpoint.client("kinesis"),
        dynamodb=endpoint.client("dynamodb"),
        s3=endpoint.client("s3"),
    )
    timeline = tracer.trace(chosen.message_id)
    url = f"kinesis://{runtime.deployment.environment}" + (f"?endpoint={endpoint.url}" if endpoint.url else "")
    return {
        "input": chosen.name,
        "command": f"rdss trace {chosen.message_id} --url '{url}'",
        "lines": timeline.lines(),
        "timeline": timeline.as_dict(),
    }


def _audit(result: Accounting, published: int) -> dict[str, Any]:
    audit: dict[str, Any] = {"objects": result.audit_objects, "records": len(result.audit_records)}
    if result.audit_repeats:
        audit["archivedAgain"] = result.audit_repeats  # copies of records already counted, left out
    if len(result.audit_records) != published:
        audit["published"] = published
        audit["note"] = "the audit archive does not hold every record published once"
    return audit


def _analytics(runtime: Runtime) -> dict[str, Any]:
    """The Glue jobs, run locally on a copy of the archives (:mod:`rdss.analytics.jobs`)."""
    from rdss.analytics.jobs import Layout, export_archives, run_jobs
    from rdss.resources import GlueUnavailable

    s3 = runtime.endpoint.client("s3")
    with tempfile.TemporaryDirectory(prefix="rdss-archive-") as scratch:
        layout = Layout(Path(scratch))
        export_archives(s3, {name: runtime.deployment.bucket(name) for name in ("audit", "errors")}, layout)
        try:
            return run_jobs(layout)
        except GlueUnavailable as error:
            return {"skipped": str(error)}


def _render(console: Console, result: Accounting, body: dict[str, Any], seconds: float, builtin: bool) -> None:
    table = Table(title="Inputs and where they went", show_lines=False)
    for column in ("input", "records", "outcome", "channels", "errorCode"):
        table.add_column(column, overflow="fold")
    colours = {"routed": "green", "duplicate": "blue", "invalid": "yellow", "error": "red", "refused": "red"}
    shown = [a for a in result.inputs if not (builtin and a.name.startswith("bulk-"))]
    for item in shown:
        colour = colours.get(item.outcome, "magenta")
        table.add_row(  # file names and codes as they are: no markup of theirs is interpreted
            escape(item.name),
            str(item.records),
            f"[{colour}]{item.outcome}[/]",
            ", ".join(item.channels),
            escape(item.error_code or ""),
        )
    hidden = len(result.inputs) - len(shown)
    if hidden:
        bulk = Counter(a.outcome for a in result.inputs if a.name.startswith("bulk-"))
        table.add_row(
            f"bulk traffic ({hidden} messages)", str(hidden), ", ".join(f"{k} {v}" for k, v in bulk.items()), "", ""
        )
    console.print(table)
    channels = Table(title="Channels (records)")
    for name in body["channels"]:
        channels.add_column(name, justify="right")
    channels.add_row(*[f"{n:,}" for n in body["channels"].values()])
    console.print(channels)
    outcomes = result.outcomes()
    console.print(
        "[bold]Accounted[/]: "
        + ", ".join(f"{outcomes.get(o, 0)} {o}" for o in ("routed", "invalid", "error", "duplicate", "refused"))
        + (
            f", {outcomes['pending']} pending (parts held by the sequencer until the rest of their sequence"
            " arrives or the sweep times them out)"
            if outcomes.get("pending")
            else ""
        )
        + (f", [red]{outcomes['unaccounted']} unaccounted[/]" if outcomes.get("unaccounted") else "")
        + f" - audit archive: {body['audit']['objects']} object(s), {body['audit']['records']:,} record(s)"
    )
    if "trace" in body:
        trace = body["trace"]
        console.print(
            f"[bold]Where one message went[/] ({escape(trace['input'])}): [cyan]{escape(trace['command'])}[/]"
        )
        timeline: list[str] = trace["lines"]
        if len(timeline) > 24:
            more = f"... {len(timeline) - 20} more (the report has them all)"
            timeline = [*timeline[:18], more, *timeline[-2:]]
        for line in timeline:
            console.print(f"  {line}", markup=False, highlight=False)
    analytics = body["analytics"]
    if "skipped" in analytics:
        console.print(f"[bold]Analytics[/]: skipped ({analytics['skipped']})")
    else:
        _render_analytics(console, analytics)
    console.rule(f"[bold green]done in {seconds:.0f} s")


def _render_analytics(console: Console, analytics: dict[str, Any]) -> None:
    """The report job's summary.json, as an analyst would first look at it."""
    console.print(
        f"[bold]Analytics[/] (the Glue jobs on local Spark, {analytics.get('sparkSeconds')} s): "
        f"{analytics.get('received', 0):,} records received, {analytics.get('messages', 0):,} unique messages, "
        f"{analytics.get('rejects', {}).get('total', 0)} rejected records, "
        f"duplicate rate {_percent(analytics.get('duplicates', {}).get('rate'))}, "
        f"{analytics.get('incompleteSequences', 0)} incomplete sequence(s)"
    )
    volume = Table(title="Volume per message type")
    volume.add_column("messageType")
    volume.add_column("messages", justify="right")
    for name, count in sorted(analytics.get("volume", {}).get("messageType", {}).items()):
        volume.add_row(name, f"{count:,}")
    errors = Table(title="Invalid and error rates")
    for column in ("channel", "errorCode", "records", "rate"):
        errors.add_column(column, justify="right" if column in ("records", "rate") else "left")
    for channel, codes in sorted(analytics.get("errors", {}).items()):
        for code, figures in sorted(codes.items()):
            errors.add_row(channel, code, str(figures.get("records")), _percent(figures.get("rate")))
    latency = analytics.get("latencySeconds", {})
    console.print(volume, errors)
    console.print(
        "publish-to-archive latency: "
        + ", ".join(f"{k} {v:.1f} s" for k, v in latency.items() if isinstance(v, (int, float)))
    )


def _percent(value: Any) -> str:
    return f"{value:.2%}" if isinstance(value, (int, float)) else "-"


_PAIRS = (
    ("MetadataCreate", "Event", "metadata"),
    ("MetadataCreate", "Command", "metadata"),
    ("MetadataUpdate", "Event", "metadata"),
    ("MetadataUpdate", "Document", "metadata"),
    ("MetadataDelete", "Event", "metadata"),
    ("MetadataRead", "Command", "metadata"),
    ("MetadataRead", "Document", "responses"),
    ("VocabularyRead", "Command", "vocabulary"),
    ("VocabularyRead", "Document", "responses"),
    ("VocabularyPatch", "Event", "vocabulary"),
)


def _kebab(name: str) -> str:
    return "".join("-" + c.lower() if c.isupper() else c for c in name).lstrip("-")
