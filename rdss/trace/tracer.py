"""``rdss trace``: where did message X go? Its timeline, from what the deployment keeps.

An operator's first question in every incident. The answer is read the way
:mod:`rdss.local.accounting` reads it, from the deployment itself, never from the processors'
own counts:

* the channels (for the streams' retention, 24 hours by default): every record holding the
  messageId - the copies producers put on ``input`` (each a stream record, with its own
  identity), the copies the broker and sequencer forwarded (with their messageHistory hops),
  and the decorated copies on
  ``invalid`` and ``error`` (errorCode, errorDescription);
* the broker's Local Data Repository (the ``messages`` table): its claim of the messageId (which
  record claimed it, when), the claims of records it found invalid
  (``record#<shard>/<sequence number>``) and the notes ``rdss redrive`` left for parked records it
  put back (``redriven#<shard>/<sequence number>``: the new record, followed in turn);
* consumers' moves: the decorated copies a gateway receiver put on ``invalid`` or ``error``
  itself, told from the broker's rejections by their partition key ``moved:<group>``
  (:func:`rdss.model.rejection.moved_by`), never by anything in the message;
* the applications' own Local Data Repositories, for the applications named: each gateway keeps
  its entries (TO_SEND, SENT, RECEIVED, the code it moved a message with) in a store of its own
  (the ``ldr=`` of its URL: :mod:`rdss.repository.stores`), never in the broker's table;
* the ``sequences`` table, for a part of a multi-message sequence;
* the archives: the audit objects (every record dispatched to ``input``) and the errors objects
  (``invalid`` and ``error``) that hold the message, listed under the hour prefixes around the
  moment it entered the system (its claim, its arrival, its publishedTimestamp or ``--since``),
  so a trace reads a few hours of archive, not all of it.

Each input record is followed by its own identity, so a message sent twice shows one record
routed and one dropped as a duplicate, and a broken copy sharing a valid message's id shows as
invalid, with its code.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from botocore.exceptions import BotoCoreError, ClientError

from rdss.archive import entries as archive
from rdss.deployment.topology import Deployment
from rdss.model import decoration, history, timestamps
from rdss.model.conflicts import CONFLICT
from rdss.model.errors import ErrorCode
from rdss.model.rejection import moved_by
from rdss.repository.dynamodb import LocalDataRepository
from rdss.repository.entries import Repository, record_key, redriven_key
from rdss.trace.content import carried_header as _carried_header
from rdss.trace.content import header_of as _header_of
from rdss.trace.content import holds as _holds
from rdss.trace.content import is_part as _is_part
from rdss.trace.content import member_object as _object
from rdss.trace.content import mentions as _mentions
from rdss.trace.content import message_id as _message_id
from rdss.trace.replies import add_replies

#: How far before an anchor moment the archives are listed (Firehose buffers up to 15 minutes;
#: a producer's clock may run late) and how far after.
ARCHIVE_BEFORE = timedelta(hours=1)
ARCHIVE_AFTER = timedelta(hours=2)
#: Without --since and without any anchor, the last day is searched.
DEFAULT_WINDOW = timedelta(hours=24)


@dataclass(frozen=True)
class Event:
    """One thing that happened to the message, as the deployment recorded it."""

    at: datetime | None
    where: str
    what: str
    details: Mapping[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "at": timestamps.format(self.at) if self.at else None,
            "where": self.where,
            "what": self.what,
            **({"details": dict(self.details)} if self.details else {}),
        }


@dataclass
class Dispatch:
    """One record put on ``input`` carrying the message, and what the broker decided for it."""

    record: str
    arrived: datetime | None
    outcome: str  # routed | part | invalid | error | duplicate | conflict | redriven | pending
    channels: list[str] = field(default_factory=list)
    error_code: str | None = None
    error_description: str | None = None
    duplicate_of: str | None = None
    #: For a conflict: the record that claimed the messageId first, for a different message.
    conflicts_with: str | None = None
    #: For a record parked and put back by ``rdss redrive``: the record it went back as.
    redriven_as: str | None = None

    def as_dict(self) -> dict[str, Any]:
        found: dict[str, Any] = {"record": self.record, "outcome": self.outcome, "channels": self.channels}
        if self.arrived:
            found["arrived"] = timestamps.format(self.arrived)
        for name, value in (
            ("errorCode", self.error_code),
            ("errorDescription", self.error_description),
            ("duplicateOf", self.duplicate_of),
            ("conflictsWith", self.conflicts_with),
            ("redrivenAs", self.redriven_as),
        ):
            if value:
                found[name] = value
        return found


@dataclass
class Timeline:
    """What ``rdss trace`` found about one messageId."""

    message_id: str
    events: list[Event] = field(default_factory=list)
    dispatches: list[Dispatch] = field(default_factory=list)
    #: channel -> records of the message found there (routed copies, parts, decorated copies)
    channels: dict[str, int] = field(default_factory=dict)
    error_code: str | None = None
    error_description: str | None = None
    history: list[dict[str, Any]] = field(default_factory=list)
    sequence: dict[str, Any] | None = None
    archives: list[dict[str, Any]] = field(default_factory=list)
    header: dict[str, Any] | None = None
    #: consumers' moves of the message: (consumer group, channel, errorCode)
    moves: list[tuple[str, str, str | None]] = field(default_factory=list)
    #: For a sequence (:mod:`rdss.trace.sequences`): what became of the whole message.
    whole: dict[str, Any] | None = None
    #: For a request: each copy of its replies on a channel (:mod:`rdss.trace.replies`).
    replies: list[dict[str, Any]] = field(default_factory=list)

    @property
    def found(self) -> bool:
        return bool(self.events)

    def summary(self) -> str:
        """Where it went, in one line."""
        if not self.found:
            return "nothing found"
        if self.whole is not None:
            return f"sequence {self.sequence_id}: " + _whole_summary(self.whole)
        parts = []
        for outcome in ("routed", "part", "conflict", "invalid", "error", "duplicate", "redriven", "pending"):
            chosen = [d for d in self.dispatches if d.outcome == outcome]
            if not chosen:
                continue
            if outcome == "routed":
                parts.append(f"routed to {', '.join(sorted({c for d in chosen for c in d.channels}))}")
            elif outcome == "part":
                released = [c for c in self.channels if c not in ("input", "sequence", "invalid", "error")]
                where = f"released to {', '.join(released)}" if released else "not released yet"
                parts.append(f"a part of sequence {self.sequence_id}, {where}")
            elif outcome == "conflict":
                parts.append(f"{len(chosen)} record(s) reusing the id for a different message, moved to invalid")
            elif outcome in ("invalid", "error"):
                codes = sorted({d.error_code or "?" for d in chosen})
                parts.append(f"{len(chosen)} record(s) moved to {outcome} ({', '.join(codes)})")
            elif outcome == "duplicate":
                parts.append(f"{len(chosen)} duplicate record(s) dropped")
            elif outcome == "redriven":
                parts.append(f"{len(chosen)} parked record(s) put back by rdss redrive")
            else:
                parts.append(f"{len(chosen)} record(s) not processed yet")
        for group, channel, code in self.moves:
            parts.append(f"moved to {channel} by consumer group {group} ({code})")
        for reply in self.replies:
            parts.append(f"answered by {reply['messageId']} on {reply['channel']}")
        if not self.dispatches:
            moved = [c for c in ("invalid", "error") if c in self.channels and not self._only_moves(c)]
            routed = [c for c in self.channels if c not in ("input", "sequence", "invalid", "error")]
            if routed:
                parts.append(f"found on {', '.join(routed)}")
            if moved:
                parts.append(f"moved to {', '.join(moved)} ({self.error_code})")
            if not parts:
                parts.append("found only in the archives")
        return "; ".join(parts)

    def _only_moves(self, channel: str) -> bool:
        """Whether every copy of the message on ``channel`` is a consumer's move."""
        return self.channels.get(channel, 0) <= sum(1 for _, c, _ in self.moves if c == channel)

    @property
    def sequence_id(self) -> str | None:
        return self.sequence.get("sequence") if self.sequence else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "messageId": self.message_id,
            "found": self.found,
            "summary": self.summary(),
            "messageType": (self.header or {}).get("messageType"),
            "messageClass": (self.header or {}).get("messageClass"),
            "records": [d.as_dict() for d in self.dispatches],
            "channels": self.channels,
            "errorCode": self.error_code,
            "errorDescription": self.error_description,
            "messageHistory": self.history,
            "sequence": self.sequence,
            **({"whole": self.whole} if self.whole is not None else {}),
            "archives": self.archives,
            "moves": [{"group": g, "channel": c, "errorCode": code} for g, c, code in self.moves],
            "replies": self.replies,
            "events": [e.as_dict() for e in sorted(self.events, key=_order)],
        }

    def lines(self) -> list[str]:
        """The timeline for a terminal."""
        header = self.header or {}
        title = f"message {self.message_id}"
        if header:
            title += f" - {header.get('messageType')} {header.get('messageClass')}"
        out = [title]
        for event in sorted(self.events, key=_order):
            stamp = timestamps.format(event.at) if event.at else " " * 24
            out.append(f"  {stamp}  {event.where:<10} {event.what}")
        out.append(f"where it went: {self.summary()}")
        return out


def _whole_summary(whole: Mapping[str, Any]) -> str:
    if whole.get("reassembled"):
        verdict = "valid" if whole.get("valid") else f"invalid, {whole.get('errorCode')}"
        return f"released to {whole['channel']}, reassembled as message {whole['messageId']} ({verdict})"
    if "why" in whole:
        return f"released to {whole['channel']}, parts that do not join"
    return f"moved to {whole['channel']} ({whole.get('errorCode')})"


def _order(event: Event) -> tuple[float, str]:
    return (event.at.timestamp() if event.at else float("inf"), event.where)


@dataclass(frozen=True)
class _Record:
    channel: str
    shard: str
    sequence_number: str
    arrived: datetime | None
    data: bytes
    partition_key: str = ""

    @property
    def record(self) -> str:
        return f"{self.shard}/{self.sequence_number}"


class Tracer:
    """Reads one Kinesis deployment (see the module docstring)."""

    def __init__(
        self,
        deployment: Deployment,
        *,
        kinesis: Any,
        dynamodb: Any,
        s3: Any,
        buckets: Mapping[str, str] | None = None,
        repositories: Mapping[str, Repository] | None = None,
        now: datetime | None = None,
    ) -> None:
        """
        Args:
            repositories: application -> its Local Data Repository, whose entries for the
                message join the timeline.
        """
        self.deployment = deployment
        self.kinesis = kinesis
        self.dynamodb = dynamodb
        self.s3 = s3
        self.buckets = {name: deployment.bucket(name) for name in ("audit", "errors")} | dict(buckets or {})
        self.repositories = dict(repositories or {})
        self.now = now or timestamps.now()

    def trace(self, message_id: str, *, since: datetime | None = None) -> Timeline:
        """The timeline of a messageId, or of one ``input`` record named ``SHARD/SEQUENCE``
        (:mod:`rdss.trace.records`: for a record no messageId names, such as an empty one)."""
        from rdss.trace.records import is_record, trace_record

        if is_record(message_id):
            return trace_record(self, message_id, since=since)
        timeline = Timeline(message_id)
        needle = message_id.encode()
        start = since or self.now - DEFAULT_WINDOW
        found = {
            c.name: [r for r in self._read(c.name, start) if _mentions(r.data, needle)]
            for c in self.deployment.topology.channels
        }
        if not any(_message_id(r.data) == message_id for records in found.values() for r in records):
            from rdss.trace.sequences import trace_sequence  # it builds on this module

            sequenced = trace_sequence(self, message_id, found, start)
            if sequenced is not None:
                return sequenced
        header = self._header(found)
        timeline.header = header
        if header is not None:
            published = _parse_time(_object(header, "messageTimings").get("publishedTimestamp"))
            timeline.events.append(
                Event(published, "producer", f"published by {header.get('generator')}", {"header": header})
            )
        ldr = LocalDataRepository(self.dynamodb, self.deployment.table("messages"))
        keys = [message_id, *(k for r in found["input"] for k in (record_key(r.record), redriven_key(r.record)))]
        claims = ldr.get(keys)
        self._gateway_entries(timeline)
        self._dispatches(timeline, found, claims)
        self._copies(timeline, found)
        add_replies(timeline, found)
        self._sequence(timeline, found)
        anchors = [d.arrived for d in timeline.dispatches if d.arrived]
        claim = claims.get(message_id)
        if claim and claim.get("receivedAt"):
            anchors.append(datetime.fromtimestamp(int(claim["receivedAt"]), UTC))
        if header is not None and not anchors:
            published = _parse_time(_object(header, "messageTimings").get("publishedTimestamp"))
            if published:
                anchors.append(published)
        if anchors:
            window = (min(anchors) - ARCHIVE_BEFORE, max(anchors) + ARCHIVE_AFTER)
        else:
            window = (start - ARCHIVE_BEFORE, (since + DEFAULT_WINDOW) if since else self.now)
        self._archives(timeline, needle, window)
        return timeline

    # -- what the channels hold ----------------------------------------------------------------
    def _read(self, channel: str, start: datetime) -> Iterator[_Record]:
        stream = self.deployment.stream(channel)
        try:
            shards = self.kinesis.list_shards(StreamName=stream)["Shards"]
        except ClientError:
            return
        for shard in shards:
            iterator = self.kinesis.get_shard_iterator(
                StreamName=stream, ShardId=shard["ShardId"], ShardIteratorType="AT_TIMESTAMP", Timestamp=start
            )["ShardIterator"]
            while iterator:
                response = self.kinesis.get_records(ShardIterator=iterator, Limit=10_000)
                for r in response["Records"]:
                    arrival = r.get("ApproximateArrivalTimestamp")
                    arrived = arrival.astimezone(UTC) if isinstance(arrival, datetime) else None
                    yield _Record(
                        channel, shard["ShardId"], r["SequenceNumber"], arrived, r["Data"], r.get("PartitionKey", "")
                    )
                if not response["Records"] and not response.get("MillisBehindLatest"):
                    break
                iterator = response.get("NextShardIterator")

    def _header(self, found: Mapping[str, list[_Record]]) -> dict[str, Any] | None:
        """The message's header, from its first readable copy."""
        for channel in ("input", *(c for c in found if c != "input")):
            for record in found.get(channel, []):
                header = _header_of(record.data)
                if header is not None:
                    return header
        return None

    def _gateway_entries(self, timeline: Timeline) -> None:
        for app, repository in self.repositories.items():
            entry = repository.entry(timeline.message_id)
            if entry is not None:
                details = {"messageId": entry.message_id, **{k: v for k, v in entry.attributes().items() if v}}
                what = f"{app}'s Local Data Repository: {entry.status}"
                what += f" (moved with {entry.error_code})" if entry.error_code else ""
                timeline.events.append(Event(None, "gateway", what, details))

    def _dispatches(
        self, timeline: Timeline, found: Mapping[str, list[_Record]], claims: Mapping[str, dict[str, Any]]
    ) -> None:
        """Each input record holding the message, and what the broker decided for it."""
        claim = claims.get(timeline.message_id)
        for record in found["input"]:
            if not _holds(record.data, timeline.message_id):
                continue  # another message naming this id (a reply's correlationId, say)
            timeline.events.append(Event(record.arrived, "input", f"record {record.record} entered input"))
            dispatch = Dispatch(record.record, record.arrived, "pending")
            record_claim = claims.get(record_key(record.record))
            note = claims.get(redriven_key(record.record))
            if note is not None:  # its batch was parked: put back as a new record, traced as itself
                dispatch.outcome = "redriven"
                dispatch.redriven_as = str(note.get("redrivenAs"))
                what = f"record {record.record}: parked, put back by rdss redrive as record {dispatch.redriven_as}"
                timeline.events.append(Event(_noted_at(note), "redrive", what))
            elif record_claim is not None and record_claim.get("status") == CONFLICT:
                dispatch.outcome = "conflict"
                dispatch.channels = ["invalid"]
                dispatch.error_code = record_claim.get("errorCode")
                dispatch.conflicts_with = record_claim.get("conflictsWith")
                what = (
                    f"record {record.record}: CONFLICT - a different message under this messageId, which record "
                    f"{dispatch.conflicts_with} claimed first; moved to invalid ({dispatch.error_code})"
                )
                timeline.events.append(Event(_claimed_at(record_claim), "broker", what, {"claim": record_claim}))
            elif record_claim is not None:
                dispatch.outcome = "error" if _is_error(record_claim.get("errorCode")) else "invalid"
                dispatch.channels = [dispatch.outcome]
                dispatch.error_code = record_claim.get("errorCode")
                moved = _decorated_copy(found, record.data)
                if moved is not None:
                    dispatch.error_description = moved.get("errorDescription")
                what = f"record {record.record}: invalid, {dispatch.error_code}"
                what += f" ({dispatch.error_description})" if dispatch.error_description else ""
                timeline.events.append(Event(_claimed_at(record_claim), "broker", what))
            elif claim is not None and claim.get("claimedBy") == record.record:
                dispatch.outcome = "part" if _is_part(record.data) else "routed"
                routed = [
                    r.channel
                    for c, records in found.items()
                    if c not in ("input", "invalid", "error")
                    for r in records
                    if history.extends(record.data, r.data)
                ]
                dispatch.channels = sorted(set(routed))
                what = f"claimed the messageId for record {record.record} ({claim.get('status')})"
                timeline.events.append(Event(_claimed_at(claim), "broker", what, {"claim": claim}))
            elif claim is not None:
                dispatch.outcome = "duplicate"
                dispatch.duplicate_of = claim.get("claimedBy")
                what = f"record {record.record}: duplicate of record {dispatch.duplicate_of}, dropped"
                timeline.events.append(Event(record.arrived, "broker", what))
            timeline.dispatches.append(dispatch)

    def _copies(self, timeline: Timeline, found: Mapping[str, list[_Record]]) -> None:
        """The copies on the other channels: where they are, their hops, their error codes."""
        for channel, records in found.items():
            if channel == "input":
                continue
            for record in records:
                header = _header_of(record.data)
                if header is None or (header.get("messageId") != timeline.message_id):
                    continue
                timeline.channels[channel] = timeline.channels.get(channel, 0) + 1
                if channel in ("invalid", "error"):
                    outer = orjson.loads(record.data)["messageHeader"]
                    code, description = outer.get("errorCode"), outer.get("errorDescription")
                    group = moved_by(record.partition_key)
                    if group is not None:  # put there by a consumer, keyed as its move
                        timeline.moves.append((group, channel, code))
                        what = f"moved to {channel} by consumer group {group}: {code} {description}"
                    else:
                        timeline.error_code, timeline.error_description = code, description
                        what = f"moved to {channel}: {code} {description}"
                else:
                    what = f"on {channel}"
                hops = (
                    history.hops(record.data)
                    if channel not in ("invalid", "error")
                    else header.get("messageHistory", [])
                )
                if len(hops) > len(timeline.history):
                    timeline.history = hops
                timeline.events.append(Event(record.arrived, channel, what, {"record": record.record}))
        for hop in timeline.history:
            timeline.events.append(
                Event(
                    _parse_time(hop.get("timestamp")),
                    "hop",
                    f"{hop.get('machineId')} ({hop.get('machineAddress')}) forwarded it (messageHistory)",
                )
            )
        if timeline.dispatches:
            timeline.channels["input"] = len(timeline.dispatches)

    def _sequence(self, timeline: Timeline, found: Mapping[str, list[_Record]]) -> None:
        sequence = _object(timeline.header or {}, "messageSequence")
        if sequence.get("total", 1) == 1 or not isinstance(sequence.get("sequence"), str):
            return
        info: dict[str, Any] = {
            "sequence": sequence.get("sequence"),
            "position": sequence.get("position"),
            "total": sequence.get("total"),
        }
        try:
            item = self.dynamodb.get_item(
                TableName=self.deployment.table("sequences"),
                Key={"sequence": {"S": sequence["sequence"]}},
                ConsistentRead=True,
            ).get("Item")
        except (ClientError, BotoCoreError):
            item = None
        if item:
            info["status"] = item.get("status", {}).get("S")
            info["positionsSeen"] = sorted(int(p) for p in item.get("positions", {}).get("NS", []))
            seen = f"{len(info['positionsSeen'])} of {sequence.get('total')} parts"
            timeline.events.append(
                Event(
                    None, "sequencer", f"sequence {sequence['sequence']}: {info['status']} ({seen})", {"sequence": info}
                )
            )
        timeline.sequence = info

    # -- what the archives hold ----------------------------------------------------------------
    def _archives(self, timeline: Timeline, needle: bytes, window: tuple[datetime, datetime]) -> None:
        """The archive entries that hold the message, each record once (an entry archived again
        has the same identity)."""
        for bucket, base in (("audit", "audit/"), ("errors", "errors/")):
            name = self.buckets[bucket]
            seen = archive.Identities()
            for prefix in _hour_prefixes(base, *window, errors=bucket == "errors"):
                for key, written in self._keys(name, prefix):
                    try:
                        entries = archive.read(self.s3.get_object(Bucket=name, Key=key)["Body"].read())
                    except (ClientError, OSError, EOFError):
                        continue
                    for number, entry in enumerate(entries, 1):
                        if not _mentions(entry.payload, needle) or not _holds(entry.payload, timeline.message_id):
                            continue
                        if not seen.first(entry):
                            continue
                        found: dict[str, Any] = {"archive": bucket, "bucket": name, "key": key, "line": number}
                        what = f"archived in s3://{name}/{key}, entry {number}"
                        if entry.identity is not None:
                            found |= {"stream": entry.stream, "record": entry.record, "arrival": entry.arrival}
                            what += f" ({entry.stream} {entry.record})"
                        outer = (_carried_header(entry.payload) or {}) if bucket == "errors" else {}
                        if outer.get("errorCode"):
                            found["errorCode"] = outer["errorCode"]
                            what += f" ({outer['errorCode']})"
                        timeline.archives.append(found)
                        timeline.events.append(Event(entry.arrived or written, bucket, what))

    def _keys(self, bucket: str, prefix: str) -> list[tuple[str, datetime | None]]:
        """The objects under one hour prefix, and when each was written."""
        keys: list[tuple[str, datetime | None]] = []
        try:
            for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
                for entry in page.get("Contents", []):
                    written = entry.get("LastModified")
                    keys.append((entry["Key"], written.astimezone(UTC) if isinstance(written, datetime) else None))
        except ClientError:
            return []
        return keys


def _hour_prefixes(base: str, start: datetime, end: datetime, *, errors: bool) -> list[str]:
    """The hour prefixes from ``start`` to ``end`` (for errors: under invalid/ and error/)."""
    bases = [f"{base}invalid/", f"{base}error/"] if errors else [base]
    hour = start.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    prefixes: list[str] = []
    while hour <= end:
        prefixes.extend(archive.hour_prefix(b, hour) for b in bases)
        hour += timedelta(hours=1)
    return prefixes


def _decorated_copy(found: Mapping[str, list[_Record]], payload: bytes) -> dict[str, Any] | None:
    """The outer header (errorCode, errorDescription) of the decorated copy of ``payload``."""
    for channel in ("invalid", "error"):
        for record in found[channel]:
            if moved_by(record.partition_key) is not None:  # a consumer's move, not the broker's verdict
                continue
            try:
                original = decoration.original(record.data)
            except (ValueError, orjson.JSONDecodeError, KeyError):
                continue
            if history.extends(payload, original):
                header: dict[str, Any] = orjson.loads(record.data)["messageHeader"]
                return header
    return None


def _is_error(code: Any) -> bool:
    try:
        return ErrorCode(str(code)).channel.value == "error"
    except ValueError:
        return False


def _noted_at(note: Mapping[str, Any]) -> datetime | None:
    at = note.get("redrivenAt")
    return datetime.fromtimestamp(int(at), UTC) if isinstance(at, int) else None


def _claimed_at(claim: Mapping[str, Any]) -> datetime | None:
    received = claim.get("receivedAt")
    return datetime.fromtimestamp(int(received), UTC) if received is not None else None


def _parse_time(text: Any) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        return timestamps.parse(text)
    except ValueError:
        return None
