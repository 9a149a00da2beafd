"""rdss.archive.entries: entries keep records (any bytes, one line each), members stay within Firehose's
record limit, the one reader reads entries and legacy lines, identities count once."""

from __future__ import annotations

import gzip
import os
import random
from datetime import UTC, datetime

import orjson
import pytest

from rdss.archive import entries as archive
from rdss.model.workload import Workload

ODD = [
    orjson.dumps({"a": [1, 2], "s": "x\ny"}, option=orjson.OPT_INDENT_2),  # indented, an escaped newline
    b'{"s": "raw\nnewline"}',  # a raw newline inside a string: not JSON, one record all the same
    b"caf\xe9 \xff\xfe",  # not UTF-8
    b"",
    b"\r\n\r\n",
    b"\x00\x1f\x7f \xe2\x80\xa8 \xf0\x9f\x98\x80",  # control characters, U+2028, an emoji
    b'{"rdssArchive":1,"stream":"forged","shard":"s","sequenceNumber":"1","text":"x"}',  # a payload that looks like one
    b"\xed\xa0\x80",  # a UTF-8-encoded surrogate: not valid UTF-8
]


def framed(payloads: list[bytes]) -> list[bytes]:
    return [
        archive.frame(p, stream="rdss-dev-input", shard="shardId-000000000001", sequence_number=str(100 + i))
        for i, p in enumerate(payloads)
    ]


def test_every_record_is_one_line_and_comes_back_exactly() -> None:
    lines = framed(ODD)
    assert all(b"\n" not in line and b"\r" not in line for line in lines)
    assert all(line.startswith(archive.ENTRY_PREFIX) for line in lines)
    entries = archive.read(archive.member(lines))
    assert [e.payload for e in entries] == ODD
    assert [e.record for e in entries] == [f"shardId-000000000001/{100 + i}" for i in range(len(ODD))]
    assert all(not e.legacy for e in entries)


def test_text_when_utf8_base64_otherwise_and_the_first_key_names_the_format() -> None:
    text = orjson.loads(archive.frame(b"", stream="s", shard="h", sequence_number="1"))
    assert next(iter(text)) == "rdssArchive"
    assert text["text"] == ""
    assert "base64" not in text
    encoded = orjson.loads(archive.frame(b"\xff", stream="s", shard="h", sequence_number="2"))
    assert encoded["base64"] == "/w=="
    assert "text" not in encoded


def test_arrival_is_rfc3339_utc_to_the_millisecond() -> None:
    line = archive.frame(b"x", stream="s", shard="h", sequence_number="1", partition_key="k", arrival=1764064800.1234)
    entry = archive.parse(line)
    assert entry.arrival == "2025-11-25T10:00:00.123Z"
    assert entry.arrived == datetime(2025, 11, 25, 10, 0, 0, 123000, tzinfo=UTC)
    assert entry.partition_key == "k"
    assert archive.parse(archive.frame(b"x", stream="s", shard="h", sequence_number="1")).arrival is None


def test_legacy_lines_are_records_without_identity() -> None:
    indented = orjson.dumps({"messageHeader": {"messageId": "m"}}, option=orjson.OPT_INDENT_2)
    entries = archive.read(archive.encode_legacy([b'{"a":1}', indented]))
    # a legacy record holding raw newlines reads as its lines, as it always did
    assert [e.payload for e in entries] == [b'{"a":1}', *indented.split(b"\n")]
    assert all(e.legacy and e.identity is None and e.record is None for e in entries)


def test_a_line_that_only_looks_like_an_entry_is_a_legacy_record() -> None:
    for line in (
        b'{"rdssArchive":1,"stream":"s","shard":"h","sequenceNumber":"1"}',  # no payload
        b'{"rdssArchive":1,"stream":"s","shard":"h","sequenceNumber":"1","text":"x","base64":"eA=="}',
        b'{"rdssArchive":true,"stream":"s","shard":"h","sequenceNumber":"1","text":"x"}',
        b'{"rdssArchive":1,"stream":"s","shard":"h","sequenceNumber":"1","text":"x","more":0}',
        b'{"rdssArchive":1,"stream":"s","shard":"h","sequenceNumber":"1","base64":"not base64!"}',
        b'{"rdssArchive":1,"stream":"s","shard":"h","sequenceNumber":"1","text":"x"',
    ):
        entry = archive.parse(line)
        assert entry.legacy
        assert entry.payload == line


def test_objects_of_several_members_and_objects_that_are_not_gzip() -> None:
    first, second = framed([b"a", b"b"]), framed([b"c"])
    data = archive.member(first) + archive.member(second)
    assert [e.payload for e in archive.read(data)] == [b"a", b"b", b"c"]
    assert [e.payload for e in archive.read(b"".join(line + b"\n" for line in first))] == [b"a", b"b"]
    assert archive.read(b"") == []


def test_pack_keeps_order_and_every_member_within_the_limit() -> None:
    rng = random.Random(3)
    payloads = [orjson.dumps(m) for m in Workload(5).mix(1500)]
    payloads += [os.urandom(rng.randrange(1, 20_000)) for _ in range(200)]  # incompressible
    lines = framed(payloads)
    limit = 64 * 1024
    members = archive.pack(lines, limit=limit)
    assert len(members) > 10
    assert all(len(m.data) <= limit and not m.oversize for m in members)  # the limit here is the caller's
    assert [(m.start, m.end) for m in members] == list(
        zip([0, *[m.end for m in members[:-1]]], [m.end for m in members], strict=True)
    )
    assert members[-1].end == len(lines)
    for member in members:  # each member is one gzip file of exactly its entries
        assert gzip.decompress(member.data) == b"".join(line + b"\n" for line in lines[member.start : member.end])
    assert [e.payload for e in archive.read(b"".join(m.data for m in members))] == payloads


def test_members_fill_up_to_firehoses_record_limit() -> None:
    lines = framed([orjson.dumps(m) for m in Workload(6).mix(4000)])
    members = archive.pack(lines)
    assert len(members) >= 2
    assert all(len(m.data) <= archive.MAX_MEMBER for m in members)
    assert len(members[0].data) > archive.MAX_MEMBER * 0.95  # not split early


def test_an_entry_that_cannot_fit_is_a_member_of_its_own() -> None:
    huge = os.urandom(1_040_000)  # near Kinesis' 1 MiB, incompressible: over 1,000 KiB even as gzip
    lines = framed([b"before", huge, b"after"])
    members = archive.pack(lines)
    assert [(m.start, m.end, m.oversize) for m in members] == [(0, 1, False), (1, 2, True), (2, 3, False)]
    assert archive.read(members[1].data)[0].payload == huge


def test_pack_of_nothing_is_no_member() -> None:
    assert archive.pack([]) == []


def test_each_identity_counts_once_and_legacy_records_always_count() -> None:
    lines = framed([b"a", b"b"])
    legacy = archive.Entry(b"old")
    entries = [*archive.read(archive.member(lines)), legacy, *archive.read(archive.member(lines[:1])), legacy]
    seen = archive.Identities()
    assert [e.payload for e in archive.unique(entries, seen)] == [b"a", b"b", b"old", b"old"]
    assert seen.repeats == 1


@pytest.mark.parametrize("moment", [datetime(2026, 11, 21, 9, 14, 3, tzinfo=UTC)])
def test_object_keys_are_firehoses_with_the_gz_extension(moment: datetime) -> None:
    key = archive.object_key("audit/", moment, "rdss-dev-input")
    assert key.startswith("audit/year=2026/month=11/day=21/hour=09/rdss-dev-input-1-2026-11-21-09-14-03-")
    assert key.endswith(".gz")
    assert archive.archived_at(key) == moment.replace(minute=0, second=0)
