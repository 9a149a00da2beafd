"""audit_compaction.py on real local Spark: rows, winners, rejects, partitions, schema."""

from __future__ import annotations

import base64
import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from glue_jobs import audit_compaction, schema
from rdss.archive import entries as archive
from rdss.bench.glue_inprocess import compact_in_process
from rdss.model.workload import Workload, Workload4
from tests.glue.conftest import Compacted, compact
from tests.support import archives

HIVE_TYPES = {pa.string(): "string", pa.int32(): "int", pa.int64(): "bigint", pa.float64(): "double"}


def hive_type(kind: pa.DataType) -> str:
    if pa.types.is_timestamp(kind):
        return "timestamp"
    return HIVE_TYPES[kind]


def read_rows(path: Path) -> list[dict[str, Any]]:
    """A Parquet dataset as dicts, Hive partitions (dt, messageType) included as strings."""
    partitioning = ds.partitioning(pa.schema([("dt", pa.string()), ("messageType", pa.string())]), flavor="hive")
    return ds.dataset(str(path), format="parquet", partitioning=partitioning).to_table().to_pylist()


def plain(path: Path) -> list[dict[str, Any]]:
    return pq.read_table(str(path)).to_pylist()


def put(root: Path, moment: datetime, records: list[bytes], *, name: str | None = None) -> Path:
    """One archive object as Firehose delivers the archiver's records (each record a new
    entry); ``name`` fixes the random part of the key."""
    return put_object(root, moment, archives.framed(records), name=name)


def put_object(root: Path, moment: datetime, data: bytes, *, name: str | None = None) -> Path:
    key = archive.object_key("audit/", moment, "rdss-test-input")
    if name is not None:
        key = key.rsplit("-", 5)[0] + f"-{name}.gz"
    path = root / key
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def message(workload: Workload, message_id: str, **header: Any) -> dict[str, Any]:
    built = workload.message("MetadataDelete", "Event")
    built["messageHeader"]["messageId"] = message_id
    built["messageHeader"].update(header)
    return built


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)  # type: ignore[misc]


# -- a generated archive ------------------------------------------------------------------------------


def test_rows_are_the_unique_messageids_and_rejects_the_malformed_lines(compacted: Compacted) -> None:
    generated = compacted.archive
    rows = read_rows(compacted.output / "messages")
    assert compacted.counts == {
        "lines": generated.records,
        "messages": generated.messages,
        "rejects": generated.malformed,
        "duplicates": generated.duplicates,
        "archivedAgain": generated.repeats,
    }
    assert generated.duplicates > 0
    assert generated.repeats > 0
    assert generated.malformed > 0
    assert len(rows) == generated.messages
    assert {row["messageId"] for row in rows} == set(generated.first_seen)

    rejects = plain(compacted.output / "rejects")
    expected = []
    for line in generated.malformed_lines:
        try:
            expected.append(line.decode("utf-8"))
        except UnicodeDecodeError:
            expected.append(base64.b64encode(line).decode())
    assert sorted(reject["line"] for reject in rejects) == sorted(expected)

    discarded = plain(compacted.output / "duplicates")
    assert sum(row["discarded"] for row in discarded) == generated.duplicates


def test_every_duplicate_resolves_to_its_first_copy(compacted: Compacted) -> None:
    rows = {row["messageId"]: row for row in read_rows(compacted.output / "messages")}
    repeated = {row["messageId"] for row in plain(compacted.output / "duplicates")}
    assert repeated
    for message_id in repeated:
        first_object, _ = compacted.archive.first_seen[message_id]
        delivered = re.search(r"-(\d{4}-\d{2}-\d{2}-\d{2}-\d{2}-\d{2})-", Path(first_object).name)
        assert delivered is not None
        expected = datetime.strptime(delivered.group(1), "%Y-%m-%d-%H-%M-%S").replace(tzinfo=UTC)
        assert rows[message_id]["archivedAt"] == expected


def test_the_single_process_version_writes_the_same_rows(compacted: Compacted, tmp_path: Path) -> None:
    counts = compact_in_process(compacted.archive.root, tmp_path / "single")
    assert counts == compacted.counts

    def key(row: dict[str, Any]) -> str:
        return str(row["messageId"])

    spark_rows = sorted(read_rows(compacted.output / "messages"), key=key)
    single_rows = sorted(read_rows(tmp_path / "single" / "messages"), key=key)
    assert spark_rows == single_rows

    def where(row: dict[str, Any]) -> tuple[str, str]:
        return row["source"], row["line"]

    rejects = sorted(plain(compacted.output / "rejects"), key=where)
    assert rejects == sorted(plain(tmp_path / "single" / "rejects"), key=where)


# -- which copy wins ----------------------------------------------------------------------------------


def test_first_seen_is_earliest_archive_time_then_key_then_line(spark: Any, tmp_path: Path) -> None:
    workload = Workload(5)

    def line(message_id: str, generator: str) -> bytes:
        return orjson.dumps(message(workload, message_id, generator=generator))

    # listed first, archived last
    put(tmp_path / "in", utc(2026, 11, 1, 10, 5, 0), [line("m1", "late"), line("m3", "key-b")], name="bbbb")
    put(
        tmp_path / "in",
        utc(2026, 11, 1, 10, 5, 0),
        [line("m3", "key-a"), line("m2", "line-1"), line("m2", "line-2")],
        name="aaaa",
    )
    put(tmp_path / "in", utc(2026, 11, 1, 9, 59, 59), [line("m1", "earliest")])

    counts = compact(spark, tmp_path / "in", tmp_path / "out")

    rows = {row["messageId"]: row for row in read_rows(tmp_path / "out" / "messages")}
    assert {key: row["generator"] for key, row in rows.items()} == {"m1": "earliest", "m2": "line-1", "m3": "key-a"}
    assert rows["m1"]["archivedAt"] == utc(2026, 11, 1, 9, 59, 59)
    assert counts == {"lines": 6, "messages": 3, "rejects": 0, "duplicates": 3, "archivedAgain": 0}
    assert sorted((row["messageId"], row["discarded"]) for row in plain(tmp_path / "out" / "duplicates")) == [
        ("m1", 1),
        ("m2", 1),
        ("m3", 1),
    ]


# -- what is rejected, and why -------------------------------------------------------------------------


def test_every_line_without_a_messageid_is_kept_with_its_reason(spark: Any, tmp_path: Path) -> None:
    workload = Workload(6)
    valid = orjson.dumps(message(workload, "kept-1"))
    cut = valid.index(b'"messageBody"') + len(b'"messageBody"')
    mistyped = message(workload, "kept-2")
    mistyped["messageHeader"]["messageSequence"] = {"sequence": "s", "position": "x", "total": 2}
    lines = {
        b"PUT /records not a message": schema.REJECT_NOT_JSON,
        valid[:cut]: schema.REJECT_NOT_JSON,  # the whole header parses, the line does not
        b"": schema.REJECT_NOT_JSON,
        b"[" + valid + b"]": schema.REJECT_NO_MESSAGE_ID,
        b"null": schema.REJECT_NO_MESSAGE_ID,
        b'{"messageHeader":{"messageType":"MetadataRead"}}': schema.REJECT_NO_MESSAGE_ID,
        b'{"messageHeader":{"messageId":""}}': schema.REJECT_NO_MESSAGE_ID,
        b'{"messageHeader":"kept-3"}': schema.REJECT_NO_MESSAGE_ID,
        b"\xff\xfe" + valid[:10]: schema.REJECT_NOT_UTF8,
    }
    path = put(tmp_path / "in", utc(2026, 11, 2, 8, 0, 0), [valid + b"\r", *lines, orjson.dumps(mistyped)])

    counts = compact(spark, tmp_path / "in", tmp_path / "out")

    rejects = plain(tmp_path / "out" / "rejects")
    expected = {
        (base64.b64encode(raw).decode() if reason == schema.REJECT_NOT_UTF8 else raw.decode(), reason)
        for raw, reason in lines.items()
    }
    assert {(row["line"], row["reason"]) for row in rejects} == expected
    assert {row["source"] for row in rejects} == {f"file://{path}"}
    assert {row["archivedAt"] for row in rejects} == {utc(2026, 11, 2, 8, 0, 0)}
    rows = {row["messageId"]: row for row in read_rows(tmp_path / "out" / "messages")}
    assert set(rows) == {"kept-1", "kept-2"}
    assert (rows["kept-2"]["position"], rows["kept-2"]["total"], rows["kept-2"]["sequence"]) == (None, 2, "s")
    assert counts["rejects"] == len(lines)


# -- how a line is read (the job's Java parser) ---------------------------------------------------------

ODD_TIMESTAMPS = {
    "2026-11-05T16:53:45.600Z": datetime(2026, 11, 5, 16, 53, 45, 600000, tzinfo=UTC),
    "2026-11-05t16:53:45z": utc(2026, 11, 5, 16, 53, 45),
    "2026-11-05T16:53:45.1234567+05:30": datetime(2026, 11, 5, 11, 23, 45, 123456, tzinfo=UTC),
    "2026-11-05T00:10:00-23:59": utc(2026, 11, 6, 0, 9, 0),
    "2024-02-29T12:00:00Z": utc(2024, 2, 29, 12, 0, 0),
    "9999-12-31T23:59:59.999999Z": datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    "2026-02-29T12:00:00Z": None,  # no such day
    "2026-11-05T24:00:00Z": None,
    "2016-12-31T23:59:60Z": None,  # a leap second has no timestamp of its own
    "2026-11-05T16:53:45+24:00": None,
    "2026-11-05T16:53:45": None,  # no zone
    "2026-11-05": None,
    "2026-11-05T16:53:45.Z": None,
    "2026-11-05T16:53:45Z ": None,
    "0001-01-01T00:30:00+01:00": None,  # before year 1 in UTC
    "9999-12-31T23:30:00-01:00": None,  # after year 9999 in UTC
    "\u0662026-11-05T16:53:45Z": None,  # not an ASCII digit
}


def test_timestamps_are_rfc3339_date_times_read_to_the_microsecond(spark: Any, tmp_path: Path) -> None:
    workload = Workload(12)
    lines = [
        orjson.dumps(message(workload, f"t{number}", messageTimings={"publishedTimestamp": text}))
        for number, text in enumerate(ODD_TIMESTAMPS)
    ]
    put(tmp_path / "in", utc(2026, 11, 6, 0, 0, 0), lines)

    compact(spark, tmp_path / "in", tmp_path / "out")

    rows = {row["messageId"]: row for row in read_rows(tmp_path / "out" / "messages")}
    found = {text: rows[f"t{number}"]["publishedTimestamp"] for number, text in enumerate(ODD_TIMESTAMPS)}
    assert found == ODD_TIMESTAMPS
    days = {text: rows[f"t{number}"]["dt"] for number, text in enumerate(ODD_TIMESTAMPS)}
    assert days["2026-11-05T00:10:00-23:59"] == "2026-11-06"  # the UTC day, not the producer's
    assert days["2026-11-05T16:53:45"] == "2026-11-06"  # no timestamp: the day it was archived
    assert days["9999-12-31T23:59:59.999999Z"] == "9999-12-31"
    compact_in_process(tmp_path / "in", tmp_path / "single")
    single = {row["messageId"]: row for row in read_rows(tmp_path / "single" / "messages")}
    assert single == rows


def test_members_are_read_as_sparks_json_reader_reads_them(spark: Any, tmp_path: Path) -> None:
    workload = Workload(13)
    base = message(workload, "base")
    header = base["messageHeader"]
    text = orjson.dumps(header).decode()
    lines = [
        # a messageId that is not a string is kept as its JSON text
        b'{"messageHeader":{"messageId":123,"generator":{"name":"x","v":[1,2]}},"messageBody":[1,{"a":null}]}',
        # of repeated members the last wins; a repeated object replaces the earlier one whole
        b'{"messageHeader":{"messageId":"early","messageSequence":{"sequence":"s1","total":3}},'
        b'"messageHeader":{"messageId":"dup","messageSequence":{"sequence":"s1","total":3},'
        b'"messageSequence":{"position":2},"messageClass":"Event","messageClass":"Command"},'
        b'"messageBody":{"a":1},"messageBody":"\\u00e9t\\u00e9"}',
        # integers outside 32 bits, fractions and strings are not positions
        b'{"messageHeader":{"messageId":"ints","messageSequence":{"position":2147483648,"total":2.0}},'
        b'"messageBody":null}',
        # invalid UTF-8 inside a value: read with U+FFFD, as Spark reads text
        b'{"messageHeader":{"messageId":"bytes","generator":"g\xff\xfeh"},"messageBody":{"k":"\xc3\xa9"}}',
        # whitespace and escapes: the body is measured compactly serialised
        (
            '{ "messageHeader" : ' + text.replace('"base"', '"spaced"') + ' , "messageBody" : { "k" : [ 1 , 2 ] } }'
        ).encode(),
        # two JSON values on one line, or trailing text: not one message
        b'{"messageHeader":{"messageId":"twice"}} {"messageHeader":{"messageId":"again"}}',
        b'{"messageHeader":{"messageId":"trailing"}} x',
    ]
    put(tmp_path / "in", utc(2026, 11, 6, 0, 0, 0), lines)

    counts = compact(spark, tmp_path / "in", tmp_path / "out")

    rows = {row["messageId"]: row for row in read_rows(tmp_path / "out" / "messages")}
    assert set(rows) == {"123", "dup", "ints", "bytes", "spaced"}
    assert rows["123"]["generator"] == '{"name":"x","v":[1,2]}'
    assert rows["123"]["bodyBytes"] == len(b'[1,{"a":null}]')
    assert (rows["dup"]["messageClass"], rows["dup"]["sequence"], rows["dup"]["position"]) == ("Command", None, 2)
    assert rows["dup"]["bodyBytes"] == len("\u00e9t\u00e9".encode())
    assert (rows["ints"]["position"], rows["ints"]["total"], rows["ints"]["bodyBytes"]) == (None, None, None)
    assert rows["bytes"]["generator"] == "g\ufffd\ufffdh"
    assert rows["bytes"]["bodyBytes"] == len('{"k":"\u00e9"}'.encode())
    assert rows["spaced"]["bodyBytes"] == len(b'{"k":[1,2]}')
    assert rows["spaced"]["generator"] == header["generator"]
    reasons = {row["line"]: row["reason"] for row in plain(tmp_path / "out" / "rejects")}
    assert reasons == {line.decode(): schema.REJECT_NOT_JSON for line in lines[-2:]}
    assert counts == {"lines": len(lines), "messages": 5, "rejects": 2, "duplicates": 0, "archivedAgain": 0}

    # and the single-process comparison reads them the same way
    assert compact_in_process(tmp_path / "in", tmp_path / "single") == counts

    def key(row: dict[str, Any]) -> str:
        return str(row["messageId"])

    assert sorted(read_rows(tmp_path / "single" / "messages"), key=key) == sorted(rows.values(), key=key)


# -- columns and partitions ----------------------------------------------------------------------------


def test_columns_and_partitions(spark: Any, tmp_path: Path) -> None:
    workload = Workload(7)
    evening = message(
        workload,
        "evening",
        correlationId="c0ffee00-0000-4000-8000-000000000000",
        messageTimings={
            "publishedTimestamp": "2026-11-01T23:30:00.250-02:00",
            "expirationTimestamp": "2026-11-03T00:00:00Z",
        },
        messageSequence={"sequence": "seq-1", "position": 2, "total": 3},
        errorCode="APPERRMET003",
        errorDescription="no such object",
        messageClass="Document",  # a failure reply: a message with errorCode, like any other
    )
    evening["messageHeader"]["messageType"] = "MetadataRead"
    evening["messageBody"] = "a fragment, é"
    odd = message(workload, "odd", messageType="../../etc/passwd", messageTimings={"publishedTimestamp": "yesterday"})
    ancient = message(workload, "ancient", messageTimings={"publishedTimestamp": "0001-01-01T00:00:00Z"})
    put(tmp_path / "in", utc(2026, 11, 2, 1, 31, 7), [orjson.dumps(m) for m in (evening, odd, ancient)])

    compact(spark, tmp_path / "in", tmp_path / "out")

    rows = {row["messageId"]: row for row in read_rows(tmp_path / "out" / "messages")}
    header = evening["messageHeader"]
    assert rows["evening"] == {
        "messageId": "evening",
        "messageClass": "Document",
        "correlationId": header["correlationId"],
        "sequence": "seq-1",
        "position": 2,
        "total": 3,
        "publishedTimestamp": datetime(2026, 11, 2, 1, 30, 0, 250000, tzinfo=UTC),
        "expirationTimestamp": utc(2026, 11, 3, 0, 0, 0),
        "generator": header["generator"],
        "version": "3.0.2",
        "errorCode": "APPERRMET003",
        "bodyBytes": len("a fragment, é".encode()),
        "archivedAt": utc(2026, 11, 2, 1, 31, 7),
        "dt": "2026-11-02",  # the UTC date, not the producer's
        "messageType": "MetadataRead",
    }
    # no usable publishedTimestamp: dt falls back to the day it was archived
    assert (rows["odd"]["publishedTimestamp"], rows["odd"]["dt"], rows["odd"]["messageType"]) == (
        None,
        "2026-11-02",
        schema.UNKNOWN_TYPE,
    )
    assert rows["odd"]["bodyBytes"] == len(orjson.dumps(odd["messageBody"]))
    assert rows["ancient"]["dt"] == "0001-01-01"
    folders = sorted(
        str(path.parent.relative_to(tmp_path / "out" / "messages"))
        for path in (tmp_path / "out" / "messages").rglob("*.parquet")
    )
    assert sorted(set(folders)) == [
        "dt=0001-01-01/messageType=MetadataDelete",
        "dt=2026-11-02/messageType=MetadataRead",
        f"dt=2026-11-02/messageType={schema.UNKNOWN_TYPE}",
    ]


def test_written_schemas_are_the_glue_tables(compacted: Compacted) -> None:
    def columns(path: Path) -> list[tuple[str, str]]:
        files = sorted(path.rglob("*.parquet"))
        assert files
        schemas = {tuple((f.name, hive_type(f.type)) for f in pq.read_schema(file)) for file in files}
        assert len(schemas) == 1
        return list(schemas.pop())

    messages = compacted.output / "messages"
    assert columns(messages) == list(schema.CURATED_COLUMNS)
    for folder in {path.parent for path in messages.rglob("*.parquet")}:
        levels = folder.relative_to(messages).parts
        assert [level.split("=")[0] for level in levels] == [name for name, _ in schema.CURATED_PARTITIONS]
    assert columns(compacted.output / "rejects") == list(schema.REJECT_COLUMNS)
    assert columns(compacted.output / "duplicates") == list(schema.DUPLICATE_COLUMNS)
    timestamp = pq.read_schema(next(messages.rglob("*.parquet"))).field("publishedTimestamp").type
    assert (timestamp.unit, timestamp.tz) == ("us", "UTC")


# -- runs after the first (Glue, with bookmarks) -------------------------------------------------------


def test_an_incremental_run_appends_only_messageids_not_curated_before(spark: Any, tmp_path: Path) -> None:
    workload = Workload(8)
    first, second = (orjson.dumps(message(workload, name)) for name in ("first", "second"))
    put(tmp_path / "day1", utc(2026, 11, 1, 12, 0, 0), [first])
    put(tmp_path / "day2", utc(2026, 11, 1, 13, 0, 0), [first, second, second])

    assert compact(spark, tmp_path / "day1", tmp_path / "out", incremental=True)["messages"] == 1
    counts = compact(spark, tmp_path / "day2", tmp_path / "out", incremental=True)

    assert counts == {"lines": 3, "messages": 1, "rejects": 0, "duplicates": 2, "archivedAgain": 0}
    assert sorted(row["messageId"] for row in read_rows(tmp_path / "out" / "messages")) == ["first", "second"]
    assert sorted((row["messageId"], row["discarded"]) for row in plain(tmp_path / "out" / "duplicates")) == [
        ("first", 1),
        ("second", 1),
    ]


def test_the_local_entry_point(spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    put(tmp_path / "in", utc(2026, 11, 1, 12, 0, 0), [orjson.dumps(message(Workload(9), "only")), b"junk"])
    argv = ["--input", str(tmp_path / "in"), "--output", str(tmp_path / "out")]
    assert audit_compaction.main(argv, spark=spark) == 0
    assert json.loads(capsys.readouterr().out) == {
        "archivedAgain": 0,
        "duplicates": 0,
        "lines": 2,
        "messages": 1,
        "rejects": 1,
    }


def test_4_0_0_messages_are_filed_under_their_own_types(spark: Any, tmp_path: Path) -> None:
    """A PreservationEvent (4.0.0's) gets its own partition, not Unknown, in Spark and in process."""
    workload = Workload4(31)
    sent = [workload.message("PreservationEvent", "Event"), workload.message("MetadataCreate", "Event")]
    put(tmp_path / "in", utc(2026, 11, 2, 1, 31, 7), [orjson.dumps(m) for m in sent])
    compact(spark, tmp_path / "in", tmp_path / "out")
    compact_in_process(tmp_path / "in", tmp_path / "single")
    expected = sorted((m["messageHeader"]["messageId"], m["messageHeader"]["messageType"], "4.0.0") for m in sent)
    for output in (tmp_path / "out", tmp_path / "single"):
        rows = read_rows(output / "messages")
        assert sorted((r["messageId"], r["messageType"], r["version"]) for r in rows) == expected
