"""The replies in a trace: the Documents that answer a request (their correlationId is its messageId).

A MetadataRead or VocabularyRead Command is answered by a Document whose ``correlationId`` names
the request, routed by the broker to the request's returnAddress (``responses`` unless it named
another). The channels :class:`rdss.trace.tracer.Tracer` reads for a messageId already hold the reply (its
header mentions the id), so replies are picked out of the records read - by their header, a
Document whose correlationId is the traced messageId - and each copy becomes an event of the
request's timeline: the reply delivered on a channel, or moved to ``invalid`` or ``error`` (a reply
the broker refused, or a consumer moved). A failure reply (errorCode in its header) says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rdss.trace.content import header_of
from rdss.trace.timeline import Event, Record, Timeline


def add_replies(timeline: Timeline, found: Mapping[str, Sequence[Record]]) -> None:
    """Every copy of a reply to ``timeline``'s message on the channels but ``input`` (where it
    only entered), as events and as ``timeline.replies``."""

    for channel, records in found.items():
        if channel == "input":
            continue
        for record in records:
            reply = _reply(record.data, timeline.message_id)
            if reply is None:
                continue
            code = reply.get("errorCode")
            described = f"{reply['messageType']} Document {reply['messageId']}"
            if channel in ("invalid", "error"):
                what = f"its reply, {described}, moved to {channel}"
            else:
                what = f"answered by {described} on {channel}"
            if code and channel not in ("invalid", "error"):
                what += f": a failure reply, {code} {reply.get('errorDescription') or ''}".rstrip()
            elif code:
                what += f" ({code})"
            timeline.replies.append({"messageId": reply["messageId"], "channel": channel, "record": record.record})
            timeline.events.append(Event(record.arrived, "reply", what, {"record": record.record}))


def _reply(data: bytes, message_id: str) -> dict[str, Any] | None:
    """The header of ``data`` if it is a Document answering ``message_id`` (and not the message
    itself), else None."""
    header = header_of(data)
    if header is None or header.get("correlationId") != message_id or header.get("messageId") == message_id:
        return None
    if header.get("messageClass") != "Document" or not isinstance(header.get("messageId"), str):
        return None
    return {**header, "messageType": str(header.get("messageType"))}
