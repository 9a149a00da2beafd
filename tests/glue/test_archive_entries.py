"""The Glue jobs read archive entries (rdss/archive/entries.py) with their Java half: each record's exact
bytes once, whatever they are, however many times it was archived; legacy archives as before."""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pyarrow.parquet as pq

from glue_jobs import audit_compaction, audit_report, runtime, schema
from rdss.archive import entries as archive
from rdss.bench.glue_inprocess import compact_in_process
from rdss.model import decoration
from rdss.model.validation import validate
from rdss.model.workload import Workload
from tests.glue.conftest import compact
from tests.support import archives

MOMENT = datetime(2026, 11, 25, 10, 0, 0, tzinfo=UTC)


def put(root: Path, moment: datetime, data: bytes, prefix: str = "audit/") -> Path:
    path = root / archive.object_key(prefix, moment, "rdss-test-input")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def test_each_record_once_with_its_exact_bytes_however_often_archived(spark: Any, tmp_path: Path) -> None:
    records = archives.odd_records()
    lines = archives.entries(records.values())
    # delivered once, then (an archiver restarted midway) again, partly, in later objects
    put(tmp_path / "in", MOMENT, archives.encode(lines, per_member=2))
    put(tmp_path / "in", MOMENT.replace(minute=5), archives.encode(lines[2:], per_member=3))
    put(tmp_path / "in", MOMENT.replace(minute=9), archives.encode(lines[:1] + lines[-1:]))
    # and the broker's refusals in the errors archive, archived twice too
    refusals = []
    for payload in records.values():
        verdict = validate(payload)
        if not verdict.valid:
            assert verdict.error_code == "GENERR007"
            refusals.append(decoration.decorate(payload, verdict.error_code, verdict.error_description or ""))
    assert len(refusals) == 3
    refused = archives.entries(refusals, stream="rdss-test-invalid")
    put(tmp_path / "errors", MOMENT, archives.encode(refused), prefix="errors/invalid/")
    put(tmp_path / "errors", MOMENT.replace(minute=1), archives.encode(refused[1:]), prefix="errors/invalid/")

    rejected = audit_compaction.read_rejections(runtime.Context(spark, {}), str(tmp_path / "errors"))
    lines_read, objects = audit_compaction.read_archive(spark, str(tmp_path / "in"))
    counts = audit_compaction.run(spark, lines_read, objects, str(tmp_path / "out"), rejected=rejected)

    assert counts == {
        "lines": 6,
        "messages": 3,
        "rejects": 3,
        "duplicates": 0,
        "archivedAgain": 6,
        "brokerRejections": 3,
        "unmatchedRejections": 0,
    }
    curated = sorted(row["messageId"] for row in pq.read_table(str(tmp_path / "out" / "messages")).to_pylist())
    names = ("indented", "multi-line string", "compact")
    assert curated == sorted(orjson.loads(records[name])["messageHeader"]["messageId"] for name in names)
    found: dict[bytes, str] = {}
    for row in pq.read_table(str(tmp_path / "out" / "rejects")).to_pylist():
        raw = base64.b64decode(row["line"]) if row["reason"] == schema.REJECT_NOT_UTF8 else row["line"].encode()
        assert raw not in found, "a record rejected twice"
        found[raw] = row["reason"]
    assert found == {
        records["raw newline in a string"]: schema.REJECT_NOT_JSON,
        records["not UTF-8"]: schema.REJECT_NOT_UTF8,
        b"": schema.REJECT_NOT_JSON,
    }
    # the single-process version reads the entries with rdss.archive.entries and counts the same
    assert compact_in_process(tmp_path / "in", tmp_path / "single", tmp_path / "errors") == counts


def test_a_legacy_archive_is_read_as_it_always_was_beside_entries(spark: Any, tmp_path: Path) -> None:
    workload = Workload(42)
    old = [orjson.dumps(workload.message("MetadataDelete", "Event")) for _ in range(3)]
    indented = orjson.dumps(workload.message("MetadataDelete", "Event"), option=orjson.OPT_INDENT_2)
    new = [orjson.dumps(workload.message("MetadataDelete", "Event")) for _ in range(2)]
    put(tmp_path / "in", MOMENT, archive.encode_legacy([*old, indented]))  # written before entries
    put(tmp_path / "in", MOMENT.replace(minute=1), archive.encode_legacy(old[:1]))  # a legacy resend
    put(tmp_path / "in", MOMENT.replace(minute=2), archives.framed(new))

    counts = compact(spark, tmp_path / "in", tmp_path / "out")

    # a legacy record has no identity: the resent one is a duplicate, as before; the indented
    # one was split by Firehose's newlines when it was archived, and still reads as its lines
    legacy_lines = len(indented.split(b"\n"))
    assert counts == {
        "lines": 3 + legacy_lines + 1 + 2,
        "messages": 5,
        "rejects": legacy_lines,
        "duplicates": 1,
        "archivedAgain": 0,
    }
    assert compact_in_process(tmp_path / "in", tmp_path / "single") == counts


def test_the_java_reader_and_rdss_archive_agree_on_every_line(spark: Any) -> None:
    good = archive.frame(b'{"a":\n1}', stream="s", shard="sh", sequence_number="7", partition_key="k", arrival=0.5)
    encoded = archive.frame(b"\xff\x00", stream="s", shard="sh", sequence_number="8")
    lines = [
        good,
        encoded,
        archive.frame("é\u2028😀".encode(), stream="s", shard="sh", sequence_number="9"),
        b'{"messageHeader":{}}',  # a legacy record
        b"",
        b'{"rdssArchive":1,"stream":"s","shard":"sh","sequenceNumber":"1","text":"x","extra":1}',  # unknown member
        b'{"rdssArchive":1,"stream":"s","shard":"sh","sequenceNumber":"1","text":"x","base64":"eA=="}',  # both
        b'{"rdssArchive":true,"stream":"s","shard":"sh","sequenceNumber":"1","text":"x"}',  # not the version
        b'{"rdssArchive":1.0,"stream":"s","shard":"sh","sequenceNumber":"1","text":"x"}',
        b'{"rdssArchive":2,"stream":"s","shard":"sh","sequenceNumber":"1","text":"x"}',
        b'{"rdssArchive":1,"stream":"s","shard":"sh","text":"x"}',  # no sequence number
        b'{"rdssArchive":1,"stream":"s","shard":"sh","sequenceNumber":1,"text":"x"}',  # not a string
        b'{"rdssArchive":1,"stream":"s","shard":"sh","sequenceNumber":"1","base64":"%%%"}',  # not base64
        b'{"rdssArchive":1,"stream":"s","shard":"sh","sequenceNumber":"1","text":"\\ud800"}',  # lone surrogate
        b'{"rdssArchive":1,"stream":"s","shard":"sh","sequenceNumber":"1","text":"x"} trailing',
        b'{"rdssArchive":1,"stream":"s","shard":"sh","sequenceNumber":"1","arrival":null,"text":""}',
    ]
    audit_compaction.register(spark)
    frame = spark.createDataFrame([(line,) for line in lines], "raw binary").selectExpr("CAST(raw AS STRING) AS line")
    read = runtime.entries(frame).selectExpr("CAST(line AS BINARY) AS payload", *runtime.IDENTITY).collect()
    expected = [archive.parse(line) for line in lines]
    assert [(row["payload"], row["stream"], row["shard"], row["sequenceNumber"]) for row in read] == [
        (bytes(entry.payload), entry.stream, entry.shard, entry.sequence_number) for entry in expected
    ]
    assert [entry.legacy for entry in expected] == [False, False, False, *([True] * 12), False]
    assert expected[0].payload == b'{"a":\n1}'
    assert expected[1].payload == b"\xff\x00"


def test_the_report_counts_each_errors_archive_record_once(spark: Any, tmp_path: Path) -> None:
    workload = Workload(43)
    refused = [decoration.decorate(orjson.dumps(workload.message("MetadataDelete", "Event")), "GENERR001", "x")]
    refused.append(decoration.decorate(b"\xff not json", "GENERR007", "not JSON"))
    lines = archives.entries(refused, stream="rdss-test-invalid")
    errors = tmp_path / "errors"
    put(errors, MOMENT, archives.encode(lines), prefix="errors/invalid/")
    put(errors, MOMENT.replace(minute=3), archives.encode(lines), prefix="errors/invalid/")  # archived again
    records = audit_report.read_errors(spark, str(errors)).collect()
    assert sorted(row["errorCode"] for row in records) == ["GENERR001", "GENERR007"]
    rejected = audit_compaction.read_rejections(runtime.Context(spark, {}), str(errors))
    assert rejected.records.count() == 2
