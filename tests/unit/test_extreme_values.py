"""A property of issue 21 (item 2): every record gets a verdict - a channel - whatever extreme
values it holds, in the classifier and in the broker behind the Kinesis event source mapping
handler (the AWS side stubbed in memory); never an exception, never a nack.

Generated values: years 0000 and 9999, leap seconds, offsets up to +-23:59 (and past it), numbers
of 2^63, 2^64, 10^400 and 1e400, nesting 1,000 deep, invalid UTF-8, duplicate member names,
truncations - placed in the header's timings and sequence, in body dates and body integers.
"""

from __future__ import annotations

import base64
import uuid
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from rdss.amgi.kinesis import KinesisEventSourceMappingHandler
from rdss.deployment.topology import Deployment, from_environment
from rdss.model.errors import ChannelKind, ErrorCode
from rdss.model.validation import Verdict, validate
from rdss.model.workload import Workload
from rdss.processors.broker import Broker

_BASES = [Workload(300 + i).message(kind, "Event") for i, kind in enumerate(["MetadataCreate", "MetadataUpdate"] * 3)]


# -- generated values --------------------------------------------------------------------------
@st.composite
def timestamps(draw: st.DrawFn) -> str:
    year = draw(st.sampled_from([0, 1, 1969, 1970, 2026, 9998, 9999]) | st.integers(0, 9999))
    month = draw(st.integers(1, 12) | st.sampled_from([0, 13]))
    day = draw(st.integers(1, 28) | st.sampled_from([0, 29, 30, 31, 32]))
    hour = draw(st.integers(0, 23) | st.just(24))
    minute = draw(st.integers(0, 59))
    second = draw(st.sampled_from([59, 60, 61]) | st.integers(0, 59))
    fraction = draw(st.sampled_from(["", ".5", ".999999", ".123456789012"]))
    zone = draw(
        st.sampled_from(["Z", "z", "+23:59", "-23:59", "+00:00", "-00:00", "+24:00", "+05:30"])
        | st.builds(
            lambda s, h, m: f"{s}{h:02d}:{m:02d}", st.sampled_from("+-"), st.integers(0, 23), st.integers(0, 59)
        )
    )
    return f"{year:04d}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}{fraction}{zone}"


_HUGE = [
    "9223372036854775808",
    "-9223372036854775809",
    "18446744073709551616",
    "1" + "0" * 400,
    "1e400",
    "-1e400",
    "1e4008446744073709551616",
    "-1E-99999999999999999999",
]
NUMBERS = st.sampled_from([*_HUGE, "1.5e308", "1.0", "-0", "0", "22", "1E2", "4294967296"])


def _nested(depth: int, kind: str) -> bytes:
    if kind == "array":
        return b"[" * depth + b"]" * depth
    return b'{"a":' * depth + b"1" + b"}" * depth


@st.composite
def records(draw: st.DrawFn) -> bytes:
    """A message of the workload with one to three extreme values put in."""
    return draw(keyed_records())[1]


@st.composite
def keyed_records(draw: st.DrawFn) -> tuple[str, bytes]:
    """(the messageId it was given, the record): records of one batch need ids of their own."""
    message = orjson.loads(orjson.dumps(draw(st.sampled_from(_BASES))))
    header = message["messageHeader"]
    header["messageId"] = str(uuid.UUID(int=draw(st.integers(0, 2**128 - 1)), version=4))
    for _ in range(draw(st.integers(1, 3))):
        where = draw(st.sampled_from(["expiration", "published", "body date"]))
        stamp = draw(timestamps())
        if where == "expiration":
            header["messageTimings"]["expirationTimestamp"] = stamp
        elif where == "published":
            header["messageTimings"]["publishedTimestamp"] = stamp
        elif message["messageBody"].get("objectDate"):
            message["messageBody"]["objectDate"][0]["dateValue"] = stamp
    payload = orjson.dumps(message)
    for _ in range(draw(st.integers(0, 2))):
        payload = draw(_text_mutation(payload))
    return header["messageId"], payload


@st.composite
def _text_mutation(draw: st.DrawFn, payload: bytes) -> bytes:
    kind = draw(st.sampled_from(["number", "nesting", "bytes", "duplicate", "truncate"]))
    if kind == "number":
        target = draw(st.sampled_from([b'"position":1', b'"total":1', b'"role":', b'"objectValue":']))
        if target not in payload:
            return payload
        literal = draw(NUMBERS).encode()
        if target.endswith(b":"):  # replace the value after the name
            start = payload.index(target) + len(target)
            end = start
            while payload[end : end + 1] not in (b",", b"}"):
                end += 1
            return payload[:start] + literal + payload[end:]
        return payload.replace(target, target[:-1] + literal, 1)
    if kind == "nesting":
        depth = draw(st.sampled_from([1, 200, 1000, 1100]))
        nested = _nested(depth, draw(st.sampled_from(["array", "object"])))
        return payload.replace(b'"objectTitle":', b'"objectTitle":' + nested + b',"x":', 1)
    if kind == "bytes":
        junk = draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x00", b"\xef\xbb\xbf", b"\\ud800"]))
        at = draw(st.integers(0, len(payload)))
        return payload[:at] + junk + payload[at:]
    if kind == "duplicate":
        name = draw(st.sampled_from([b'"messageId":', b'"messageClass":', b'"objectUuid":', b'"messageBody":']))
        if name not in payload:
            return payload
        return payload.replace(name, name + b'"twice",' + name, 1)
    return payload[: draw(st.integers(0, len(payload)))]


# -- the classifier ------------------------------------------------------------------------------
def test_a_number_beyond_any_exponent_is_malformed_json_not_a_failure_of_the_classifier() -> None:
    # Hypothesis found it: RFC 8259 allows any exponent, Python's decimals stop at 10^(10^18)
    for number in ("1e4008446744073709551616", "-1e4008446744073709551616"):
        verdict = validate(b'{"messageHeader":{"messageId":' + number.encode() + b"}}")
        assert verdict.error_code is ErrorCode.GENERR007, verdict
        assert "beyond any exponent" in verdict.error_description


@settings(max_examples=300)
@given(records())
def test_the_classifier_gives_every_record_a_verdict(payload: bytes):
    verdict = validate(payload)
    assert isinstance(verdict, Verdict)
    if verdict.valid:
        assert verdict.message is not None
    else:
        assert isinstance(verdict.error_code, ErrorCode)
        assert verdict.channel in (ChannelKind.INVALID, ChannelKind.ERROR)
        assert verdict.error_description
        # the classifier itself never failed: GENERR009 would mean it raised
        assert verdict.error_code is not ErrorCode.GENERR009, verdict.error_description


@settings(max_examples=100)
@given(st.binary(max_size=300) | st.text(max_size=200).map(str.encode))
def test_the_classifier_gives_any_bytes_a_verdict(payload: bytes):
    verdict = validate(payload)
    assert verdict.error_code is not ErrorCode.GENERR009
    assert verdict.valid or verdict.error_description


# -- the broker behind the event source mapping handler ------------------------------------------
class _Kinesis:
    """PutRecords in memory: every entry accepted, kept by stream."""

    def __init__(self) -> None:
        self.streams: dict[str, list[bytes]] = {}

    def put_records(self, StreamName: str, Records: list[dict[str, Any]]) -> dict[str, Any]:
        self.streams.setdefault(StreamName, []).extend(r["Data"] for r in Records)
        return {"FailedRecordCount": 0, "Records": [{"ShardId": "s", "SequenceNumber": "1"} for _ in Records]}


class _DynamoDB:
    """The Local Data Repository's calls, answered as an empty table would."""

    def batch_get_item(self, **_: Any) -> dict[str, Any]:
        return {"Responses": {}, "UnprocessedKeys": {}}

    def put_item(self, **_: Any) -> dict[str, Any]:
        return {}

    def update_item(self, **_: Any) -> dict[str, Any]:
        raise AssertionError("no record may fail: an attempt was counted")


_DEPLOYMENT = Deployment("props")
_NAMES = from_environment(_DEPLOYMENT.environment_variables())
_ARN = "arn:aws:kinesis:eu-west-2:000000000000:stream/" + _DEPLOYMENT.stream("input")


def _event(payloads: list[bytes]) -> dict[str, Any]:
    return {
        "Records": [
            {
                "kinesis": {
                    "partitionKey": f"key-{index}",
                    "sequenceNumber": str(1000 + index),
                    "data": base64.b64encode(payload).decode("ascii"),
                    "approximateArrivalTimestamp": 1_790_000_000.0,
                },
                "eventID": f"shardId-000000000000:{1000 + index}",
                "eventSourceARN": _ARN,
            }
            for index, payload in enumerate(payloads)
        ]
    }


@settings(max_examples=40)
@given(st.lists(keyed_records(), min_size=1, max_size=8, unique_by=lambda keyed: keyed[0]))
def test_the_broker_places_every_record_and_nacks_none(keyed: list[tuple[str, bytes]]):
    payloads = [payload for _, payload in keyed]
    kinesis = _Kinesis()
    handler = KinesisEventSourceMappingHandler(Broker(names=_NAMES, dynamodb=_DynamoDB()), kinesis=kinesis)
    try:
        response = handler(_event(payloads), None)
    finally:
        handler.close()
    assert response == {"batchItemFailures": []}
    channels = {_DEPLOYMENT.stream(c): c for c in ("metadata", "sequence", "invalid", "error")}
    outputs = {channels[stream]: records for stream, records in kinesis.streams.items()}
    assert sum(map(len, outputs.values())) == len(payloads)  # one place each
    for record in outputs.get("invalid", []) + outputs.get("error", []):
        code = orjson.loads(record)["messageHeader"]["errorCode"]
        assert code != "GENERR009", "the broker failed on a record"
