"""Replay: send archived records again (``rdss replay``).

Redrive puts back what Lambda gave up on, within the streams' retention; a replay re-reads
history from the archive, however old: every record of a time window, of one channel, of one
messageType, error code or set of messageIds (:class:`Selection`), read from the audit and
errors archives by hour (:class:`rdss.archive.listing.ArchiveListing`, the reader ``rdss trace``
uses too) and sent again:

* ``--into input`` (the default): back through the broker, each record with a hop naming the
  replay (:mod:`rdss.model.replay`). The broker would drop a message it claimed before as a
  duplicate; for each message it is to route again the replay first writes a *grant* into the
  broker's table - ``replay-grant#<name>#<messageId>``, naming the message's digest - and the broker
  claims a record carrying the replay's hop *and* matching a grant under the replay's own key:
  routed once more per replay, a second copy dropped as that claim's duplicate. As with redrive
  (:mod:`rdss.processors.redrive_claims`), the table is the broker's and no vendor's role may
  write it, so a producer cannot forge a replay: a hop without a grant changes nothing. Invalid
  records (claimed as their stream record) go through the broker and are moved again. Parts of a
  sequence are not replayed: the sequencer released the whole once and would not again.
* ``--into group:G``: straight onto each message's routed channel, with a last hop naming the
  replay and the group: only G's receivers take it (:meth:`rdss.model.replay.Mark.reaches`);
  the others settle it unseen. Only valid whole messages can be replayed so.

A replay's progress lies in the ``checkpoints`` table (:mod:`rdss.processors.replay_progress`),
under keys no vendor's role can write (theirs are ``<group>#<stream>``, exactly): the replay
itself under ``replays``/``<name>`` (its options, status and counts) and one row per record sent
under ``replay:<name>``. A record is noted once PutRecords accepted it; a run stopped between the
two sends it again when resumed, and the broker (or the group's receivers, which de-duplicate a
replay under its own key) drop the second copy - so each selected record is delivered once per
replay.

One run at a time: a run claims its replay's row with a conditional write - its own id as
``leaseOwner`` and ``leaseUntil`` (epoch seconds) :data:`LEASE` ahead - renews it every quarter of
that from a background thread while it runs (each batch's count is written only while it holds it)
and gives it up when it ends. A second start of the same name is refused while the claim holds; a
run that died unannounced (SIGKILL, a lost machine) holds it until ``leaseUntil`` passes, and
then a start resumes it. The checkpoints table's consumer leases (:mod:`rdss.gateway.checkpoints`)
expire by a counter each worker watches; a replay's claim is read by a start that cannot wait to
watch it, so it carries its expiry, by the clocks of the machines that run replays.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from rdss.archive.entries import Entry, archived_at
from rdss.archive.listing import Archived, ArchiveListing, Stopped
from rdss.aws.putrecords import PutRecordsBatcher, Record
from rdss.deployment.topology import RDSS, Deployment
from rdss.host.display import shorten
from rdss.model import history
from rdss.model import replay as replays
from rdss.model.conflicts import DIGEST_ATTRIBUTE, message_digest
from rdss.model.validation import validate
from rdss.processors.replay_progress import (
    Claim,
    Progress,
    ReplayExists,
    needs,
    run_id,
    utc_text,
)
from rdss.repository.dynamodb import LocalDataRepository

#: The channels whose records are archived, and so can be replayed.
CHANNELS = ("input", "invalid", "error")
#: Firehose writes a record up to 15 minutes after it arrived: archive hours read past --until.
_ARCHIVE_LAG = timedelta(hours=1)
#: The latest --until whose window (until + the archive's lag) is still a datetime.
_LAST_UNTIL = datetime.max.replace(tzinfo=UTC) - _ARCHIVE_LAG
#: The longest a paced run sleeps before it looks at its stop request again.
_NAP = 0.5
#: Records put (and noted) at a time.
BATCH = 100


@dataclass(frozen=True)
class Selection:
    """Which archived records a replay sends: those that arrived in [since, until) on ``channel``,
    and - when given - of ``message_type``, with ``code`` (errorCode) or one of ``ids``."""

    since: datetime
    until: datetime
    channel: str = "input"
    message_type: str | None = None
    code: str | None = None
    ids: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.channel not in CHANNELS:
            raise ValueError(f"channel {self.channel!r} is not archived (one of {', '.join(CHANNELS)})")
        if self.until <= self.since:
            raise ValueError("--until must be after --since")
        if self.until > _LAST_UNTIL:
            raise ValueError(f"--until {self.until.isoformat()} is beyond the last hour an archive can name")
        try:
            self.since.astimezone(UTC)
        except OverflowError:
            raise ValueError(f"--since {self.since.isoformat()} is before the first hour an archive can name") from None

    def archives(self) -> tuple[str, ...]:
        return ("audit",) if self.channel == "input" else ("errors",)

    def window(self) -> tuple[datetime, datetime]:
        """The hours of archive to read."""
        return self.since, self.until + _ARCHIVE_LAG

    def matches(self, deployment: Deployment, found: Archived) -> bool:
        entry = found.entry
        if _channel(deployment, found) != self.channel:
            return False
        arrived = entry.arrived or found.written or archived_at(found.key)
        if arrived is None or not self.since <= arrived < self.until:
            return False
        if self.message_type is None and self.code is None and not self.ids:
            return True
        header = _header(entry.payload)
        if self.message_type is not None and header.get("messageType") != self.message_type:
            return False
        if self.code is not None and header.get("errorCode") != self.code:
            return False
        return not self.ids or header.get("messageId") in self.ids

    def as_dict(self) -> dict[str, Any]:
        values = asdict(self)
        values["since"], values["until"] = utc_text(self.since), utc_text(self.until)
        values["ids"] = list(self.ids)
        return values

    @classmethod
    def of(cls, values: Mapping[str, Any]) -> Selection:
        return cls(
            since=datetime.fromisoformat(str(values["since"]).replace("Z", "+00:00")),
            until=datetime.fromisoformat(str(values["until"]).replace("Z", "+00:00")),
            channel=str(values["channel"]),
            message_type=values.get("message_type"),
            code=values.get("code"),
            ids=tuple(values.get("ids") or ()),
        )


def _channel(deployment: Deployment, found: Archived) -> str | None:
    """The channel an entry was archived from: its stream, or for a legacy line its prefix."""
    stream = found.entry.stream
    if stream is not None:
        return next((c for c in CHANNELS if deployment.stream(c) == stream), None)
    if found.archive == "audit":
        return "input"
    return "invalid" if found.key.startswith("errors/invalid/") else "error"


def _header(payload: bytes) -> dict[str, Any]:
    try:
        header = orjson.loads(payload).get("messageHeader")
    except (orjson.JSONDecodeError, AttributeError):
        return {}
    return header if isinstance(header, dict) else {}


def _sent_by(payload: bytes, name: str) -> bool:
    """Whether a record is one replay ``name`` sent (it carries the replay's hop)."""
    if replays.PREFIX.encode() + name.encode() not in payload:
        return False
    mark = replays.requested(_header(payload))
    return mark is not None and mark.name == name


def source_of(found: Archived) -> str:
    """A selected record's identity, the key of its progress row: ``<stream>/<shard>/<sequence>``,
    or for a legacy line its object and line."""
    identity = found.entry.identity
    return "/".join(identity) if identity is not None else f"{found.key}#{found.line}"


def shown(name: str) -> str:
    """A replay's name as a message quotes it: a name too long to be one is cut to its start."""
    return repr(shorten(name, 60))


def into_group(into: str) -> str | None:
    """``group:G`` -> G; ``input`` -> None.

    Raises:
        ValueError: neither.
    """
    if into == "input":
        return None
    kind, _, group = into.partition(":")
    if kind != "group" or not group or not replays.NAME.match(group):
        raise ValueError(f"--into {into!r}: input, or group:GROUP")
    return group


@dataclass(frozen=True)
class Spec:
    """A replay: its name, what it selects and where it sends it."""

    name: str
    selection: Selection
    #: ``input`` or ``group:<group>``
    into: str = "input"

    def __post_init__(self) -> None:
        if not replays.NAME.match(self.name):
            raise ValueError(f"replay name {shown(self.name)}: letters, digits, '.', '_' and '-', up to 64")
        into_group(self.into)

    def options(self) -> dict[str, Any]:
        return {"selection": self.selection.as_dict(), "into": self.into}


@dataclass
class Summary:
    """What a run did (or, a dry run, would do)."""

    name: str
    into: str
    dry_run: bool
    status: str = "running"
    #: Records the selection matched.
    selected: int = 0
    #: Sent by this run.
    sent: int = 0
    #: Sent by an earlier run of this replay: not sent again.
    already: int = 0
    #: Selected but not replayable: a part of a sequence, or (--into group) not a valid message.
    skipped: int = 0
    #: Refused by Kinesis after retries (the run stops: resume it).
    failed: int = 0
    problems: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def line(self) -> str:
        verb = "would send" if self.dry_run else "sent"
        count = self.selected - self.already - self.skipped if self.dry_run else self.sent
        parts = [f"replay {self.name}: {verb} {count} of {self.selected} selected record(s) into {self.into}"]
        if self.already:
            parts.append(f"{self.already} sent by an earlier run")
        if self.skipped:
            parts.append(f"{self.skipped} not replayable (a part of a sequence, or not valid for a group)")
        if self.failed:
            parts.append(f"{self.failed} refused")
        return "; ".join(parts) + f" ({self.status})"


class Replayer:
    """Runs replays against one Kinesis deployment."""

    def __init__(
        self,
        deployment: Deployment,
        client: Callable[[str], Any],
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """
        Args:
            deployment: its names, the archives' buckets among them (``Deployment.bucket``).
            client: service name -> boto3 client (kinesis, dynamodb and s3 are made at once).
        """
        kinesis, dynamodb = client("kinesis"), client("dynamodb")
        self.deployment = deployment
        self.listing = ArchiveListing.of(deployment, client("s3"))
        self.progress = Progress(dynamodb, deployment.table("checkpoints"))
        self.grants = LocalDataRepository(dynamodb, deployment.table("messages"))
        self.batcher = PutRecordsBatcher(kinesis)
        self.clock = clock
        self.sleep = sleep

    def needs(self, table: str) -> AbstractContextManager[None]:
        """AWS calls on the deployment's ``table`` (:func:`needs`)."""
        return needs(f"{table} table {self.deployment.table(table)}", self.deployment.environment)

    def select(
        self, selection: Selection, name: str | None = None, *, stop: Callable[[], bool] = lambda: False
    ) -> Iterator[Archived]:
        """The selected records in archive order, each identity once (Firehose is at least once),
        leaving out what replay ``name`` itself sent (archived too, maybe inside the window).

        Raises:
            Stopped: ``stop`` said so (asked between two reads of the archive).
        """
        seen: set[str] = set()
        for found in self.listing.entries(selection.window(), selection.archives(), stop=stop):
            if not selection.matches(self.deployment, found):
                continue
            if name is not None and _sent_by(found.entry.payload, name):
                continue
            source = source_of(found)
            if source not in seen:
                seen.add(source)
                yield found

    def run(
        self,
        spec: Spec,
        *,
        dry_run: bool = False,
        rate: float | None = None,
        on_batch: Callable[[Summary], None] | None = None,
        stop: Callable[[], bool] = lambda: False,
    ) -> Summary:
        """Send (or count) the records ``spec`` selects that no earlier run of it sent. ``stop``
        is asked between two reads of the archive and before each batch: once it is true the run
        ends ``interrupted``, its progress kept for a resume.

        Raises:
            ReplayRunning: another run holds the replay.
            ReplayExists: a replay of that name has other options, or was cancelled.
            ClientError, BotoCoreError: AWS refused.
        """
        summary = Summary(spec.name, spec.into, dry_run)
        if dry_run:
            with self.needs("checkpoints"):
                existing = self.progress.get(spec.name)
            if existing is not None and existing.get("status") == "cancelled":
                raise ReplayExists(f"replay {spec.name} was cancelled; start another name")
            self._run(spec, summary, None, rate, on_batch, stop)
            if existing is None and summary.status == "done":
                summary.status = "dry run"
            return summary
        owner = run_id()
        with self.needs("checkpoints"):
            self.progress.begin(spec, owner)
        claim = Claim(self.progress, spec.name, owner)
        try:
            complete = self._run(spec, summary, owner, rate, on_batch, lambda: stop() or claim.lost.is_set())
        finally:
            claim.stop()  # before the claim is given up: a renewal after would find it gone
            if summary.status == "running":  # died on an exception: the claim goes, the status stays
                self.progress.update(spec.name, owner=owner, release=True)
        selected = summary.selected if complete else None  # only a selection read whole is counted
        self.progress.update(spec.name, status=summary.status, selected=selected, owner=owner, release=True)
        if claim.lost.is_set() and not summary.problems:
            summary.problems.append("another run took the replay over (this run's claim had lapsed)")
        return summary

    def _run(
        self,
        spec: Spec,
        summary: Summary,
        owner: str | None,
        rate: float | None,
        on_batch: Callable[[Summary], None] | None,
        stop: Callable[[], bool],
    ) -> bool:
        """The run itself: select, send batch by batch (``owner`` None: a dry run); True when the
        whole selection was read."""
        started = self.clock()
        batch: list[Archived] = []
        complete = False  # the whole selection was read: ``selected`` counts it
        try:
            for found in self.select(spec.selection, spec.name, stop=stop):
                summary.selected += 1
                batch.append(found)
                if len(batch) >= BATCH:
                    if not self._batch(spec, batch, summary, owner, rate, started, stop):
                        break
                    batch = []
                    if on_batch is not None:
                        on_batch(summary)
            else:
                complete = True
                if batch:
                    self._batch(spec, batch, summary, owner, rate, started, stop)
                if summary.status == "running":
                    summary.status = "done" if not summary.failed else "interrupted"
        except Stopped:
            summary.status = "interrupted"
        if summary.status == "running":
            summary.status = "interrupted"
        if on_batch is not None:
            on_batch(summary)
        return complete

    def _batch(
        self,
        spec: Spec,
        batch: list[Archived],
        summary: Summary,
        owner: str | None,
        rate: float | None,
        started: float,
        stop: Callable[[], bool],
    ) -> bool:
        """Send one batch (``owner`` None: count it); False: stop (cancelled, interrupted, refused)."""
        if stop():
            summary.status = "interrupted"
            return False
        row = self.progress.get(spec.name)
        if row is not None and row.get("status") == "cancelled":
            summary.status = "cancelled"
            return False
        sources = [source_of(f) for f in batch]
        done = self.progress.done(spec.name, sources)
        group = into_group(spec.into)
        records: list[Record] = []
        grants: list[tuple[str, dict[str, Any]]] = []
        for found, source in zip(batch, sources, strict=True):
            if source in done:
                summary.already += 1
                continue
            planned = self._plan(spec, group, found.entry, source)
            if planned is None:
                summary.skipped += 1
                continue
            record, grant = planned
            records.append(record)
            if grant is not None:
                grants.append(grant)
        if owner is None or not records:
            return True
        if rate:
            # bound the pace: the batch goes once the records sent so far fit the rate; a stop
            # request is heard while it waits
            due = (summary.sent + len(records)) / rate
            while (wait := due - (self.clock() - started)) > 0:
                if stop():
                    summary.status = "interrupted"
                    return False
                self.sleep(min(wait, _NAP))
        if grants:
            with self.needs("messages"):  # before the records: the broker looks for them on arrival
                self.grants.put_many(grants)
        report = self.batcher.put(records)
        sent = [(str(d.record.token), f"{d.shard_id}/{d.sequence_number}") for d in report.delivered]
        self.progress.note(spec.name, sent)
        held = self.progress.update(spec.name, sent=len(sent), owner=owner)
        summary.sent += len(sent)
        summary.failed += len(report.failed)
        summary.problems.extend(f"{f.record.token}: {f.error_code} {f.error_message}" for f in report.failed[:5])
        if not held:
            summary.problems.append("another run took the replay over (this run's claim had lapsed)")
            summary.status = "interrupted"
            return False
        return not report.failed

    def _plan(
        self, spec: Spec, group: str | None, entry: Entry, source: str
    ) -> tuple[Record, tuple[str, dict[str, Any]] | None] | None:
        """The record to put for one archived entry, and the grant the broker needs for it."""
        mark = replays.Mark(spec.name, group)
        verdict = validate(entry.payload)
        header = verdict.header if verdict.valid else None
        key = entry.partition_key or source
        if verdict.is_part:
            return None  # the sequencer released its whole once and keeps its positions: not sent again
        if group is not None:
            if header is None or verdict.message is None:
                return None
            route = RDSS.route(str(header["messageType"]), str(header["messageClass"]))
            if route is None:
                return None
            payload = history.append(entry.payload, history.hop(mark.machine_id), header=header)
            return Record(self.deployment.stream(route.channel), payload, key, token=source), None
        stream = self.deployment.stream("input")
        if header is None or verdict.message is None:
            try:
                payload = history.append(entry.payload, history.hop(mark.machine_id))
            except ValueError:  # not a message at all: it goes back as it is, and is moved again
                payload = entry.payload
            return Record(stream, payload, key, token=source), None
        payload = history.append(entry.payload, history.hop(mark.machine_id), header=header)
        grant = (
            replays.grant_key(spec.name, str(header["messageId"])),
            {DIGEST_ATTRIBUTE: message_digest(verdict.message), "replay": spec.name, "source": source},
        )
        return Record(stream, payload, key, token=source), grant
