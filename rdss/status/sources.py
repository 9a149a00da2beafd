"""What the console shows, read from one deployment: the status snapshot, the charts' series,
one message's timeline (``rdss trace``), the parked batches (``rdss redrive --dry-run``) and
their redrive, the replays (``rdss replay``) and their cancelling; and, when given, an analytics
report's tables.

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
from rdss.status.snapshot import DEFAULT_LIMIT, Snapshot, replay_rows


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

        tracer = Tracer(self._named(), self.client)
        return tracer.trace(message_id).as_dict()

    def parked(self) -> dict[str, Any]:
        """The parked batches, as ``rdss redrive --dry-run`` lists them (nothing changes)."""
        return self._redrive(None, dry_run=True)

    def redrive(self, processor: str | None) -> dict[str, Any]:
        """``rdss redrive`` (one processor's queue, or all): the batches put back, and what was not."""
        return self._redrive(processor, dry_run=False)

    def replays(self) -> list[dict[str, Any]]:
        """Every replay (:func:`rdss.status.snapshot.replay_rows`), each with what is left of it
        (:meth:`_left`)."""
        return self._with_left(replay_rows(self.client("dynamodb"), self.deployment.table("checkpoints")))

    def replay(self, name: str) -> dict[str, Any] | None:
        """One replay, as :meth:`replays` gives it; None when there is none of that name."""
        rows = replay_rows(self.client("dynamodb"), self.deployment.table("checkpoints"))
        return next(iter(self._with_left([row for row in rows if row["name"] == name])), None)

    def cancel_replay(self, name: str) -> bool:
        """``rdss replay cancel``: a start running it stops at its next batch; False when there is none."""
        from rdss.processors.replay_progress import Progress

        return Progress(self.client("dynamodb"), self.deployment.table("checkpoints")).cancel(name)

    def _with_left(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        from rdss.processors.replay import Replayer

        if not rows:
            return []
        replayer = Replayer(self._named(), self.client)
        return [row | self._left(replayer, row) for row in rows]

    def _left(self, replayer: Any, row: dict[str, Any]) -> dict[str, Any]:
        """What ``rdss replay start NAME --dry-run`` counts now: the records its selection holds in
        the archive (``selectedNow``), those not replayable (``skipped``) and those not sent yet
        (``remaining``); None for a cancelled replay (it is never resumed), with ``left`` saying why."""
        from rdss.processors.replay import Selection, Spec
        from rdss.processors.replay_progress import ReplayExists

        if row["status"] == "cancelled":
            return {"selectedNow": None, "skipped": None, "remaining": None, "left": "cancelled: never resumed"}
        try:
            spec = Spec(row["name"], Selection.of(row["selection"]), str(row["into"]))
            summary = replayer.run(spec, dry_run=True)
        except (KeyError, ValueError, ReplayExists) as error:  # options unreadable, or cancelled meanwhile
            return {"selectedNow": None, "skipped": None, "remaining": None, "left": str(error)}
        remaining = summary.selected - summary.already - summary.skipped
        return {"selectedNow": summary.selected, "skipped": summary.skipped, "remaining": remaining, "left": None}

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
