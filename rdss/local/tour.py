"""``rdss tour``: the message model end to end, offline, with a readable summary.

Classifies the repository's example messages, a realistic generated workload, splits a
large deposit into a sequence and reassembles it out of order, and decorates an invalid
message for the invalid channel and restores it byte for byte.
"""

from __future__ import annotations

import argparse
import random
import time
from collections import Counter
from pathlib import Path

import orjson
from rich.console import Console
from rich.table import Table

from rdss.host.display import rich_text as line
from rdss.host.resources import examples_dir
from rdss.model import decoration
from rdss.model.sequences import Reassembler, split
from rdss.model.validation import validate
from rdss.model.workload import Workload


def run(args: argparse.Namespace) -> int:
    console = Console(emoji=False)
    console.rule("[bold]RDSS Message API 3.0.2: the message model")
    examples = args.examples or examples_dir()
    failures = _examples(console, examples)
    _workload(console, args.messages)
    failures += _sequence(console)
    failures += _decoration(console, examples)
    console.rule("[bold green]done" if not failures else f"[bold red]{failures} unexpected results")
    return 0 if not failures else 1


def _examples(console: Console, root: Path) -> int:
    table = Table(title=line(f"Example messages ({root})"), show_lines=False)
    for column in ("file", "verdict", "channel", "why"):
        table.add_column(column, overflow="fold")
    unexpected = 0
    for path in sorted(root.rglob("*.json")):
        verdict = validate(path.read_bytes())
        expected = None if path.parent.name == "valid" else path.name.split("-", 1)[0]
        got = None if verdict.error_code is None else str(verdict.error_code)
        mark = "" if got == expected else " [red](unexpected)"
        unexpected += got != expected
        label = "[green]valid" + (" (part)" if verdict.is_part else "") if verdict.valid else f"[yellow]{got}"
        why = line((verdict.error_description or "")[:90])  # the example's own values, as written
        table.add_row(line(path.name), label + mark, str(verdict.channel or "routed"), why)
    console.print(table)
    return unexpected


def _workload(console: Console, count: int) -> None:
    payloads = [orjson.dumps(m) for m in Workload(2026).mix(count)]
    started = time.perf_counter()
    verdicts = [validate(p) for p in payloads]
    elapsed = time.perf_counter() - started
    kinds = Counter(f"{v.header['messageType']}/{v.header['messageClass']}" for v in verdicts if v.header is not None)
    table = Table(
        title=f"Generated workload: {count:,} messages classified in {elapsed * 1000:,.0f} ms "
        f"({count / elapsed:,.0f} msg/s)"
    )
    table.add_column("type/class")
    table.add_column("messages", justify="right")
    for kind, n in sorted(kinds.items()):
        table.add_row(kind, f"{n:,}")
    console.print(table)


def _sequence(console: Console) -> int:
    deposit = Workload(7).large(2_500_000)
    size = len(orjson.dumps(deposit))
    parts = split(deposit)
    sizes = [len(orjson.dumps(p)) for p in parts]
    verdict = validate(orjson.dumps(deposit))
    delivery = [*parts, parts[0]]  # Kinesis delivers at least once
    random.Random(1).shuffle(delivery)
    reassembler = Reassembler()
    wholes = [w for w in map(reassembler.add, delivery) if w is not None]
    ok = len(wholes) == 1 and wholes[0]["messageBody"] == deposit["messageBody"]
    console.print(
        f"[bold]Sequence[/]: a {size:,}-byte deposit is {verdict.error_code} as one message; split into "
        f"{len(parts)} parts of {', '.join(f'{s:,}' for s in sizes)} bytes, all "
        f"{'valid' if all(validate(orjson.dumps(p)).valid for p in parts) else 'NOT valid'}; delivered shuffled "
        f"with a duplicate, reassembled {'[green]identical' if ok else '[red]DIFFERENT'}[/]."
    )
    return 0 if ok else 1


def _decoration(console: Console, root: Path) -> int:
    path = next(iter(sorted((root / "invalid").glob("GENERR001-*.json"))), None)
    if path is None:
        return 0
    payload = path.read_bytes()
    verdict = validate(payload)
    assert verdict.error_code is not None
    decorated = decoration.decorate(payload, verdict.error_code, verdict.error_description or "")
    restored = decoration.original(decorated) == payload
    header = orjson.loads(decorated)["messageHeader"]
    console.print(
        line(
            ("Invalid channel", "bold"),
            f": {path.name} gains errorCode={header['errorCode']} and an errorDescription in its header "
            f"({len(decorated) - len(payload)} bytes inserted); original bytes ",
            ("restored exactly", "green") if restored else ("LOST", "red"),
            ".",
        )
    )
    return 0 if restored else 1
