"""The compaction's reading of errors-archive records (glue_jobs/java/rdss/glue/ErrorRecord.java)
against rdss.model.decoration, which wrote them: the same payload, byte for byte, or none."""

from __future__ import annotations

import hashlib
import random
import zlib
from typing import Any

import orjson
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from glue_jobs import audit_compaction
from rdss.model import decoration
from rdss.model.errors import ErrorCode
from rdss.model.workload import Workload

DESCRIPTIONS = [
    "",  # decorate falls back to the spec's description
    'messageHeader: "generator" is required',
    "a tab\there, a newline\nthere, a NUL \x00 and \x1f, a DEL \x7f",
    "back\\slash and /slash",
    "é, ünïcödé, \u2028 and 😀",
]


def payloads() -> list[bytes]:
    """Payloads of every shape decoration meets: messages, odd headers, not JSON, not UTF-8."""
    workload = Workload(41)
    message = orjson.dumps(workload.message("MetadataCreate", "Event"))
    spaced = orjson.dumps(workload.message("MetadataDelete", "Event"), option=orjson.OPT_INDENT_2)
    return [
        message,
        spaced.replace(b"\n", b" "),  # whitespace everywhere, on one line
        b'{"messageBody":{},"messageHeader":{"messageId":"x"},"extra":1}',  # header not last
        b'{"messageHeader":{}}',
        b'{"messageHeader":{ \t}}',
        b'{"messageHeader":{"a":1 },"messageHeader":{"messageId":"last"}}',  # the last header counts
        b'{"messageHeader":{"a":{"b":[1,2,{"c":"}"}]}}}',
        b'{"messageHeader":{"errorCode":"GENERR001"}}',  # already names an error: wrapped
        b'{"messageHeader":"not an object"}',
        b'{"messageHeader":{"k":"\\u00e9\\"}"}}',
        b"not json at all",
        b"",
        b"[1,2,3]",
        b'{"messageHeader":{"a":NaN}}',  # the standard library's scanner would take it: wrapped
        b"\xff\xfe not UTF-8",
        message[: len(message) // 2],
    ]


def decorated_records() -> list[tuple[bytes, bytes | None]]:
    """(record, the payload decoration.original gives back) for every payload x code x description."""
    rng = random.Random(7)
    codes = list(ErrorCode)
    cases: list[tuple[bytes, bytes | None]] = []
    for payload in payloads():
        for description in DESCRIPTIONS:
            record = decoration.decorate(payload, rng.choice(codes), description)
            assert decoration.original(record) == payload
            cases.append((record, payload))
    return cases


def undecorated_records() -> list[bytes]:
    """Records decoration did not write (most have no payload to recover)."""
    message = orjson.dumps(Workload(42).message("MetadataRead", "Command"))
    decorated = decoration.decorate(message, ErrorCode.GENERR004, "a reason")
    return [
        message,  # never decorated
        decorated.replace(b',"errorCode"', b', "errorCode"'),  # not as decoration inserts it (but read so)
        decorated.replace(b"}}", b"} }", 1),
        b'{"messageHeader":{"errorCode":"GENERR004","errorDescription":"x"},"originalPayload":{"data":"x"}}',
        b'{"messageHeader":{},"originalPayload":{"encoding":"utf-8"}}',
        b'{"messageHeader":{},"originalPayload":{"encoding":"directory","path":"x"}}',  # a claim check, no digest
        b"not json",
        b"",
        decorated + b" trailing",
    ]


def read(spark: SparkSession, records: list[bytes]) -> list[dict[str, Any]]:
    audit_compaction.register(spark)
    frame = spark.createDataFrame([(index, record) for index, record in enumerate(records)], "n int, line binary")
    call = F.call_udf(audit_compaction.ERROR_FUNCTION, F.col("line"))
    rows = frame.select("n", call.alias("r")).orderBy("n").collect()
    return [row["r"].asDict() for row in rows]


def identity(payload: bytes) -> tuple[str, int, int]:
    return hashlib.sha256(payload).hexdigest(), len(payload), zlib.crc32(payload)


def test_the_payload_of_every_decorated_record_is_the_one_decoration_wrote(spark: SparkSession) -> None:
    cases = decorated_records()
    found = read(spark, [record for record, _ in cases])
    for (record, payload), row in zip(cases, found, strict=True):
        assert payload is not None
        assert (row["sha256"], row["bytes"], row["crc32"]) == identity(payload), record
        assert row["errorCode"] == orjson.loads(record)["messageHeader"]["errorCode"]


def test_other_records_read_as_decoration_reads_them(spark: SparkSession) -> None:
    records = undecorated_records()
    expected: list[tuple[str, int, int] | tuple[None, None, None]] = []
    for record in records:
        try:
            expected.append(identity(decoration.original(record)))
        except (ValueError, KeyError, TypeError, orjson.JSONDecodeError):
            expected.append((None, None, None))
    assert expected.count((None, None, None)) >= 5  # most have no payload to give
    found = read(spark, records)
    assert [(row["sha256"], row["bytes"], row["crc32"]) for row in found] == expected


@pytest.mark.parametrize("encoding", ["s3", "directory"])
def test_a_claim_check_gives_the_digest_and_size_it_carries(spark: SparkSession, encoding: str) -> None:
    payload = b'{"messageHeader":{"messageId":"big"},"messageBody":"' + b"x" * 2000 + b'"}'
    digest = hashlib.sha256(payload).hexdigest()
    with pytest.raises(ValueError, match="claim check"):
        decoration.original(
            decoration.claim_check("GENERR006", "", location={"encoding": encoding}, size=1, sha256="0")
        )
    record = decoration.claim_check(
        ErrorCode.GENERR006,
        "too large",
        location={"encoding": encoding, "key": f"claim-check/{digest}"},
        size=len(payload),
        sha256=digest,
    )
    (row,) = read(spark, [record])
    assert row == {"errorCode": "GENERR006", "sha256": digest, "bytes": len(payload), "crc32": None}
