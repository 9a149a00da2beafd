"""``rdss trace SHARD/SEQUENCE``: one record of ``input`` followed by its own identity.

A messageId names most records, but not all: an empty record, bytes that are not JSON, a
header without an id. Every record has an identity - the shard and sequence number Kinesis
gave it, which a producer's PutRecords answer and ``rdss local demo`` report and the archive
keeps - and this
follows one: the record on ``input`` (while the stream holds it), the broker's claim of it (or
the note ``rdss redrive`` left when it put the record back, parked, as a new record), its
decorated copies on ``invalid`` and ``error`` (their original bytes are the record's), and
the archive entries of it: its own entry in the audit archive (by identity, each once however
often archived) and the entries of its decorated copies in the errors archive.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import orjson
from botocore.exceptions import ClientError

from rdss.archive import entries as archive
from rdss.model import decoration
from rdss.repository.dynamodb import LocalDataRepository
from rdss.repository.entries import claimable_id, record_key, redriven_key
from rdss.trace.content import is_part
from rdss.trace.findings import is_error
from rdss.trace.sources import ARCHIVE_AFTER, ARCHIVE_BEFORE, DEFAULT_WINDOW, Sources
from rdss.trace.timeline import Dispatch, Event, Timeline

#: A record of a stream, as the broker's Local Data Repository names it.
RECORD = re.compile(r"^(shardId-[0-9]+)/([0-9]+)$")


def is_record(text: str) -> bool:
    return RECORD.match(text) is not None


def trace_record(tracer: Sources, record: str, *, since: datetime | None = None) -> Timeline:
    """What the deployment keeps of one ``input`` record (see the module)."""

    timeline = Timeline(record)
    shard, sequence = record.split("/", 1)
    stream = tracer.deployment.stream("input")
    found = _stream_record(tracer.kinesis, stream, shard, sequence)
    payload, arrived = found if found is not None else (None, None)
    start = since or tracer.now - DEFAULT_WINDOW
    if payload is not None:
        timeline.events.append(Event(arrived, "input", f"record {record} entered input ({len(payload):,} bytes)"))
        dispatch = Dispatch(record, arrived, "pending")
        ldr = LocalDataRepository(tracer.dynamodb, tracer.deployment.table("messages"))
        named = claimable_id(payload)
        kept = ldr.get([record_key(record), redriven_key(record), *([named] if named else [])])
        claimed, note = kept.get(record_key(record)), kept.get(redriven_key(record))
        by_id = kept.get(named or "")
        if note is not None:
            dispatch.outcome = "redriven"
            dispatch.redriven_as = str(note.get("redrivenAs"))
            what = f"record {record}: parked, put back by rdss redrive as record {dispatch.redriven_as}"
            timeline.events.append(Event(None, "redrive", what))
        elif claimed is not None:
            dispatch.error_code = claimed.get("errorCode")
            dispatch.outcome = "error" if is_error(dispatch.error_code) else "invalid"
            dispatch.channels = [dispatch.outcome]
            timeline.events.append(Event(None, "broker", f"record {record}: {dispatch.outcome}, {dispatch.error_code}"))
        elif by_id is not None and by_id.get("claimedBy") == record:  # a valid message: claimed by its id
            dispatch.outcome = "part" if is_part(payload) else "routed"
            timeline.events.append(Event(None, "broker", f"record {record}: claimed messageId {named}"))
        elif by_id is not None:
            dispatch.outcome = "duplicate"
            dispatch.duplicate_of = str(by_id.get("claimedBy"))
            what = f"record {record}: duplicate of record {dispatch.duplicate_of}, dropped"
            timeline.events.append(Event(None, "broker", what))
        timeline.dispatches.append(dispatch)
        for channel in ("invalid", "error"):
            for copy in tracer.read(channel, arrived or start):
                if _original(copy.data) == payload:
                    header = orjson.loads(copy.data).get("messageHeader", {})
                    timeline.channels[channel] = timeline.channels.get(channel, 0) + 1
                    timeline.error_code = header.get("errorCode")
                    timeline.error_description = header.get("errorDescription")
                    what = f"decorated copy as {copy.record} ({timeline.error_code})"
                    timeline.events.append(Event(copy.arrived, channel, what))
    anchor = arrived or since
    window = (anchor - ARCHIVE_BEFORE, anchor + ARCHIVE_AFTER) if anchor else (start - ARCHIVE_BEFORE, tracer.now)
    _archives(tracer, timeline, (stream, shard, sequence), payload, window)
    return timeline


def _archives(
    tracer: Sources, timeline: Timeline, identity: tuple[str, str, str], payload: bytes | None, window: Any
) -> None:
    """The record's entry in the audit archive and its decorated copies' in the errors archive."""
    seen = {"audit": archive.Identities(), "errors": archive.Identities()}
    for where in tracer.archive_entries(window):
        entry = where.entry
        if where.archive == "audit":
            ours = entry.identity == identity
        else:  # a decorated copy: its original bytes are the record's
            ours = payload is not None and _original(entry.payload) == payload
        if not ours or not seen[where.archive].first(entry):
            continue
        if payload is None and where.archive == "audit":
            payload = entry.payload  # past the stream's retention: the archive has it
        found = {
            "archive": where.archive,
            "bucket": where.bucket,
            "key": where.key,
            "line": where.line,
            "record": entry.record,
        }
        timeline.archives.append(found)
        what = f"archived in s3://{where.bucket}/{where.key}, entry {where.line} ({entry.stream} {entry.record})"
        timeline.events.append(Event(entry.arrived or where.written, where.archive, what))


def _stream_record(kinesis: Any, stream: str, shard: str, sequence: str) -> tuple[bytes, datetime | None] | None:
    """The record's bytes and arrival, while the stream holds it."""
    try:
        iterator = kinesis.get_shard_iterator(
            StreamName=stream, ShardId=shard, ShardIteratorType="AT_SEQUENCE_NUMBER", StartingSequenceNumber=sequence
        )["ShardIterator"]
        records = kinesis.get_records(ShardIterator=iterator, Limit=1)["Records"]
    except ClientError:  # past retention, or no such shard
        return None
    if not records or records[0]["SequenceNumber"] != sequence:
        return None
    arrival = records[0].get("ApproximateArrivalTimestamp")
    return records[0]["Data"], arrival.astimezone(UTC) if isinstance(arrival, datetime) else None


def _original(data: bytes) -> bytes | None:
    try:
        return decoration.original(data)
    except (ValueError, KeyError, TypeError, orjson.JSONDecodeError):
        return None
