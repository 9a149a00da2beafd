"""The emulator's limits as a class of hostile input: any Kinesis or Firehose request is refused
exactly when a limit AWS states is broken, and answered as AWS answers it; nothing else is."""

from __future__ import annotations

import base64
import functools

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from rdss.local import limits

MIB = 1024 * 1024
sizes = st.one_of(st.integers(0, 64), st.integers(MIB - 300, MIB + 300), st.integers(1_023_900, 1_024_100))
keys = st.one_of(st.text(min_size=0, max_size=3), st.text(min_size=250, max_size=260))


def environ(target: str) -> dict[str, str]:
    return {"HTTP_X_AMZ_TARGET": target, "CONTENT_TYPE": "application/x-amz-json-1.1"}


@functools.cache
def blob(size: int) -> str:
    return base64.b64encode(b"x" * size).decode()


@settings(max_examples=200, deadline=None)
@given(records=st.lists(st.tuples(sizes, keys), min_size=0, max_size=7), single=st.booleans())
def test_kinesis_refuses_exactly_what_breaks_a_limit(records: list[tuple[int, str]], single: bool) -> None:
    if single:
        records = records[:1] or [(0, "k")]
        size, key = records[0]
        request = {"StreamName": "s", "Data": blob(size), "PartitionKey": key}
        answer = limits.refusal(environ("Kinesis_20131202.PutRecord"), orjson.dumps(request))
    else:
        entries = [{"Data": blob(size), "PartitionKey": key} for size, key in records]
        answer = limits.refusal(environ("Kinesis_20131202.PutRecords"), orjson.dumps({"Records": entries}))

    def size_of(size: int, key: str) -> int:
        return size + len(key.encode("utf-8", "surrogatepass"))

    # first the API's constraints on each member (one ValidationException naming them all), then the
    # record size (data and key), then the request's
    members = sum(int(size > MIB) + int(not 1 <= len(key) <= 256) for size, key in records)
    members += 0 if single or records else 1
    too_large = sum(1 for size, key in records if size_of(size, key) > MIB)
    total = sum(size_of(size, key) for size, key in records)
    validation = members or too_large
    breaks = validation > 0 or (not single and total > 5 * MIB)
    assert (answer is not None) is breaks, (records, answer)
    if answer is not None:
        status, _headers, body = answer
        refusal = orjson.loads(body)
        assert status == "400 Bad Request"
        if validation:
            assert refusal["__type"] == "ValidationException"
            assert refusal["message"].startswith(f"{validation} validation error"), refusal
        else:
            assert refusal == {"__type": "InvalidArgumentException", "message": "Records size exceeds 5 MB limit"}


@settings(max_examples=200, deadline=None)
@given(records=st.lists(sizes, min_size=0, max_size=6))
def test_firehose_refuses_exactly_what_breaks_a_limit(records: list[int]) -> None:
    request = {"DeliveryStreamName": "d", "Records": [{"Data": blob(size)} for size in records]}
    answer = limits.refusal(environ("Firehose_20150804.PutRecordBatch"), orjson.dumps(request))
    breaks = not records or any(size > 1_024_000 for size in records) or sum(records) > 4 * MIB
    assert (answer is not None) is breaks, (records, answer)


@given(body=st.binary(max_size=64))
def test_a_json_request_that_is_not_a_json_object_is_a_serialization_exception(body: bytes) -> None:
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        parsed = None
    answer = limits.refusal(environ("Kinesis_20131202.ListStreams"), body)
    if body and not isinstance(parsed, dict):
        assert answer is not None
        assert orjson.loads(answer[2])["__type"] == "SerializationException"
    else:
        assert answer is None


def test_dynamodb_counts_an_item_as_dynamodb_does() -> None:
    # names and values in UTF-8; numbers by their significant digits; lists and maps with their overhead
    assert limits.item_size({"id": {"S": "abc"}}) == 2 + 3
    assert limits.item_size({"n": {"N": "12345"}}) == 1 + 4
    assert limits.item_size({"b": {"B": base64.b64encode(b"12345678").decode()}}) == 1 + 8
    assert limits.item_size({"l": {"L": [{"S": "ab"}, {"BOOL": True}]}}) == 1 + 3 + (1 + 2) + (1 + 1)
    assert limits.item_size({"m": {"M": {"k": {"NULL": True}}}}) == 1 + 3 + 1 + 1 + 1
