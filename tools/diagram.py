"""The topology as a picture: Mermaid text generated from :data:`rdss.deployment.topology.RDSS`.

The diagram in ``docs/topology.md`` and in the README is this module's output, so a channel,
route, table, bucket or processor added to the topology shows up in the docs once they are
regenerated, and ``tests/unit/test_docs.py`` fails until they are:

    python -m tools.diagram            # print the Mermaid flowchart
    python -m tools.diagram --write    # rewrite docs/topology.md and the README's diagram
    python -m tools.diagram --check    # exit 1 when either file is out of step
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from pathlib import Path

from glue_jobs import schema as glue_schema
from rdss.deployment.topology import RDSS, Topology

ROOT = Path(__file__).resolve().parents[1]
TOPOLOGY_PAGE = ROOT / "docs" / "topology.md"
README = ROOT / "README.md"
#: The README's copy of the diagram sits between these two lines.
BEGIN, END = "<!-- topology diagram: begin (python -m tools.diagram --write) -->", "<!-- topology diagram: end -->"
COMMAND = "python -m tools.diagram --write"

_ALL_CLASSES = frozenset({"Command", "Event", "Document"})


def _routes_into(topology: Topology, channel: str) -> str:
    """The edge label of a routed channel: what the broker sends there, e.g. ``MetadataRead (Command)``."""
    labels = []
    for route in topology.routes:
        if route.channel != channel:
            continue
        classes = "" if set(route.message_classes) == _ALL_CLASSES else f" ({', '.join(route.message_classes)})"
        reply = " → returnAddress" if route.reply else ""
        labels.append(f"{route.message_type}{classes}{reply}")
    return "<br/>".join(labels)


def _access(reads: Iterable[str], writes: Iterable[str]) -> dict[str, str]:
    """Resource -> ``reads`` | ``writes`` | ``reads, writes``, in first-named order."""
    marks: dict[str, list[str]] = {}
    for name in reads:
        marks.setdefault(name, []).append("reads")
    for name in writes:
        marks.setdefault(name, []).append("writes")
    return {name: ", ".join(kinds) for name, kinds in marks.items()}


def mermaid(topology: Topology = RDSS, *, detail: bool = True) -> str:
    """A Mermaid flowchart of ``topology``: channels (Kinesis streams), processors (Lambda
    functions), the Firehose archives and the analytics that read them; with ``detail``, also
    the tables and which processor reads or writes which table and bucket (the README's copy
    leaves those out to stay short)."""
    lines = ["flowchart LR"]

    def add(line: str) -> None:
        if detail or not line.lstrip().startswith("%%"):
            lines.append(line)

    add('    producers(["producers: vendors\' gateways, rdss send, the bridge, the OAI-PMH adaptor"])')
    add('    consumers(["consumers: vendors\' gateways, rdss tail, the bridge"])')
    add("    %% channels: one KMS-encrypted Kinesis stream each, rdss-<env>-<channel>")
    for channel in topology.channels:
        add(f'    ch_{channel.name}[/"{channel.name}<br/><small>{channel.kind} channel</small>"/]')
    add("    %% processors: Lambda functions (AMGI apps behind the Kinesis event source mapping)")
    for processor in topology.processors:
        add(f'    p_{processor.name}["λ {processor.name}"]')
    add("    %% DynamoDB tables and S3 buckets")
    for table in topology.tables if detail else ():
        add(f'    t_{table.name}[("{table.name}<br/><small>table, key {table.partition_key}</small>")]')
    archives = dict.fromkeys(c.archive.split("/", 1)[0] for c in topology.channels if c.archive is not None)
    for bucket in topology.buckets if detail else (b for b in topology.buckets if b.name in archives):
        add(f'    b_{bucket.name}[("{bucket.name}<br/><small>bucket</small>")]')
    reports = ", ".join(f"report_{name}" for name in glue_schema.REPORT_TABLES)
    add(f'    glue["Glue jobs: audit-compaction, audit-report<br/><small>curated tables; {reports}</small>"]')
    add('    athena(["Athena: the workgroup and its named queries"])')

    add("    %% flow")
    for channel in topology.channels_of("input"):
        add(f"    producers -->|PutRecords| ch_{channel.name}")
    for processor in topology.processors:
        for source in processor.sources:
            add(f"    ch_{source} -->|event source mapping| p_{processor.name}")
        if processor.schedule is not None:
            add(f'    sched_{processor.name}(["EventBridge {processor.schedule}"]) --> p_{processor.name}')
        for channel_name in processor.sends_to:
            channel = topology.channel(channel_name)
            label = _routes_into(topology, channel.name) if channel.kind == "routed" else ""
            if processor.name != "broker" or not label:
                add(f"    p_{processor.name} --> ch_{channel.name}")
            else:
                add(f'    p_{processor.name} -->|"{label}"| ch_{channel.name}')
    for channel in topology.channels_of("routed"):
        add(f"    ch_{channel.name} --> consumers")
    # the archiver frames each record of an archived channel and writes it through the
    # channel's Firehose delivery stream (Direct PUT) to the channel's archive prefix
    for processor in topology.processors:
        for name in processor.archives:
            channel = topology.channel(name)
            add(f'    p_{processor.name} -.->|"Firehose {channel.archive}"| b_{topology.archive_bucket(name)}')
    # the Glue jobs read every archive bucket (audit, and errors for the rejections), once each
    for bucket_name in archives:
        add(f"    b_{bucket_name} -.-> glue")
    add("    glue -.-> athena")
    if not detail:
        return "\n".join(lines) + "\n"
    used = {name for p in topology.processors for name in (*p.reads_tables, *p.writes_tables)}
    for table in topology.tables:
        if table.name not in used:  # a table no processor touches is the gateway consumers' own
            add(f"    consumers -.-|reads, writes| t_{table.name}")
    for processor in topology.processors:
        for table_name, access in _access(processor.reads_tables, processor.writes_tables).items():
            add(f"    p_{processor.name} -.-|{access}| t_{table_name}")
        for bucket_name, access in _access(processor.reads_buckets, processor.writes_buckets).items():
            add(f"    p_{processor.name} -.-|{access}| b_{bucket_name}")
    return "\n".join(lines) + "\n"


def _table(header: tuple[str, ...], rows: Iterable[tuple[str, ...]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def page(topology: Topology = RDSS) -> str:
    """``docs/topology.md``: the diagram and the topology's entries, one table per kind."""
    none = "-"
    lines = [
        "# Topology",
        "",
        f"Generated from `rdss/deployment/topology.py` by `{COMMAND}`; do not edit by hand",
        "(`tests/unit/test_docs.py` fails when this page and the topology disagree).",
        "The CDK app, the broker's routing and the local runtime all read the same description.",
        "",
        "```mermaid",
        mermaid(topology).rstrip("\n"),
        "```",
        "",
        "## Channels",
        "",
        *_table(
            ("channel", "kind", "stream", "archived to", "what it carries"),
            (
                (
                    f"`{c.name}`",
                    c.kind,
                    f"`rdss-<env>-{c.name}`",
                    f"`{c.archive}`" if c.archive else none,
                    c.description,
                )
                for c in topology.channels
            ),
        ),
        "",
        "## Routes (the broker's Content-Based Router)",
        "",
        *_table(
            ("messageType", "messageClass", "channel"),
            (
                (
                    r.message_type,
                    ", ".join(r.message_classes),
                    f"`{r.channel}`" + (" (or the request's returnAddress)" if r.reply else ""),
                )
                for r in topology.routes
            ),
        ),
        "",
        "## Processors",
        "",
        *_table(
            ("processor", "handler", "triggered by", "sends to", "tables (read / write)", "buckets (read / write)"),
            (
                (
                    f"`{p.name}`",
                    "`lambdas/{}.py`: `{}`".format(*p.handler.rsplit(".", 1)),
                    ", ".join(f"`{c}`" for c in p.sources) or f"`{p.schedule}`",
                    ", ".join([*(f"`{c}`" for c in p.sends_to), *(f"Firehose `{c}`" for c in p.archives)]) or none,
                    f"{', '.join(p.reads_tables) or none} / {', '.join(p.writes_tables) or none}",
                    f"{', '.join(p.reads_buckets) or none} / {', '.join(p.writes_buckets) or none}",
                )
                for p in topology.processors
            ),
        ),
        "",
        "## Tables and buckets",
        "",
        *_table(
            ("name", "kind", "key", "what it holds"),
            (
                *(
                    (
                        f"`{t.name}`",
                        "DynamoDB table",
                        t.partition_key + (f" + {t.sort_key}" if t.sort_key else ""),
                        t.description,
                    )
                    for t in topology.tables
                ),
                *(
                    (
                        f"`{b.name}`",
                        "S3 bucket",
                        none,
                        b.description + (f" (expires after {b.expire_after_days} days)" if b.expire_after_days else ""),
                    )
                    for b in topology.buckets
                ),
            ),
        ),
        "",
    ]
    return "\n".join(lines)


def readme_with_diagram(readme: str, topology: Topology = RDSS) -> str:
    """``readme`` with the text between :data:`BEGIN` and :data:`END` replaced by the diagram."""
    start, end = readme.index(BEGIN) + len(BEGIN), readme.index(END)
    return readme[:start] + "\n```mermaid\n" + mermaid(topology, detail=False) + "```\n" + readme[end:]


def stale(root: Path = ROOT) -> list[Path]:
    """The files whose generated part differs from what the topology gives now."""
    out = []
    topology_page, readme = root / TOPOLOGY_PAGE.relative_to(ROOT), root / README.relative_to(ROOT)
    if not topology_page.exists() or topology_page.read_text() != page():
        out.append(topology_page)
    text = readme.read_text()
    if BEGIN not in text or END not in text or readme_with_diagram(text) != text:
        out.append(readme)
    return out


def write(root: Path = ROOT) -> None:
    """Regenerate ``docs/topology.md`` and the README's diagram."""
    (root / TOPOLOGY_PAGE.relative_to(ROOT)).write_text(page())
    readme = root / README.relative_to(ROOT)
    readme.write_text(readme_with_diagram(readme.read_text()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.diagram", description=__doc__.splitlines()[0])
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--write", action="store_true", help="rewrite docs/topology.md and the README's diagram")
    action.add_argument("--check", action="store_true", help="exit 1 when a generated file is out of step")
    parser.add_argument("--short", action="store_true", help="print the README's shorter diagram")
    args = parser.parse_args(argv)
    if args.write:
        write()
        return 0
    if args.check:
        out = stale()
        for path in out:
            print(
                f"{path.relative_to(ROOT)} is out of step with rdss/deployment/topology.py: run {COMMAND}",
                file=sys.stderr,
            )
        return 1 if out else 0
    sys.stdout.write(mermaid(detail=not args.short))
    return 0


if __name__ == "__main__":
    sys.exit(main())
