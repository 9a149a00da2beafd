"""``rdss trace``: where did message X go? Its timeline, from what the deployment keeps.

An operator's first question in every incident. The answer is read the way
:mod:`rdss.local.accounting` reads it, from the deployment itself, never from the processors'
own counts:

* the channels (for the streams' retention, a week by default): every record holding the
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

from datetime import UTC, datetime

from rdss.model.sequences import sequence_id
from rdss.repository.dynamodb import LocalDataRepository
from rdss.repository.entries import record_key, redriven_key
from rdss.trace import findings
from rdss.trace.content import member_object as _object
from rdss.trace.content import mentions as _mentions
from rdss.trace.content import message_id as _message_id
from rdss.trace.records import is_record, trace_record
from rdss.trace.replies import add_replies
from rdss.trace.sequences import trace_sequence
from rdss.trace.sources import ARCHIVE_AFTER, ARCHIVE_BEFORE, DEFAULT_WINDOW, Sources
from rdss.trace.timeline import Dispatch, Event, Record, Timeline

__all__ = ["Dispatch", "Event", "Record", "Timeline", "Tracer"]


class Tracer(Sources):
    """The trace of one Kinesis deployment (see the module docstring): its :class:`Sources`,
    read for a messageId, a sequence or one ``input`` record, into a :class:`Timeline`."""

    def trace(self, message_id: str, *, since: datetime | None = None) -> Timeline:
        """The timeline of a messageId, or of one ``input`` record named ``SHARD/SEQUENCE``
        (:mod:`rdss.trace.records`: for a record no messageId names, such as an empty one)."""
        if is_record(message_id):
            return trace_record(self, message_id, since=since)
        timeline = Timeline(message_id)
        needle = message_id.encode()
        start = since or self.now - DEFAULT_WINDOW
        # one pass over each channel for both ids a trace may need: the messageId, and the
        # sequence id a split message's parts carry instead (reading a week of a stream twice
        # would cost twice the shard's read throughput)
        split = sequence_id(message_id).encode()
        seen = {
            c.name: [r for r in self.read(c.name, start) if _mentions(r.data, needle) or split in r.data]
            for c in self.deployment.topology.channels
        }
        found = {channel: [r for r in records if _mentions(r.data, needle)] for channel, records in seen.items()}
        if not any(_message_id(r.data) == message_id for records in found.values() for r in records):
            sequenced = trace_sequence(self, message_id, found, seen)
            if sequenced is not None:
                return sequenced
        header = findings.header(found, message_id)
        timeline.header = header
        if header is not None:
            published = findings.parse_time(_object(header, "messageTimings").get("publishedTimestamp"))
            timeline.events.append(
                Event(published, "producer", f"published by {header.get('generator')}", {"header": header})
            )
        ldr = LocalDataRepository(self.dynamodb, self.deployment.table("messages"))
        keys = [message_id, *(k for r in found["input"] for k in (record_key(r.record), redriven_key(r.record)))]
        keys += findings.replay_keys(found["input"], message_id)
        claims = ldr.get(keys)
        findings.gateway_entries(self, timeline)
        findings.dispatches(timeline, found, claims)
        findings.copies(timeline, found)
        add_replies(timeline, found)
        findings.sequence(self, timeline, found)
        anchors = [d.arrived for d in timeline.dispatches if d.arrived]
        claim = claims.get(message_id)
        if claim and claim.get("receivedAt"):
            anchors.append(datetime.fromtimestamp(int(claim["receivedAt"]), UTC))
        if header is not None and not anchors:
            published = findings.parse_time(_object(header, "messageTimings").get("publishedTimestamp"))
            if published:
                anchors.append(published)
        if anchors:
            window = (min(anchors) - ARCHIVE_BEFORE, max(anchors) + ARCHIVE_AFTER)
        else:
            window = (start - ARCHIVE_BEFORE, (since + DEFAULT_WINDOW) if since else self.now)
        findings.archives(self, timeline, needle, window)
        return timeline
