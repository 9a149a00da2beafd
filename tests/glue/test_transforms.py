"""The jobs' transforms on tiny DataFrames: rows in, rows out, no files.

The end-to-end tests (test_audit_compaction, test_audit_report, test_broker_verdicts) run the
jobs over archives on disk; these pin each transform's rule on a handful of rows.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from glue_jobs import audit_compaction, audit_report, schema
from rdss.model import decoration
from rdss.model.messages import failure_reply
from rdss.model.rejection import MOVED_PREFIX
from rdss.model.workload import Workload

#: Records as :func:`audit_compaction.locate` gives them: the curated columns and the ones the rules read.
LOCATED = [
    *schema.CURATED_COLUMNS,
    *schema.CURATED_PARTITIONS,
    ("orderKey", "bigint"),
    ("digest", "string"),
    ("rejectedLine", "string"),
    ("rejectedJson", "boolean"),
    ("rejectedFrom", "string"),
]


def located(spark: SparkSession, rows: list[dict[str, Any]]) -> DataFrame:
    return spark.createDataFrame(
        [tuple(row.get(name) for name, _ in LOCATED) for row in rows], ", ".join(f"{n} {k}" for n, k in LOCATED)
    )


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def rejections(spark: SparkSession, rows: list[tuple[str, str]]) -> DataFrame:
    return spark.createDataFrame(rows, "digest string, errorCode string")


AT = datetime(2026, 11, 1, 12, tzinfo=UTC)


def record(message_id: str | None, order: int, line: str | None = None, *, candidate: bool = False) -> dict[str, Any]:
    """One record: ``line`` is kept (and hashed, if a ``candidate``) as parse keeps it."""
    kept = line if (message_id is None or candidate) else None
    return {
        "messageId": message_id,
        "generator": f"record {order}",
        "orderKey": order,
        "digest": digest(line) if candidate and line is not None else None,
        "rejectedLine": kept,
        "rejectedJson": None if message_id else line is not None and line.startswith("{"),
        "rejectedFrom": "s3://archive/object" if kept is not None else None,
        "archivedAt": AT,
        "dt": "2026-11-01",
        "messageType": "MetadataDelete",
    }


# -- compaction --------------------------------------------------------------------------------------


def test_a_digest_held_k_times_marks_the_latest_k_records(spark: SparkSession) -> None:
    records = located(
        spark,
        [
            record("m1", 1, "A", candidate=True),
            record("m1", 2, "A", candidate=True),
            record("m1", 3, "A", candidate=True),
            record("m1", 4, "B", candidate=True),
            record("m2", 5, "C", candidate=True),  # a candidate no rejection holds
        ],
    )
    found = audit_compaction.matched(
        records, rejections(spark, [(digest("A"), "GENERR003"), (digest("A"), "GENERR003"), (digest("B"), "GENERR001")])
    )
    assert sorted(found.collect()) == [(2, "GENERR003"), (3, "GENERR003"), (4, "GENERR001")]


def test_the_curated_row_is_the_first_record_the_broker_accepted(spark: SparkSession) -> None:
    records = located(
        spark,
        [
            record("m1", 1, "broken-1", candidate=True),  # refused: not the curated row
            record("m1", 2),
            record("m1", 3, "broken-2", candidate=True),  # refused: not a duplicate
            record("m1", 4),  # a resend the broker dropped
            record("m2", 5),
            record(None, 6, "garbage"),
        ],
    )
    matches = spark.createDataFrame(
        [(1, "GENERR004"), (3, "GENERR001"), (6, "GENERR007")], "orderKey long, rejectedCode string"
    )
    outputs = audit_compaction.compact(records, matches)
    assert outputs.messages.columns == [name for name, _ in (*schema.CURATED_COLUMNS, *schema.CURATED_PARTITIONS)]
    kept = {row["messageId"]: row["generator"] for row in outputs.messages.collect()}
    assert kept == {"m1": "record 2", "m2": "record 5"}
    assert [tuple(row) for row in outputs.duplicates.collect()] == [("m1", 1)]
    rejects = sorted((row["line"], row["reason"], row["errorCode"]) for row in outputs.rejects.collect())
    assert rejects == [
        ("broken-1", schema.REJECT_BY_BROKER, "GENERR004"),
        ("broken-2", schema.REJECT_BY_BROKER, "GENERR001"),
        ("garbage", schema.REJECT_NOT_JSON, "GENERR007"),
    ]


def test_without_verdicts_every_repeat_of_a_messageid_is_a_duplicate(spark: SparkSession) -> None:
    records = located(spark, [record("m1", 1), record("m1", 2), record("m1", 3), record(None, 4, "{}")])
    outputs = audit_compaction.compact(records)
    assert [tuple(row) for row in outputs.duplicates.collect()] == [("m1", 2)]
    assert [(row["reason"], row["errorCode"]) for row in outputs.rejects.collect()] == [
        (schema.REJECT_NO_MESSAGE_ID, None)
    ]


def test_only_the_brokers_codes_are_its_rejections(spark: SparkSession) -> None:
    lines = spark.createDataFrame(
        [
            (
                '{"messageHeader":{"errorCode":"GENERR009","errorDescription":"x"},'
                '"originalPayload":{"encoding":"utf-8","data":"a"}}',
                "s3://e/errors/error/year=2026/month=11/day=01/hour=00/o",
            ),
            (
                '{"messageHeader":{"errorCode":"GENERR007","errorDescription":"x"},'
                '"originalPayload":{"encoding":"utf-8","data":"b"}}',
                "s3://e/errors/invalid/year=2026/month=11/day=01/hour=00/o",
            ),
        ],
        "line string, source string",
    )
    audit_compaction.register(spark)
    rows = [row.asDict() for row in audit_compaction.rejections(lines).collect()]
    assert [(row["digest"], row["errorCode"], row["channel"]) for row in rows] == [
        (digest("b"), "GENERR007", "invalid")
    ]


def test_audit_lines_carrying_error_fields_are_judged_as_the_broker_judged_them(spark: SparkSession) -> None:
    """Every audit line is a producer's record: a valid message whose header carries errorCode and
    errorDescription (optional fields, e.g. left set on a fixed message) is curated like any other,
    its resend a duplicate, a failure reply a message; a line the broker rejected is a reject only
    as its errors-archive record shows - never because of a code in its header."""
    workload = Workload(9)
    fixed = workload.message("MetadataCreate", "Event")
    fixed["messageHeader"]["errorCode"] = "GENERR009"
    fixed["messageHeader"]["errorDescription"] = "gave up after 5 failed attempts (fixed since)"
    valid = orjson.dumps(fixed)
    reply = orjson.dumps(failure_reply(workload.message("MetadataRead", "Command"), "APPERRMET003", "no such object"))
    broken = fixed | {"messageHeader": fixed["messageHeader"] | {"messageId": "not-a-uuid"}}
    refused = orjson.dumps(broken)
    wrapped = decoration.decorate(b"\xff not JSON", "GENERR007", "malformed JSON")  # no messageId in it
    source = "s3://a/audit/year=2026/month=11/day=01/hour=12/rdss-t-input-1-2026-11-01-12-00-00-ab12.gz"
    audit = [valid, reply, refused, wrapped, valid]  # the last: a producer's resend
    lines = spark.createDataFrame(
        [(line.decode(), source, number) for number, line in enumerate(audit)],
        "line string, source string, lineNumber long",
    )
    audit_compaction.register(spark)
    verdicts = rejections(spark, [(hashlib.sha256(refused).hexdigest(), "GENERR010")]).withColumns(
        {"channel": F.lit("invalid"), "bytes": F.lit(len(refused)), "crc32": F.crc32(F.lit(refused))}
    )
    outputs = audit_compaction.transform(
        lines, audit_compaction.objects(spark, [source]), audit_compaction.Rejections(verdicts)
    )
    kept = {row["messageId"]: row["errorCode"] for row in outputs.messages.collect()}
    assert kept == {
        fixed["messageHeader"]["messageId"]: "GENERR009",
        orjson.loads(reply)["messageHeader"]["messageId"]: "APPERRMET003",
    }
    assert [tuple(row) for row in outputs.duplicates.collect()] == [(fixed["messageHeader"]["messageId"], 1)]
    reports = sorted((row["line"], row["reason"], row["errorCode"]) for row in outputs.rejects.collect())
    assert reports == sorted(
        [
            (refused.decode(), schema.REJECT_BY_BROKER, "GENERR010"),
            (wrapped.decode(), schema.REJECT_NO_MESSAGE_ID, None),
        ]
    )


def test_a_consumer_s_move_in_the_errors_archive_is_no_verdict_on_an_input_record(spark: SparkSession) -> None:
    """by_broker: the broker's classifier codes, and never a record keyed as a consumer's move."""
    rows = spark.createDataFrame(
        [
            ("GENERR010", "record#shardId-000000000000/1"),
            ("GENERR010", "moved:archivematica"),
            ("GENERR003", None),
            ("GENERR009", "9f0c7a1e"),
            ("APPERRMET001", "moved:archivematica"),
        ],
        "errorCode string, partitionKey string",
    )
    keyed = rows.where(audit_compaction.by_broker(F.col("errorCode"), F.col("partitionKey")))
    assert sorted(tuple(row) for row in keyed.collect()) == [
        ("GENERR003", None),
        ("GENERR010", "record#shardId-000000000000/1"),
    ]
    unkeyed = rows.where(audit_compaction.by_broker(F.col("errorCode")))  # an archive without partition keys
    assert sorted(row["errorCode"] for row in unkeyed.collect()) == ["GENERR003", "GENERR010", "GENERR010"]


def test_the_move_prefix_is_the_gateway_s() -> None:
    assert schema.MOVED_PREFIX == MOVED_PREFIX


# -- report ------------------------------------------------------------------------------------------

MESSAGES = ", ".join(f"{name} {kind}" for name, kind in (*schema.CURATED_COLUMNS, *schema.CURATED_PARTITIONS))


def messages(spark: SparkSession, rows: list[dict[str, Any]]) -> DataFrame:
    names = [name for name, _ in (*schema.CURATED_COLUMNS, *schema.CURATED_PARTITIONS)]
    return spark.createDataFrame([tuple(row.get(name) for name in names) for row in rows], MESSAGES)


def at(hour: int, second: float = 0) -> datetime:
    return datetime(2026, 11, 1, hour, 0, tzinfo=UTC).replace(second=int(second))


def test_volume_counts_per_day_type_class_and_generator(spark: SparkSession) -> None:
    base = {"dt": "2026-11-01", "messageType": "MetadataCreate", "messageClass": "Event", "generator": "g"}
    rows = [dict(base, messageId="a"), dict(base, messageId="b"), dict(base, messageId="c", generator="h")]
    volume = audit_report.volume(messages(spark, rows))
    assert [tuple(row) for row in volume.collect()] == [
        ("2026-11-01", "MetadataCreate", "Event", "g", 2),
        ("2026-11-01", "MetadataCreate", "Event", "h", 1),
    ]


def test_duplicate_rates_are_duplicates_over_records_per_day(spark: SparkSession) -> None:
    rows = [
        {"messageId": "a", "dt": "2026-11-01"},
        {"messageId": "b", "dt": "2026-11-01"},
        {"messageId": "c", "dt": "2026-11-02"},
    ]
    duplicates = spark.createDataFrame([("a", 2)], "messageId string, discarded bigint")
    rates = audit_report.duplicate_rates(messages(spark, rows), duplicates)
    assert [tuple(row) for row in rates.collect()] == [("2026-11-01", 4, 2, 0.5), ("2026-11-02", 1, 0, 0.0)]


def test_error_rates_are_records_of_a_code_over_that_days_records(spark: SparkSession) -> None:
    curated = messages(spark, [{"messageId": "a", "archivedAt": at(1)}, {"messageId": "b", "archivedAt": at(2)}])
    rejects = spark.createDataFrame(
        [("x", "not JSON", "s", at(3), None)], ", ".join(f"{n} {k}" for n, k in schema.REJECT_COLUMNS)
    )
    lines = spark.createDataFrame(
        [
            (
                '{"messageHeader":{"errorCode":"GENERR004"}}',
                "s3://e/errors/invalid/year=2026/month=11/day=01/hour=07/o.gz",
            ),
            ("not json", "s3://e/errors/invalid/year=2026/month=11/day=01/hour=07/o.gz"),
        ],
        "line string, source string",
    )
    errors = audit_report.error_records(lines)
    rates = audit_report.error_rates(errors, audit_report.received(curated, rejects))
    assert [tuple(row) for row in rates.collect()] == [
        ("2026-11-01", "invalid", "GENERR004", 1, 3, pytest.approx(1 / 3)),
        ("2026-11-01", "invalid", audit_report.NO_CODE, 1, 3, pytest.approx(1 / 3)),
    ]


def test_a_sequence_is_incomplete_when_positions_1_to_total_are_missing(spark: SparkSession) -> None:
    def part(sequence: str, position: int | None, total: int) -> dict[str, Any]:
        return {
            "messageId": f"{sequence}-{position}",
            "sequence": sequence,
            "position": position,
            "total": total,
            "messageType": "MetadataCreate",
            "publishedTimestamp": at(1),
            "archivedAt": at(2),
        }

    rows = [
        part("whole", 1, 2),
        part("whole", 2, 2),
        part("gap", 1, 3),
        part("gap", 3, 3),
        part("gap", 7, 3),
        part("gap", None, 3),  # 7 is not a position of 3
        part("single", 1, 1),
    ]
    found = audit_report.incomplete_sequences(messages(spark, rows)).collect()
    assert [(row["sequence"], row["total"], row["parts"]) for row in found] == [("gap", 3, 2)]


def test_latency_is_archive_time_less_publication_time(spark: SparkSession) -> None:
    rows = [
        {
            "messageId": str(n),
            "dt": "2026-11-01",
            "messageType": "MetadataRead",
            "publishedTimestamp": at(1),
            "archivedAt": at(1, n),
        }
        for n in range(1, 11)
    ] + [{"messageId": "untimed", "dt": "2026-11-01", "messageType": "MetadataRead", "archivedAt": at(1)}]
    (row,) = audit_report.latency(messages(spark, rows)).collect()
    assert (row["messages"], row["p50Seconds"], row["p90Seconds"], row["maxSeconds"]) == (10, 5.0, 9.0, 10.0)


def test_the_report_tables_have_their_declared_columns(spark: SparkSession) -> None:
    empty = messages(spark, [])
    rejects = spark.createDataFrame([], ", ".join(f"{n} {k}" for n, k in schema.REJECT_COLUMNS))
    duplicates = spark.createDataFrame([], ", ".join(f"{n} {k}" for n, k in schema.DUPLICATE_COLUMNS))
    errors = spark.createDataFrame([], "dt string, channel string, errorCode string")
    tables = audit_report.tables(empty, rejects, duplicates, errors)
    assert set(tables) == set(schema.REPORT_TABLES)
    for name, table in tables.items():
        assert [(f.name, f.dataType.simpleString()) for f in table.schema.fields] == [
            (column, {"bigint": "bigint", "int": "int"}.get(kind, kind)) for column, kind in schema.REPORT_TABLES[name]
        ]
