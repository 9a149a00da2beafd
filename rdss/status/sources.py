"""What the console shows, read from one deployment: the status snapshot, the charts' series,
one message's timeline (``rdss trace``), the parked batches (``rdss redrive --dry-run``) and
their redrive; and, when given, an analytics report's tables.

The web layer (:mod:`rdss.status.console`) only renders what these return: every value here is
data, never markup.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rdss.deployment.topology import Deployment
from rdss.status import series
from rdss.status.snapshot import DEFAULT_LIMIT, Snapshot


@dataclass
class ConsoleSource:
    """One deployment, as the console reads it; ``client(service)`` makes its boto3 clients."""

    deployment: Deployment
    client: Callable[[str], Any]
    limit: int = DEFAULT_LIMIT
    #: an analytics report's output directory (summary.json and csv/), for the report page
    report: Path | None = None

    def status(self) -> dict[str, Any]:
        return Snapshot(self.deployment, self.client, limit=self.limit).take().as_dict()

    def series(self, minutes: int = 60) -> dict[str, Any]:
        return series.take(self.deployment, self.client, minutes=minutes, limit=self.limit).as_dict()

    def trace(self, message_id: str) -> dict[str, Any]:
        """``rdss trace``'s timeline of one messageId (or SHARD/SEQUENCE), as its ``--json``."""
        from rdss.trace.tracer import Tracer

        tracer = Tracer(
            self._named(),
            kinesis=self.client("kinesis"),
            dynamodb=self.client("dynamodb"),
            s3=self.client("s3"),
        )
        return tracer.trace(message_id).as_dict()

    def parked(self) -> dict[str, Any]:
        """The parked batches, as ``rdss redrive --dry-run`` lists them (nothing changes)."""
        return self._redrive(None, dry_run=True)

    def redrive(self, processor: str | None) -> dict[str, Any]:
        """``rdss redrive`` (one processor's queue, or all): the batches put back, and what was not."""
        return self._redrive(processor, dry_run=False)

    def report_tables(self) -> dict[str, Any] | None:
        from rdss.analytics.report import read_report

        return None if self.report is None else read_report(self.report)

    def _redrive(self, processor: str | None, *, dry_run: bool) -> dict[str, Any]:
        from rdss.processors.redrive import Redriver

        processors = [p.name for p in self.deployment.topology.processors if p.sources]
        if processor is not None and processor not in processors:
            return {"lines": [f"no processor {processor!r} parks batches"], "ok": False, "batches": 0}
        redriver = Redriver(
            self._named(),
            sqs=self.client("sqs"),
            kinesis=self.client("kinesis"),
            s3=self.client("s3"),
            dynamodb=self.client("dynamodb"),
            firehose=self.client("firehose"),
            wait_seconds=0,
        )
        lines: list[str] = []
        batches, ok = 0, True
        for name in [processor] if processor else processors:
            try:
                report = redriver.run([name], dry_run=dry_run)
            except LookupError as error:  # no on-failure queue: nothing parked there
                lines.append(f"{name}: {error.args[0]}")
                continue
            batches += len(report.batches)
            ok = ok and report.ok
            lines += [f"{name}: {line}" if line == "no parked batches" else line for line in report.lines()]
        return {"lines": lines, "ok": ok, "batches": batches}

    def _named(self) -> Deployment:
        """The deployment with its buckets' names as its functions were told (as rdss redrive reads them)."""
        from rdss.processors.redrive import deployed_names

        return deployed_names(self.deployment, self.client("lambda"))
