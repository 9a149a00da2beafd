"""Where did every input go? Accounting for published records from what the system left behind.

Nothing here asks the processors what they did: the answer is read from the channels, the
broker's Local Data Repository and the archives, the way an operator would establish it.

* A record whose message the broker claimed for itself (``claimedBy`` names the record) was
  routed - its bytes are on a routed channel, unchanged - unless its sequence was rejected or
  swept, in which case its decorated bytes are on the invalid or error channel.
* A record whose messageId another record had already claimed was a duplicate.
* A record the broker classified as invalid was claimed under its record identity, and its
  decorated bytes (original bytes intact) are on the invalid or error channel.
"""

from __future__ import annotations

import contextlib
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

import orjson

from rdss import archive, decoration
from rdss.local.runtime import Published, Runtime
from rdss.repository.dynamodb import LocalDataRepository
from rdss.repository.entries import record_key
from rdss.topology import RDSS

ROUTED = tuple(c.name for c in RDSS.channels_of("routed"))
OUTCOMES = ("routed", "invalid", "error", "duplicate")


@dataclass
class Input:
    """One thing a producer published: a file, or one item of the built-in workload."""

    name: str
    published: list[Published]


@dataclass
class Accounted:
    name: str
    records: int
    outcome: str  # routed | invalid | error | duplicate | pending (a sequence still waiting) | unaccounted
    channels: list[str]
    error_code: str | None

    def as_report(self) -> dict[str, Any]:
        return {
            "file": self.name,
            "records": self.records,
            "outcome": self.outcome,
            "channels": self.channels,
            "errorCode": self.error_code,
        }


@dataclass
class Accounting:
    inputs: list[Accounted]
    channels: dict[str, int]
    audit_objects: int
    audit_records: list[bytes] = field(repr=False)
    #: per routed messageId, how many times it appears on the routed channels
    routed_ids: Counter[str] = field(default_factory=Counter, repr=False)

    def outcomes(self) -> Counter[str]:
        return Counter(i.outcome for i in self.inputs)


def read_channel(runtime: Runtime, channel: str) -> list[bytes]:
    """Every record of a channel, from the start of each shard."""
    kinesis = runtime.endpoint.client("kinesis")
    stream = runtime.deployment.stream(channel)
    found: list[bytes] = []
    for shard in kinesis.list_shards(StreamName=stream)["Shards"]:
        iterator = kinesis.get_shard_iterator(
            StreamName=stream, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        while iterator:
            response = kinesis.get_records(ShardIterator=iterator, Limit=10_000)
            if not response["Records"]:
                break
            found.extend(r["Data"] for r in response["Records"])
            iterator = response.get("NextShardIterator")
    return found


def read_archive(runtime: Runtime, bucket: str, prefix: str) -> tuple[int, list[bytes]]:
    """(objects, lines) of an archive prefix, as Firehose wrote it."""
    s3 = runtime.endpoint.client("s3")
    objects, lines = 0, []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=runtime.deployment.bucket(bucket), Prefix=prefix):
        for entry in page.get("Contents", []):
            body = s3.get_object(Bucket=runtime.deployment.bucket(bucket), Key=entry["Key"])["Body"].read()
            objects += 1
            lines.extend(archive.decode(body))
    return objects, lines


def account(runtime: Runtime, inputs: list[Input]) -> Accounting:
    """The fate of every input, read back from the deployment."""
    channels = {c.name: read_channel(runtime, c.name) for c in RDSS.channels}
    routed: dict[bytes, list[str]] = defaultdict(list)
    routed_ids: Counter[str] = Counter()
    for name in ROUTED:
        for record in channels[name]:
            routed[record].append(name)
            with contextlib.suppress(orjson.JSONDecodeError, KeyError, TypeError):
                routed_ids[orjson.loads(record)["messageHeader"]["messageId"]] += 1
    rejected: dict[bytes, list[tuple[str, str]]] = defaultdict(list)
    for name in ("invalid", "error"):
        for record in channels[name]:
            header = orjson.loads(record)["messageHeader"]
            try:
                original = decoration.original(record)
            except ValueError:  # a claim check: the payload is in the errors bucket
                original = _claim_checked(runtime, orjson.loads(record))
            rejected[original].append((name, header["errorCode"]))

    ldr = LocalDataRepository(runtime.endpoint.client("dynamodb"), runtime.deployment.table("messages"))
    keys = []
    for item in inputs:
        for published in item.published:
            keys.append(_message_id(published.payload) or "")
            keys.append(record_key(published.record))
    claims = ldr.get([k for k in keys if k])

    accounted = []
    for item in inputs:
        fates = [_fate(p, claims, routed, rejected) for p in item.published]
        accounted.append(_combine(item, fates))
    audit_objects, audit_records = read_archive(runtime, "audit", "audit/")
    return Accounting(
        inputs=accounted,
        channels={name: len(records) for name, records in channels.items()},
        audit_objects=audit_objects,
        audit_records=audit_records,
        routed_ids=routed_ids,
    )


def _fate(
    published: Published,
    claims: dict[str, dict[str, Any]],
    routed: dict[bytes, list[str]],
    rejected: dict[bytes, list[tuple[str, str]]],
) -> tuple[str, list[str], str | None]:
    message_id = _message_id(published.payload)
    claim = claims.get(message_id or "")
    if claim is not None and claim.get("claimedBy") == published.record:
        if published.payload in routed:
            return "routed", sorted(set(routed[published.payload])), None
        if published.payload in rejected:
            channel, code = rejected[published.payload][0]
            return channel, [channel], code
        return "pending", [], None  # a part whose sequence is still waiting
    if claim is not None:
        return "duplicate", [], None
    if record_key(published.record) in claims and published.payload in rejected:
        channel, code = rejected[published.payload][0]
        return channel, [channel], code
    return "unaccounted", [], None


def _combine(item: Input, fates: list[tuple[str, list[str], str | None]]) -> Accounted:
    outcomes = {f[0] for f in fates}
    # a sequence is only as good as its worst part
    for outcome in ("unaccounted", "pending", "error", "invalid", "routed", "duplicate"):
        if outcome in outcomes:
            break
    channels = sorted({c for f in fates for c in f[1]})
    code = next((f[2] for f in fates if f[2]), None)
    return Accounted(item.name, len(item.published), outcome, channels, code)


def _message_id(payload: bytes) -> str | None:
    try:
        header = orjson.loads(payload)["messageHeader"]
        value = header["messageId"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return None
    return value if isinstance(value, str) else None


def _claim_checked(runtime: Runtime, record: dict[str, Any]) -> bytes:
    location = record[decoration.WRAPPER_KEY]
    s3 = runtime.endpoint.client("s3")
    body: bytes = s3.get_object(Bucket=location["bucket"], Key=location["key"])["Body"].read()
    return body
