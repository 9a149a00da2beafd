"""Where did every input go? Accounting for published records from what the system left behind.

Nothing here asks the processors what they did: the answer is read from the channels, the
broker's Local Data Repository and the archives, the way an operator would establish it.

* A record whose message the broker claimed for itself (``claimedBy`` names the record) was
  routed - its bytes are on a routed channel, unchanged - unless its sequence was rejected or
  swept, in which case its decorated bytes are on the invalid or error channel.
* A record whose messageId another record had already claimed was a duplicate.
* A record the broker classified as invalid was claimed under its record identity, and its
  decorated bytes (original bytes intact) are on the invalid or error channel.
* A record ``rdss redrive`` put back after its batch was parked became another record, named by
  the note redrive left (``redriven#<record>``, in the broker's table, which only the system's
  own roles write): its fate is that record's.

Only the processors' rejections answer for a published record. A consumer's move - a record a
gateway receiver put on ``invalid`` or ``error`` itself, keyed ``moved:<group>``
(:func:`rdss.model.rejection.moved_by`) - never entered ``input``: it is listed apart
(:attr:`Accounting.moves`), whatever its header holds. A record of those channels that cannot be
read back (not a decorated record, a claim check kept elsewhere) is counted, never a crash.

The audit archive is read as entries (:mod:`rdss.archive.entries`), each record counted once by its
identity however many times it was archived (Firehose and a restarted archiver are at least once).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from typing import Any

import orjson
from botocore.exceptions import ClientError

from rdss.archive import entries as archive
from rdss.deployment.topology import RDSS
from rdss.local.runtime import Published, Runtime
from rdss.model import decoration, history
from rdss.model.rejection import moved_by
from rdss.processors.sequencer.store import PENDING
from rdss.repository.dynamodb import LocalDataRepository
from rdss.repository.entries import record_key, redriven_key

ROUTED = tuple(c.name for c in RDSS.channels_of("routed"))
OUTCOMES = ("routed", "invalid", "error", "duplicate", "refused")
#: How many times one record is followed from a parked record to the one it was put back as.
_MAX_REDRIVES = 32


@dataclass
class Input:
    """One thing a producer published: a file, or one item of the built-in workload."""

    name: str
    published: list[Published]


@dataclass
class Accounted:
    name: str
    records: int
    #: routed | invalid | error | duplicate | refused (Kinesis did not take the record) |
    #: pending (a sequence still waiting) | unaccounted
    outcome: str
    channels: list[str]
    error_code: str | None
    error_description: str | None = None
    #: The stream records it was published as (``shard/sequence number``), its own identity.
    stream_records: list[str] = field(default_factory=list)
    #: The messageId of its first record, when it has one (what ``rdss trace`` takes).
    message_id: str | None = None

    def as_report(self) -> dict[str, Any]:
        report: dict[str, Any] = {
            "file": self.name,
            "records": self.records,
            "outcome": self.outcome,
            "channels": self.channels,
            "errorCode": self.error_code,
        }
        if self.error_description:
            report["errorDescription"] = self.error_description
        if self.stream_records:
            report["streamRecords"] = self.stream_records
        if self.message_id:
            report["messageId"] = self.message_id
        return report


@dataclass(frozen=True)
class Move:
    """A record a consumer moved to ``invalid`` or ``error`` itself."""

    group: str
    channel: str
    error_code: str | None
    #: The messageId of the record it moved, when it has one.
    message_id: str | None


@dataclass
class Accounting:
    inputs: list[Accounted]
    channels: dict[str, int]
    audit_objects: int
    #: the payload of every record in the audit archive, each identity once
    audit_records: list[bytes] = field(repr=False)
    #: per routed messageId, how many times it appears on the routed channels
    routed_ids: Counter[str] = field(default_factory=Counter, repr=False)
    #: the consumers' moves found on invalid and error (none of them entered input)
    moves: list[Move] = field(default_factory=list)
    #: records of invalid and error that could not be read back as decorated records
    unreadable: int = 0
    #: audit entries left out as another copy of a record already counted (an identity archived again)
    audit_repeats: int = 0

    def outcomes(self) -> Counter[str]:
        return Counter(i.outcome for i in self.inputs)


def read_channel(runtime: Runtime, channel: str) -> list[bytes]:
    """Every record of a channel, from the start of each shard."""
    return read_stream(runtime.endpoint.client("kinesis"), runtime.deployment.stream(channel))


@dataclass(frozen=True)
class StreamRecord:
    """One record of a stream: its data and the partition key it was put with (which tells a
    consumer's move, ``moved:<group>``, from the broker's rejections: :func:`rdss.model.rejection.moved_by`)."""

    partition_key: str
    data: bytes


def read_stream(kinesis: Any, stream: str) -> list[bytes]:
    """Every record of a stream, shard by shard, from the start."""
    return [record.data for record in read_stream_records(kinesis, stream)]


def read_stream_records(kinesis: Any, stream: str) -> list[StreamRecord]:
    """Every record of a stream with its partition key, shard by shard, from the start."""
    found: list[StreamRecord] = []
    for shard in kinesis.list_shards(StreamName=stream)["Shards"]:
        iterator = kinesis.get_shard_iterator(
            StreamName=stream, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        while iterator:
            response = kinesis.get_records(ShardIterator=iterator, Limit=10_000)
            if not response["Records"]:
                break
            found.extend(StreamRecord(r["PartitionKey"], r["Data"]) for r in response["Records"])
            iterator = response.get("NextShardIterator")
    return found


def read_archive(
    runtime: Runtime, bucket: str, prefix: str, seen: archive.Identities | None = None
) -> tuple[int, list[archive.Entry]]:
    """(objects, entries) of an archive prefix, in key order, each identity once (pass ``seen``
    to learn how many repeats were left out)."""
    s3 = runtime.endpoint.client("s3")
    seen = seen if seen is not None else archive.Identities()
    objects, entries = 0, list[archive.Entry]()
    name = runtime.deployment.bucket(bucket)
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=name, Prefix=prefix):
        for item in page.get("Contents", []):
            body = s3.get_object(Bucket=name, Key=item["Key"])["Body"].read()
            objects += 1
            entries.extend(archive.unique(archive.read(body), seen))
    return objects, entries


class _Found:
    """Records found on channels, looked up by a published payload: the same bytes, or the
    same message with hops appended to its messageHistory on the way (:func:`history.extends`)."""

    def __init__(self) -> None:
        self._by_bytes: dict[bytes, list[_Fate]] = defaultdict(list)
        self._by_id: dict[str, list[tuple[bytes, _Fate]]] = defaultdict(list)

    def add(self, record: bytes, channel: str, code: str | None = None, description: str | None = None) -> None:
        fate = _Fate(channel, [channel], code, description)
        self._by_bytes[record].append(fate)
        message_id = _message_id(record)
        if message_id is not None:
            self._by_id[message_id].append((record, fate))

    def find(self, payload: bytes) -> list[_Fate]:
        """Where every record that is ``payload`` (hops aside) was found."""
        found = list(self._by_bytes.get(payload, ()))
        if not found:
            candidates = self._by_id.get(_message_id(payload) or "", ())
            found = [fate for record, fate in candidates if history.extends(payload, record)]
        return found


def account(runtime: Runtime, inputs: list[Input]) -> Accounting:
    """The fate of every input, read back from the deployment."""
    kinesis = runtime.endpoint.client("kinesis")
    keyed = {c.name: read_stream_records(kinesis, runtime.deployment.stream(c.name)) for c in RDSS.channels}
    channels = {name: [r.data for r in records] for name, records in keyed.items()}
    routed = _Found()
    routed_ids: Counter[str] = Counter()
    for name in ROUTED:
        for record in channels[name]:
            routed.add(record, name)
            message_id = _message_id(record)
            if message_id is not None:
                routed_ids[message_id] += 1
    rejected = _Found()
    moves: list[Move] = []
    unreadable = 0
    for name in ("invalid", "error"):
        for kept in keyed[name]:
            found = _rejection(runtime, kept.data)
            if found is None:
                unreadable += 1
                continue
            original, code, description = found
            group = moved_by(kept.partition_key)
            if group is not None:  # a consumer's move: no published record's fate
                moves.append(Move(group, name, code, _message_id(original)))
            else:
                rejected.add(original, name, code, description)

    ldr = LocalDataRepository(runtime.endpoint.client("dynamodb"), runtime.deployment.table("messages"))
    records = [p.record for item in inputs for p in item.published if p.record]
    ids = [_message_id(p.payload) or "" for item in inputs for p in item.published if p.record]
    claims = ldr.get([k for k in ids if k])
    followed: set[str] = set()
    while records:  # each record's claim and note; then those of the records the notes name
        followed.update(records)
        entries = ldr.get([key for record in records for key in (record_key(record), redriven_key(record))])
        claims |= entries
        named = [str(note["redrivenAs"]) for key, note in entries.items() if key.startswith(redriven_key(""))]
        records = [record for record in named if record not in followed]

    staged = _Staged(runtime)
    accounted = []
    for item in inputs:
        fates = [staged.check(_fate(p, claims, routed, rejected), p.payload) for p in item.published]
        accounted.append(_combine(item, fates))
    seen = archive.Identities()
    audit_objects, audit_entries = read_archive(runtime, "audit", "audit/", seen)
    return Accounting(
        inputs=accounted,
        channels={name: len(records) for name, records in channels.items()},
        audit_objects=audit_objects,
        audit_records=[entry.payload for entry in audit_entries],
        routed_ids=routed_ids,
        moves=moves,
        unreadable=unreadable,
        audit_repeats=seen.repeats,
    )


class _Staged:
    """Whether a part the broker passed on is held by the sequencer, waiting for the rest of its
    sequence: its position noted in the sequence's progress (the sequences table) while that
    is still pending. Only then is "pending" its fate; otherwise it is unaccounted."""

    def __init__(self, runtime: Runtime) -> None:
        self.dynamodb = runtime.endpoint.client("dynamodb")
        self.table = runtime.deployment.table("sequences")
        self._progress: dict[str, dict[str, Any] | None] = {}

    def check(self, fate: _Fate, payload: bytes) -> _Fate:
        if fate.outcome != "pending":
            return fate
        try:
            sequence = orjson.loads(payload)["messageHeader"]["messageSequence"]
            sequence_id, position = str(sequence["sequence"]), int(sequence["position"])
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            return _Fate("unaccounted", [])
        if sequence_id not in self._progress:
            key = {"sequence": {"S": sequence_id}}
            item = self.dynamodb.get_item(TableName=self.table, Key=key, ConsistentRead=True)
            self._progress[sequence_id] = item.get("Item")
        progress = self._progress[sequence_id] or {}
        held = str(position) in progress.get("positions", {}).get("NS", [])
        waiting = progress.get("status", {}).get("S") == PENDING
        return fate if held and waiting else _Fate("unaccounted", [])


def _rejection(runtime: Runtime, record: bytes) -> tuple[bytes, str | None, str | None] | None:
    """(original payload, errorCode, errorDescription) of a decorated record; None when it is
    not one or its claim-checked payload cannot be fetched."""
    try:
        decorated = orjson.loads(record)
        header = decorated["messageHeader"]
        code, description = header.get("errorCode"), header.get("errorDescription")
    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
        return None
    try:
        return decoration.original(record), _text(code), _text(description)
    except (ValueError, KeyError, TypeError):
        pass
    original = _claim_checked(runtime, decorated)
    return None if original is None else (original, _text(code), _text(description))


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


@dataclass(frozen=True)
class _Fate:
    outcome: str
    channels: list[str]
    error_code: str | None = None
    error_description: str | None = None


def _fate(
    published: Published, claims: dict[str, dict[str, Any]], routed: _Found, rejected: _Found, hops: int = 0
) -> _Fate:
    """Where the broker put one stream record. Each record is followed by its own identity:
    records sharing a messageId (a resend, a broken copy) are accounted each for itself."""
    if published.refused is not None:  # the stream never took it
        return _Fate("refused", [], *published.refused)
    note = claims.get(redriven_key(published.record))
    if note is not None and hops < _MAX_REDRIVES:  # parked, and put back by rdss redrive as another record
        shard, _, sequence = str(note.get("redrivenAs", "")).partition("/")
        again = replace(published, shard_id=shard, sequence_number=sequence)
        return _fate(again, claims, routed, rejected, hops + 1)
    if record_key(published.record) in claims:  # found invalid: claimed under the record itself
        moved = rejected.find(published.payload)
        return moved[0] if moved else _Fate("unaccounted", [])
    claim = claims.get(_message_id(published.payload) or "")
    if claim is not None and claim.get("claimedBy") == published.record:
        found = routed.find(published.payload)
        if found:
            return _Fate("routed", sorted({c for fate in found for c in fate.channels}))
        moved = rejected.find(published.payload)
        if moved:  # its sequence was rejected or swept
            return moved[0]
        return _Fate("pending", [])  # a part whose sequence is still waiting
    if claim is not None:
        return _Fate("duplicate", [])
    return _Fate("unaccounted", [])


def _combine(item: Input, fates: list[_Fate]) -> Accounted:
    outcomes = {f.outcome for f in fates}
    # a sequence is only as good as its worst part
    for outcome in ("unaccounted", "pending", "refused", "error", "invalid", "routed", "duplicate"):
        if outcome in outcomes:
            break
    channels = sorted({c for f in fates for c in f.channels})
    worst = next((f for f in fates if f.error_code), None)
    return Accounted(
        item.name,
        len(item.published),
        outcome,
        channels,
        worst.error_code if worst else None,
        worst.error_description if worst else None,
        [p.record for p in item.published if p.record],
        _message_id(item.published[0].payload) if item.published else None,
    )


def _message_id(payload: bytes) -> str | None:
    try:
        header = orjson.loads(payload)["messageHeader"]
        value = header["messageId"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return None
    return value if isinstance(value, str) else None


def _claim_checked(runtime: Runtime, record: dict[str, Any]) -> bytes | None:
    """The payload a claim check in the errors bucket stands for; None for anything else (a
    record that is not a claim check, one kept on a gateway's host, an object that is gone)."""
    location = record.get(decoration.WRAPPER_KEY) if decoration.is_wrapped(record) else None
    if not isinstance(location, dict) or location.get("encoding") != "s3":
        return None
    s3 = runtime.endpoint.client("s3")
    try:
        body: bytes = s3.get_object(Bucket=location["bucket"], Key=location["key"])["Body"].read()
    except (ClientError, KeyError, TypeError):
        return None
    return body
