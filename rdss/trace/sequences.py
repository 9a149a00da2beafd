"""``rdss trace`` of a message sent as a multi-message sequence: its parts and the whole.

A split message never travels under the id its sender was given: its parts carry ids of their
own and a sequence id, both derived from that id (:func:`rdss.model.sequences.sequence_id`). So a trace
of an id no record carries, or of a sequence id, follows the sequence: each part from ``input``
through the broker's claims to ``sequence``, the sequencer's progress in the ``sequences`` table,
and the parts it released - joined again, the reassembled whole a consumer receives (under the
first part's id), or the channel the whole sequence was moved to.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from rdss.model.sequences import SequenceError, join, sequence_id
from rdss.model.validation import validate_message
from rdss.repository.dynamodb import LocalDataRepository
from rdss.trace import findings
from rdss.trace.content import header_of as _header_of
from rdss.trace.sources import ARCHIVE_AFTER, ARCHIVE_BEFORE, Sources
from rdss.trace.timeline import Event, Record, Timeline

_NOT_ROUTED = ("input", "sequence", "invalid", "error")


def trace_sequence(
    tracer: Sources, asked: str, found: Mapping[str, list[Record]], seen: Mapping[str, list[Record]]
) -> Timeline | None:
    """The timeline of the sequence ``asked`` names (a sequence id, or the messageId of a
    message that was split); None when no record belongs to such a sequence. ``found``: each
    channel's records mentioning ``asked``; ``seen``: those and the records mentioning the
    sequence id derived from it (:func:`sequence_id`), read in the same pass."""
    sequence = asked if _holds(found, asked) else sequence_id(asked)
    if sequence != asked:
        needle = sequence.encode()
        found = {c: [r for r in seen[c] if needle in r.data] for c in found}
        if not _holds(found, sequence):
            return None
    timeline = Timeline(asked)
    parts: dict[str, dict[str, Any]] = {}  # part messageId -> its header
    for record in found["input"] + found["sequence"]:
        header = _header_of(record.data) or {}
        if (header.get("messageSequence") or {}).get("sequence") == sequence:
            parts.setdefault(str(header.get("messageId")), header)
    ordered = sorted(parts.items(), key=lambda item: int((item[1]["messageSequence"]).get("position", 0)))
    if ordered:
        timeline.header = ordered[0][1]
        total = ordered[0][1]["messageSequence"].get("total")
        what = f"sequence {sequence}: {len(ordered)} of {total} parts entered"
        if asked != sequence:
            what = f"message {asked} was split: {what}"
        timeline.events.append(Event(None, "producer", what, {"parts": [pid for pid, _ in ordered]}))
    ldr = LocalDataRepository(tracer.dynamodb, tracer.deployment.table("messages"))
    claims = ldr.get([pid for pid, _ in ordered] + [f"record#{r.record}" for r in found["input"]])
    for part_id, header in ordered:
        part = Timeline(part_id)
        findings.dispatches(part, found, claims)
        findings.copies(part, found)
        position = f"part {header['messageSequence'].get('position')}/{header['messageSequence'].get('total')}"
        timeline.dispatches.extend(part.dispatches)
        timeline.events.extend(Event(e.at, e.where, f"{position}: {e.what}", e.details) for e in part.events)
        for channel, count in part.channels.items():
            timeline.channels[channel] = timeline.channels.get(channel, 0) + count
        if len(part.history) > len(timeline.history):
            timeline.history = part.history
    findings.sequence(tracer, timeline, found)
    timeline.whole = _whole(found, sequence)
    if timeline.whole:
        timeline.events.append(Event(None, "sequencer", _describe(timeline.whole), {"whole": timeline.whole}))
    anchors = [d.arrived for d in timeline.dispatches if d.arrived]
    if anchors:
        window = (min(anchors) - ARCHIVE_BEFORE, max(anchors) + ARCHIVE_AFTER)
        for part_id, _ in ordered:
            part = Timeline(part_id)
            findings.archives(tracer, part, sequence.encode(), window)
            timeline.archives.extend(part.archives)
            timeline.events.extend(part.events)
    return timeline


def _holds(found: Mapping[str, list[Record]], sequence: str) -> bool:
    return any(
        ((_header_of(r.data) or {}).get("messageSequence") or {}).get("sequence") == sequence
        for records in found.values()
        for r in records
    )


def _whole(found: Mapping[str, list[Record]], sequence: str) -> dict[str, Any] | None:
    """What became of the whole: reassembled from the parts released to a routed channel, or
    moved with the code every part carries."""
    for channel, records in found.items():
        if channel in _NOT_ROUTED:
            continue
        released: dict[int, dict[str, Any]] = {}
        for record in records:
            part = orjson.loads(record.data)
            seq = part["messageHeader"].get("messageSequence") or {}
            if seq.get("sequence") == sequence:
                released.setdefault(int(seq.get("position", 0)), part)
        if not released:
            continue
        try:
            whole = join(released.values())
        except SequenceError as error:
            return {"channel": channel, "parts": len(released), "reassembled": False, "why": str(error)}
        verdict = validate_message(whole, check_expiry=False)
        header = whole["messageHeader"]
        return {
            "channel": channel,
            "parts": len(released),
            "reassembled": True,
            "messageId": header.get("messageId"),
            "messageType": header.get("messageType"),
            "messageClass": header.get("messageClass"),
            "bodyBytes": len(orjson.dumps(whole["messageBody"])),
            "valid": verdict.valid,
            **({"errorCode": str(verdict.error_code)} if verdict.error_code else {}),
        }
    for channel in ("invalid", "error"):
        codes = {
            (orjson.loads(r.data)["messageHeader"].get("errorCode"))
            for r in found.get(channel, [])
            if ((_header_of(r.data) or {}).get("messageSequence") or {}).get("sequence") == sequence
        }
        if codes:
            return {"channel": channel, "reassembled": False, "errorCode": ", ".join(sorted(map(str, codes)))}
    return None


def _describe(whole: Mapping[str, Any]) -> str:
    if whole.get("reassembled"):
        verdict = "valid" if whole.get("valid") else f"invalid ({whole.get('errorCode')})"
        return (
            f"released to {whole['channel']}: {whole['parts']} parts; the reassembled whole is message "
            f"{whole['messageId']} ({whole['messageType']} {whole['messageClass']}, {whole['bodyBytes']:,} bytes "
            f"of body, {verdict})"
        )
    if "why" in whole:
        return f"released to {whole['channel']}: {whole['parts']} parts that do not join ({whole['why']})"
    return f"the whole sequence was moved to {whole['channel']} ({whole['errorCode']})"
