"""The classifier is total, and no ambiguity passes it (issue 21, items 2 and 4).

Every byte string gets a verdict, never an exception: timestamps Python's datetime cannot hold
(year 0000, leap seconds, offsets up to 23:59 at the calendar's ends), numbers beyond 64 bits or a
double, deep nesting, odd bytes. A JSON object naming a member twice is malformed (GENERR007).
"""

from __future__ import annotations

import copy
import uuid
from datetime import UTC, datetime, timedelta

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rdss.cli import main
from rdss.gateway import Gateway, MessageRefused
from rdss.gateway.log import memory as memory_backend
from rdss.model import jsonkeys, timestamps
from rdss.model.errors import ErrorCode
from rdss.model.validation import validate
from rdss.model.workload import Workload

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


@pytest.fixture
def create() -> dict:
    return Workload(4).message("MetadataCreate", "Event")


def verdict_of(message: dict | bytes, **kwargs):
    payload = message if isinstance(message, bytes) else orjson.dumps(message)
    return validate(payload, now=kwargs.pop("now", NOW), **kwargs)


def with_timings(message: dict, **timings: str) -> dict:
    changed = copy.deepcopy(message)
    changed["messageHeader"]["messageTimings"].update(timings)
    return changed


# -- timestamps -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("stamp", "expired"),
    [
        ("0000-01-01T00:00:00Z", True),  # RFC 3339 allows year 0000; datetime starts at year 1
        ("0000-01-01T00:00:00+23:59", True),
        ("0001-01-01T00:00:00+23:59", True),  # before year 1 in UTC
        ("2016-12-31T23:59:60Z", True),  # a leap second
        ("9999-12-31T23:59:60Z", False),
        ("9999-12-31T23:59:59-23:59", False),  # after year 9999 in UTC
        ("9999-12-31T23:59:59.999999999999Z", False),
    ],
)
def test_an_expiration_datetime_cannot_hold_is_judged_and_compared(create, stamp, expired):
    verdict = verdict_of(with_timings(create, expirationTimestamp=stamp))
    assert verdict.error_code == (ErrorCode.GENERR003 if expired else None), verdict.error_description


@pytest.mark.parametrize("stamp", ["0000-01-01T00:00:00Z", "9999-12-31T23:59:60Z", "0000-02-29T00:00:00-23:59"])
def test_a_published_timestamp_at_the_calendars_ends_is_valid(create, stamp):
    assert verdict_of(with_timings(create, publishedTimestamp=stamp)).valid


@pytest.mark.parametrize("stamp", ["0000-13-01T00:00:00Z", "2026-01-01T00:00:00+24:00", "2026-01-01T00:00:61Z"])
def test_a_timestamp_outside_rfc_3339_is_a_header_fault(create, stamp):
    verdict = verdict_of(with_timings(create, expirationTimestamp=stamp))
    assert verdict.error_code is ErrorCode.GENERR004
    assert "expirationTimestamp" in (verdict.error_description or "")


def test_a_body_date_in_year_zero_is_judged_by_the_schema(create):
    create["messageBody"]["objectDate"][0]["dateValue"] = "0000-01-01T00:00:00Z"
    assert verdict_of(create).valid


def test_epoch_arithmetic_agrees_with_datetime_where_both_hold():
    for stamp in (
        "1970-01-01T00:00:00Z",
        "2000-02-29T23:59:59.5+05:30",
        "0001-01-01T00:00:00Z",
        "9999-12-31T23:59:59Z",
    ):
        assert timestamps.epoch_microseconds(stamp) == timestamps.microseconds_of(timestamps.parse(stamp))
    assert timestamps.epoch_microseconds("0000-01-01T00:00:00Z") == -62_167_219_200_000_000
    # a leap second is one second past :59, the same instant as the next minute's :00
    assert timestamps.epoch_microseconds("2016-12-31T23:59:60Z") == timestamps.epoch_microseconds(
        "2017-01-01T00:00:00Z"
    )


# -- numbers, nesting, bytes ------------------------------------------------------------------------
def test_numbers_beyond_64_bits_and_a_double_get_the_verdict_of_their_value(create):
    text = orjson.dumps(create).decode()
    position = text.replace('"position":1,', '"position":1' + "0" * 400 + ",", 1)
    verdict = verdict_of(position.encode())
    assert verdict.error_code is ErrorCode.GENERR004  # valid JSON (RFC 8259): position beyond total
    assert "outside 1..total" in (verdict.error_description or "")
    role = orjson.dumps(create).replace(b'"role":', b'"role":1e400,"x":', 1)
    assert verdict_of(role).error_code is ErrorCode.GENERR001
    # 2^64 is an integer, though orjson reads it as a float: here a total of 2^64 parts, judged
    # exactly as more than any sequence may have (a float would have been "not an integer")
    total = orjson.dumps(create).replace(b'"total":1', b'"total":18446744073709551616', 1)
    verdict = verdict_of(total)
    assert verdict.error_code is ErrorCode.GENERR004
    assert "total: 18446744073709551616 parts is more than a sequence may have" in (verdict.error_description or "")
    # and a total a sequence may have, with a whole body: a part's body is a string fragment
    total = orjson.dumps(create).replace(b'"total":1', b'"total":3', 1)
    verdict = verdict_of(total)
    assert verdict.error_code is ErrorCode.GENERR001
    assert "string fragment" in (verdict.error_description or "")


numbers_as_text = (
    st.integers().map(str)
    | st.floats(allow_nan=False, allow_infinity=False).map(repr)
    | st.builds(lambda m, e: f"{m}e{e}", st.integers(-99, 99), st.integers(-5000, 5000))
)


@given(numbers_as_text)
def test_a_number_where_an_object_belongs_is_called_a_number_however_large(number):
    # 1e400 is kept as a Decimal, not infinity: it was once called "a JSON object, expected an object"
    assert validate(number.encode(), now=NOW).error_description == "message: a JSON number, expected an object"
    header = validate(f'{{"messageHeader": {number}}}'.encode(), now=NOW)
    assert header.error_description == "messageHeader: a JSON number, expected an object"


@pytest.mark.parametrize(
    "payload",
    [
        b"[" * 1000 + b"]" * 1000,
        b'{"messageHeader":' * 1000 + b"{}" + b"}" * 1000,
        b"[" * 100_000 + b"]" * 100_000,
        b"\xff\xfe\x00",
        b'{"a":"\xed\xa0\x80"}',  # an encoded surrogate
        b'{"a":"\\ud800"}',  # an escaped lone surrogate
        b"\xef\xbb\xbf{}",
        b"",
        b"NaN",
        b'{"messageHeader":{},"messageBody":' + b"[" * 1000 + b"]" * 1000 + b"}",
    ],
)
def test_odd_payloads_get_a_verdict(payload):
    verdict = validate(payload, now=NOW)
    assert verdict.error_code is not None
    assert verdict.error_description


def test_deep_nesting_inside_a_valid_message_gets_a_verdict(create):
    create["messageBody"]["objectDescription"] = "x"
    payload = orjson.dumps(create).replace(
        b'"objectDescription":"x"', b'"objectDescription":' + b"[" * 1000 + b"]" * 1000
    )
    verdict = verdict_of(payload)
    assert verdict.error_code is ErrorCode.GENERR001


# -- duplicate member names: GENERR007 --------------------------------------------------------------
def test_a_message_id_written_twice_is_malformed(create):
    """The issue's case: a consumer keeping the first key would see ``not-a-uuid``."""
    valid_id = create["messageHeader"]["messageId"]
    text = orjson.dumps(create).replace(
        f'"messageId":"{valid_id}"'.encode(), f'"messageId":"not-a-uuid","messageId":"{valid_id}"'.encode()
    )
    verdict = verdict_of(text)
    assert verdict.error_code is ErrorCode.GENERR007
    assert verdict.error_description is not None
    assert 'messageHeader names the member "messageId" more than once' in verdict.error_description


@pytest.mark.parametrize(
    ("replace", "by", "where"),
    [
        (b'"objectTitle":', b'"objectTitle":"first","objectTitle":', "messageBody"),
        (b'"role":', b'"role":1,"role":', "messageBody.objectPersonRole[0]"),
        (b'"objectTitle":', b'"objectTitle":"a","\\u006fbjectTitle":', "messageBody"),  # escaped, still equal
        (b'"objectTitle":', b'"objectTitle":"a\\u003ab","objectTitle":', "messageBody"),  # an escaped colon
        (b'"messageBody":', b'"messageBody":{},"messageBody":', "the message"),
    ],
)
def test_any_object_naming_a_member_twice_is_malformed(create, replace, by, where):
    verdict = verdict_of(orjson.dumps(create).replace(replace, by, 1))
    assert verdict.error_code is ErrorCode.GENERR007
    assert f"payload: {where} names the member" in (verdict.error_description or "")


def test_indented_duplicates_are_found_and_unique_names_pass(create):
    indented = orjson.dumps(create, option=orjson.OPT_INDENT_2)
    assert verdict_of(indented).valid
    twice = indented.replace(b'"objectTitle": ', b'"objectTitle": "x",\n      "objectTitle": ', 1)
    assert verdict_of(twice).error_code is ErrorCode.GENERR007
    # escaped colons and equal names in different objects are not duplicates
    create["messageBody"]["objectTitle"] = "a:b"
    escaped = orjson.dumps(create).replace(b'"a:b"', b'"a\\u003ab"')
    assert verdict_of(escaped).valid


def test_the_scanner_names_the_first_duplicate_at_any_depth():
    nested = b'{"a":[{"b":1},{"c":{"d":1,"d":2}}]}'
    assert jsonkeys.first_duplicate(nested) == (["a", 1, "c"], "d")
    deep = b'{"k":' * 1000 + b'{"x":1,"x":2}' + b"}" * 1000
    assert jsonkeys.first_duplicate(deep) == (["k"] * 1000, "x")
    assert not jsonkeys.has_unique_names(deep, orjson.loads(deep))
    assert jsonkeys.first_duplicate(b'{"a":"{\\"a\\":1,\\"a\\":2}","b":[1,2]}') is None


# -- the commands and the gateway give verdicts, never tracebacks ----------------------------------
def test_rdss_validate_prints_a_verdict_for_year_zero_and_duplicate_keys(create, tmp_path, capsys):
    year_zero = tmp_path / "year-zero.json"
    year_zero.write_bytes(orjson.dumps(with_timings(create, expirationTimestamp="0000-01-01T00:00:00Z")))
    twice = tmp_path / "twice.json"
    twice.write_bytes(orjson.dumps(create).replace(b'"messageBody":', b'"messageBody":{},"messageBody":'))
    assert main(["validate", str(year_zero), str(twice)]) == 1
    out = capsys.readouterr().out
    assert "GENERR003" in out
    assert "GENERR007" in out
    assert "Traceback" not in out


def test_gateway_send_refuses_year_zero_with_a_verdict(create):
    name = f"t-{uuid.uuid4().hex[:8]}"
    try:
        gateway = Gateway(f"memory://{name}", application="app")
        with pytest.raises(MessageRefused, match="GENERR003"):
            gateway.send(with_timings(create, expirationTimestamp="0000-01-01T00:00:00Z"))
        published = with_timings(create, publishedTimestamp="0000-01-01T00:00:00Z")
        published["messageHeader"]["messageTimings"]["expirationTimestamp"] = timestamps.format(
            timestamps.now() + timedelta(days=1)
        )
        assert gateway.send(published).message_id == create["messageHeader"]["messageId"]
    finally:
        memory_backend.discard(name)


def test_a_sequence_whose_joined_body_names_a_member_twice_is_malformed():
    from rdss.model.sequences import SequenceError, join, split

    whole = Workload(9).large(30_000)
    parts = split(whole, 12_000)
    # the body's title written twice, inside the first fragment
    fragment = parts[0]["messageBody"]
    assert '"objectTitle":' in fragment
    parts[0]["messageBody"] = fragment.replace('"objectTitle":', '"objectTitle":"x","objectTitle":', 1)
    with pytest.raises(SequenceError) as refused:
        join(parts)
    assert refused.value.error_code is ErrorCode.GENERR007
    assert 'messageBody names the member "objectTitle" more than once' in str(refused.value)
