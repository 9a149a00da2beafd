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

import os
import shlex
import tempfile
import time
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
from rich.console import Console
from rich.table import Table

from rdss.host.display import rich_text as line
from rdss.host.resources import examples_dir
from rdss.local import KEPT_DEMO_ENVIRONMENT
from rdss.local.accounting import Accounting, Input, account
from rdss.local.emulator import Endpoint, connect
from rdss.local.positions import Positions
from rdss.local.runtime import Runtime, Settings
from rdss.local.state import StateDirectory, default_directory
from rdss.model import messages
from rdss.model.sequences import split
from rdss.model.workload import Workload


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
    keep: Path | None = None,
) -> dict[str, Any]:
    """The demo, end to end; its report. With ``keep`` (a state directory) the deployment stays
    when it ends: on the embedded emulator journalled there, for ``rdss local up --env demo`` to
    serve again (archives, channels, tables and all); on an endpoint someone else runs, left in
    place instead of deleted.

    Raises:
        FileNotFoundError: ``messages_dir`` holds no file.
        rdss.local.state.StateError: ``keep`` is in use by a running runtime, or unusable.
    """
    console = console or Console(emoji=False)
    started = time.monotonic()
    console.rule("[bold]RDSS messaging: the whole system on this machine")
    owned = endpoint is None
    state = None
    if owned and keep is not None and not os.environ.get("AWS_ENDPOINT_URL"):
        endpoint, state = _journalled(keep)
    endpoint = endpoint or connect()
    where = "embedded moto server" if endpoint.embedded else "AWS_ENDPOINT_URL"
    console.print(line(f"AWS: {where} at ", (str(endpoint.url), "cyan")))
    runtime: Runtime | None = None
    try:
        environment = KEPT_DEMO_ENVIRONMENT if state is not None else f"demo{uuid.uuid4().hex[:6]}"
        settings = Settings(environment=environment, firehose_buffer_seconds=2.0)
        positions = Positions(state) if state is not None else None
        runtime = Runtime(endpoint, settings, positions=positions)
        with console.status("provisioning streams, tables and buckets from the topology..."):
            runtime.provision()
        items = file_inputs(messages_dir) if messages_dir else builtin_inputs()
        source = f"{messages_dir}" if messages_dir else "the built-in workload"
        payloads = [p for _, records in items for p in records]
        published = runtime.publish(payloads)
        console.print(line(f"published {len(items)} input(s), {len(payloads)} record(s) from {source}"))
        for record in published:
            if record.refused is not None:
                console.print(line(("refused by the stream", "red"), f": {record.refused[0]} {record.refused[1]}"))
        inputs, cursor = [], 0
        for name, records in items:
            inputs.append(Input(name, published[cursor : cursor + len(records)]))
            cursor += len(records)
        with console.status("broker, sequencer, sweep and Firehose at work..."):
            runtime.drain()
        result = account(runtime, inputs)
        kept = _kept(runtime, keep, state is not None)
        traced = _trace_one(runtime, result, kept)
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
        if kept is not None:
            body["kept"] = kept
        _render(console, result, body, time.monotonic() - started, messages_dir is None)
        if report is not None:
            report.parent.mkdir(parents=True, exist_ok=True)
            report.write_bytes(orjson.dumps(body, option=orjson.OPT_INDENT_2) + b"\n")
            console.print(line("report written to ", (str(report), "cyan")))
        return body
    finally:
        if runtime is not None and owned and endpoint.embedded:
            runtime.stop()  # the embedded server goes (kept, its state is snapshotted on the way)
        elif runtime is not None and keep is None:  # an endpoint someone else runs keeps nothing of it
            runtime.deprovision()
        elif runtime is not None:
            runtime.stop()
        if owned:
            endpoint.stop()
        if state is not None:
            state.close()


def _journalled(path: Path) -> tuple[Endpoint, StateDirectory]:
    """The embedded emulator as ``rdss local up`` runs it, its state journalled to ``path``
    (forgetting what was there: a kept demo replaces the last one)."""
    from rdss.local.emulator import Emulator

    state = StateDirectory(path, fresh=True)
    try:
        emulator = Emulator(state=state)
        emulator.recover()
        return emulator.open(), state
    except BaseException:
        state.close()
        raise


def _kept(runtime: Runtime, keep: Path | None, journalled: bool) -> dict[str, Any] | None:
    """What the report says of a kept deployment: where it is, and how to reach it again."""
    if keep is None:
        return None
    if not journalled:
        return {"url": _url(runtime)}
    serve = f"rdss local up --env {KEPT_DEMO_ENVIRONMENT}"
    if keep != default_directory(KEPT_DEMO_ENVIRONMENT):
        serve += f" --state {shlex.quote(str(keep))}"
    return {"state": str(keep), "serve": serve}


def _url(runtime: Runtime) -> str:
    """The deployment's gateway URL, on the endpoint the demo ran against."""
    endpoint = runtime.endpoint
    return f"kinesis://{runtime.deployment.environment}" + (f"?endpoint={endpoint.url}" if endpoint.url else "")


def _trace_one(runtime: Runtime, result: Accounting, kept: dict[str, Any] | None) -> dict[str, Any] | None:
    """``rdss trace`` on one input, the most telling there is: a message some records of which
    were dropped as duplicates or found invalid, else one moved to invalid, else a sequence.
    Its ``command`` is the one that traces it after the demo: on a kept local deployment once
    ``rdss local up`` serves it again (the running runtime is the default deployment), on an
    endpoint someone else runs by its URL; a demo not kept leaves nothing to trace."""
    from rdss.trace.tracer import Tracer

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
    tracer = Tracer(runtime.deployment, runtime.endpoint.client)
    timeline = tracer.trace(chosen.message_id)
    traced: dict[str, Any] = {"input": chosen.name, "lines": timeline.lines(), "timeline": timeline.as_dict()}
    if kept is not None:
        command = f"rdss trace {chosen.message_id}"
        traced["command"] = command + (f" --url {shlex.quote(kept['url'])}" if "url" in kept else "")
    return traced


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
    from rdss.host.resources import GlueUnavailable

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
        table.add_row(  # file names and codes as written: no markup of theirs is read, no escape of theirs sent
            line(item.name),
            str(item.records),
            line((item.outcome, colour)),
            line(", ".join(item.channels)),
            line(item.error_code or ""),
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
        console.print(line(("Where one message went", "bold"), f" ({trace['input']}), as rdss trace shows it:"))
        timeline: list[str] = trace["lines"]
        if len(timeline) > 24:
            more = f"... {len(timeline) - 20} more (the report has them all)"
            timeline = [*timeline[:18], more, *timeline[-2:]]
        for said in timeline:
            console.print(line(f"  {said}"), highlight=False)
    analytics = body["analytics"]
    if "skipped" in analytics:
        console.print(line(("Analytics", "bold"), f": skipped ({analytics['skipped']})"))
    else:
        _render_analytics(console, analytics)
    kept = body.get("kept")
    traced = body.get("trace", {})
    command: list[str | tuple[str, str]] = [", e.g. ", (traced["command"], "cyan")] if "command" in traced else []
    if kept is None:
        console.print(
            "Nothing is left behind: with --keep the deployment stays, for rdss trace (and any command) after."
        )
    elif "serve" in kept:
        console.print(
            line(
                ("Kept", "bold"),
                " in ",
                (kept["state"], "cyan"),
                ": ",
                (kept["serve"], "cyan"),
                " serves it again (its channels, tables and archives), and while it runs every command reaches it",
                *command,
            )
        )
    else:
        console.print(line(("Kept", "bold"), " on the endpoint as ", (kept["url"], "cyan"), *command))
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
        volume.add_row(line(name), f"{count:,}")
    errors = Table(title="Invalid and error rates")
    for column in ("channel", "errorCode", "records", "rate"):
        errors.add_column(column, justify="right" if column in ("records", "rate") else "left")
    for channel, codes in sorted(analytics.get("errors", {}).items()):
        for code, figures in sorted(codes.items()):
            errors.add_row(line(channel), line(code), str(figures.get("records")), _percent(figures.get("rate")))
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
