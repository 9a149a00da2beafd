"""The steps of a trace: each reads what one source holds of a message and adds it to its
:class:`~rdss.trace.timeline.Timeline` - the header, the gateways' own entries, the broker's
decision for each input record, the copies on the other channels, the sequence's progress and
the archive entries. :mod:`rdss.trace.tracer` runs them for a messageId, and
:mod:`rdss.trace.sequences` for each part of a sequence."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import orjson
from botocore.exceptions import BotoCoreError, ClientError

from rdss.archive import entries as archive
from rdss.model import decoration, history, timestamps
from rdss.model import replay as replays
from rdss.model.conflicts import CONFLICT
from rdss.model.errors import ErrorCode
from rdss.model.rejection import moved_by
from rdss.repository.entries import record_key, redriven_key
from rdss.trace.content import carried_header as _carried_header
from rdss.trace.content import header_of as _header_of
from rdss.trace.content import holds as _holds
from rdss.trace.content import is_part as _is_part
from rdss.trace.content import member_object as _object
from rdss.trace.content import mentions as _mentions
from rdss.trace.sources import Sources
from rdss.trace.timeline import Dispatch, Event, Record, Timeline


def header(found: Mapping[str, list[Record]], message_id: str) -> dict[str, Any] | None:
    """The message's header, from its first readable copy: one whose header is the message's
    own (a reply names the id too, as its correlationId, and may come first); failing that, the
    first readable header among the records that mention the id."""
    channels = ("input", *(c for c in found if c != "input"))
    readable = [h for c in channels for r in found.get(c, []) if (h := _header_of(r.data)) is not None]
    own = [h for h in readable if h.get("messageId") == message_id]
    chosen = own or readable
    return chosen[0] if chosen else None


def gateway_entries(sources: Sources, timeline: Timeline) -> None:
    for app, repository in sources.repositories.items():
        entry = repository.entry(timeline.message_id)
        if entry is not None:
            details = {"messageId": entry.message_id, **{k: v for k, v in entry.attributes().items() if v}}
            what = f"{app}'s Local Data Repository: {entry.status}"
            what += f" (moved with {entry.error_code})" if entry.error_code else ""
            timeline.events.append(Event(None, "gateway", what, details))
            if entry.translated_from and entry.delivered_as:
                # translation happens in the receiver's process: its entry is the only record of it
                hop = f"translated {entry.translated_from} -> {entry.delivered_as} for {app}"
                versions = {"from": entry.translated_from, "to": entry.delivered_as, "application": app}
                timeline.events.append(Event(None, "translation", hop, versions))


def dispatches(timeline: Timeline, found: Mapping[str, list[Record]], claims: Mapping[str, dict[str, Any]]) -> None:
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
            dispatch.outcome = "error" if is_error(record_claim.get("errorCode")) else "invalid"
            dispatch.channels = [dispatch.outcome]
            dispatch.error_code = record_claim.get("errorCode")
            moved = _decorated_copy(found, record.data)
            if moved is not None:
                dispatch.error_description = moved.get("errorDescription")
            what = f"record {record.record}: invalid, {dispatch.error_code}"
            what += f" ({dispatch.error_description})" if dispatch.error_description else ""
            timeline.events.append(Event(_claimed_at(record_claim), "broker", what))
        elif (replayed := _replay_claim(claims, record, timeline.message_id)) is not None:
            name, replay_claim = replayed
            dispatch.outcome = "replayed"
            dispatch.channels = _routed_to(found, record)
            what = f"record {record.record}: sent again by rdss replay {name}, claimed under the replay and routed"
            timeline.events.append(Event(_claimed_at(replay_claim), "broker", what, {"claim": replay_claim}))
        elif claim is not None and claim.get("claimedBy") == record.record:
            dispatch.outcome = "part" if _is_part(record.data) else "routed"
            dispatch.channels = _routed_to(found, record)
            what = f"claimed the messageId for record {record.record} ({claim.get('status')})"
            timeline.events.append(Event(_claimed_at(claim), "broker", what, {"claim": claim}))
        elif claim is not None:
            dispatch.outcome = "duplicate"
            dispatch.duplicate_of = claim.get("claimedBy")
            what = f"record {record.record}: duplicate of record {dispatch.duplicate_of}, dropped"
            timeline.events.append(Event(record.arrived, "broker", what))
        timeline.dispatches.append(dispatch)


def _routed_to(found: Mapping[str, list[Record]], record: Record) -> list[str]:
    """The data channels holding a copy of input ``record`` as the broker routed it (its
    history extended by the broker's hop), in name order."""
    return sorted(
        {
            copy.channel
            for channel, records in found.items()
            if channel not in ("input", "invalid", "error")
            for copy in records
            if history.extends(record.data, copy.data)
        }
    )


def _replay_claim(
    claims: Mapping[str, dict[str, Any]], record: Record, message_id: str
) -> tuple[str, dict[str, Any]] | None:
    """(the replay, its claim) when ``record`` is a replay the broker claimed (:mod:`rdss.model.replay`)."""
    header = _header_of(record.data)
    mark = replays.requested(header) if header is not None else None
    claim = claims.get(replays.claim_key(mark.name, message_id)) if mark is not None else None
    if mark is None or claim is None or claim.get("claimedBy") != record.record:
        return None
    return mark.name, claim


def replay_keys(records: list[Record], message_id: str) -> list[str]:
    """The keys a replay's claims of ``message_id`` lie under, for the records that say they are one."""
    keys = []
    for record in records:
        header = _header_of(record.data)
        mark = replays.requested(header) if header is not None else None
        if mark is not None:
            keys.append(replays.claim_key(mark.name, message_id))
    return keys


def copies(timeline: Timeline, found: Mapping[str, list[Record]]) -> None:
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
                history.hops(record.data) if channel not in ("invalid", "error") else header.get("messageHistory", [])
            )
            if len(hops) > len(timeline.history):
                timeline.history = hops
            timeline.events.append(Event(record.arrived, channel, what, {"record": record.record}))
    for hop in timeline.history:
        timeline.events.append(
            Event(
                parse_time(hop.get("timestamp")),
                "hop",
                f"{hop.get('machineId')} ({hop.get('machineAddress')}) forwarded it (messageHistory)",
            )
        )
    if timeline.dispatches:
        timeline.channels["input"] = len(timeline.dispatches)


def sequence(sources: Sources, timeline: Timeline, found: Mapping[str, list[Record]]) -> None:
    sequence = _object(timeline.header or {}, "messageSequence")
    if sequence.get("total", 1) == 1 or not isinstance(sequence.get("sequence"), str):
        return
    info: dict[str, Any] = {
        "sequence": sequence.get("sequence"),
        "position": sequence.get("position"),
        "total": sequence.get("total"),
    }
    try:
        item = sources.dynamodb.get_item(
            TableName=sources.deployment.table("sequences"),
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
            Event(None, "sequencer", f"sequence {sequence['sequence']}: {info['status']} ({seen})", {"sequence": info})
        )
    timeline.sequence = info


def archives(sources: Sources, timeline: Timeline, needle: bytes, window: tuple[datetime, datetime]) -> None:
    """The archive entries that hold the message, each record once (an entry archived again
    has the same identity)."""
    seen = {"audit": archive.Identities(), "errors": archive.Identities()}
    for where in sources.archive_entries(window):
        entry = where.entry
        if not _mentions(entry.payload, needle) or not _holds(entry.payload, timeline.message_id):
            continue
        if not seen[where.archive].first(entry):
            continue
        found: dict[str, Any] = {"archive": where.archive, "bucket": where.bucket, "key": where.key, "line": where.line}
        what = f"archived in s3://{where.bucket}/{where.key}, entry {where.line}"
        if entry.identity is not None:
            found |= {"stream": entry.stream, "record": entry.record, "arrival": entry.arrival}
            what += f" ({entry.stream} {entry.record})"
        outer = (_carried_header(entry.payload) or {}) if where.archive == "errors" else {}
        if outer.get("errorCode"):
            found["errorCode"] = outer["errorCode"]
            what += f" ({outer['errorCode']})"
        timeline.archives.append(found)
        timeline.events.append(Event(entry.arrived or where.written, where.archive, what))


def _decorated_copy(found: Mapping[str, list[Record]], payload: bytes) -> dict[str, Any] | None:
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


def is_error(code: Any) -> bool:
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


def parse_time(text: Any) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        return timestamps.parse(text)
    except ValueError:
        return None
