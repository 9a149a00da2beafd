"""The Message Translator: RDSS <-> Mosaic envelope, lossless both ways."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rdss.gateway.amqp import mosaic
from rdss.model.messages import serialise
from rdss.model.validation import validate
from rdss.model.workload import Workload

_TEXT = st.text(max_size=12)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=12,
)
_UUID = st.uuids().map(str)
_STAMP = st.datetimes().map(lambda d: d.isoformat() + "Z")
#: Published times in any zone (whole minutes, as ISO 8601 offsets are written), away from the
#: calendar's ends so that every one has a UTC time.
_ZONE = st.integers(-23 * 60 - 59, 23 * 60 + 59).map(lambda minutes: timezone(timedelta(minutes=minutes)))
_ZONED = st.builds(
    lambda moment, zone: moment.replace(tzinfo=zone).isoformat(),
    st.datetimes(min_value=datetime(2, 1, 1), max_value=datetime(9998, 12, 31)),
    _ZONE,
)


@st.composite
def headers(draw: st.DrawFn) -> dict[str, Any]:
    """RDSS-shaped headers: the spec's members, optional ones sometimes, in the spec's order."""
    header: dict[str, Any] = {"messageId": draw(_UUID)}
    if draw(st.booleans()):
        header["correlationId"] = draw(_UUID)
    header["messageClass"] = draw(st.sampled_from(["Command", "Event", "Document"]))
    header["messageType"] = draw(st.sampled_from(["MetadataCreate", "MetadataRead", "VocabularyPatch", "X"]))
    if draw(st.booleans()):
        header["returnAddress"] = draw(_TEXT)
    timings = {"publishedTimestamp": draw(_STAMP | _ZONED)}
    if draw(st.booleans()):
        timings["expirationTimestamp"] = draw(_STAMP)
    header["messageTimings"] = timings
    header["messageSequence"] = {"sequence": draw(_UUID), "position": 1, "total": 1}
    if draw(st.booleans()):
        header["messageHistory"] = draw(
            st.lists(
                st.fixed_dictionaries({"machineId": _TEXT, "machineAddress": _TEXT, "timestamp": _STAMP}), max_size=2
            )
        )
    header["version"] = draw(st.sampled_from(["3.0.2", "3.0.0", "4.0.0-beta.1"]))
    if draw(st.booleans()):
        header["errorCode"] = "GENERR001"
        header["errorDescription"] = draw(_TEXT)
    header["generator"] = draw(_TEXT)
    return header


messages = st.builds(lambda header, body: {"messageHeader": header, "messageBody": body}, headers(), _JSON)
contexts = st.dictionaries(_TEXT.filter(lambda key: key != mosaic.CONTEXT_KEY), _JSON, max_size=3)


@given(messages)
def test_rdss_to_mosaic_to_rdss_is_the_identity(message):
    back = mosaic.to_rdss(mosaic.to_mosaic(message))
    assert back == message
    assert serialise(back) == serialise(message)  # members keep their order too


@given(messages, st.none() | _TEXT, contexts)
def test_mosaic_to_rdss_to_mosaic_is_the_identity(message, token, context):
    envelope = mosaic.to_mosaic(message, auth_token=token, context=context)
    again = mosaic.to_mosaic(mosaic.to_rdss(envelope), **mosaic.carried(envelope).as_kwargs())
    assert again == envelope
    assert orjson.dumps(again) == orjson.dumps(envelope)


@given(messages, st.none() | _TEXT, contexts)
def test_the_byte_level_helpers_round_trip(message, token, context):
    payload = serialise(message)
    body = mosaic.encode(payload, auth_token=token, context=context)
    restored, carried = mosaic.decode(body)
    assert restored == payload
    assert carried == mosaic.Carried(token, context)


@given(messages, st.none() | _TEXT, contexts)
def test_the_envelope_timestamp_is_the_published_time_in_utc(message, token, context):
    envelope = mosaic.to_mosaic(message, auth_token=token, context=context)
    published = datetime.fromisoformat(message["messageHeader"]["messageTimings"]["publishedTimestamp"])
    stamp = envelope["timestamp"]
    assert stamp.endswith("Z")
    assert datetime.fromisoformat(stamp).tzinfo == UTC
    assert datetime.fromisoformat(stamp) == published  # the same instant
    assert mosaic.carried(envelope) == mosaic.Carried(token, context)


@pytest.mark.parametrize(
    ("published", "expected"),
    [
        ("2024-05-01T10:00:00+02:00", "2024-05-01T08:00:00Z"),
        ("2024-05-01T08:00:00Z", "2024-05-01T08:00:00Z"),
        ("2024-12-31T23:30:00.250-01:00", "2025-01-01T00:30:00.250000Z"),
    ],
)
def test_timestamps_are_converted_to_utc_and_the_original_text_comes_back(published, expected):
    message = Workload(seed=4).message("MetadataDelete", "Event")
    message["messageHeader"]["messageTimings"]["publishedTimestamp"] = published
    envelope = mosaic.to_mosaic(message)
    assert envelope["timestamp"] == expected
    assert mosaic.to_rdss(envelope) == message


@pytest.mark.parametrize("published", ["2024-05-01T10:00:00", "yesterday", "2024-05-01"])
def test_a_published_time_without_a_zone_cannot_be_put_in_utc(published):
    message = Workload(seed=5).message("MetadataDelete", "Event")
    message["messageHeader"]["messageTimings"]["publishedTimestamp"] = published
    with pytest.raises(mosaic.TranslationError, match="publishedTimestamp"):
        mosaic.to_mosaic(message)


def test_the_envelope_fields_are_the_rdss_ones():
    message = Workload(seed=3).message("MetadataCreate", "Event")
    header = message["messageHeader"]
    envelope = mosaic.to_mosaic(message, auth_token="eyJhbGciOi.x.y", context={"ingest_id": 7})
    assert envelope["message_id"] == header["messageId"]
    assert envelope["message_type"] == "MetadataCreate"
    assert envelope["message_version"] == "3.0.2"
    assert envelope["timestamp"] == mosaic.utc(header["messageTimings"]["publishedTimestamp"])
    assert envelope["payload"] == message["messageBody"]
    assert envelope["auth_token"] == "eyJhbGciOi.x.y"
    assert envelope["message_context"]["ingest_id"] == 7
    assert envelope["message_context"][mosaic.CONTEXT_KEY]["generator"] == header["generator"]
    assert set(envelope) <= set(mosaic.FIELDS)


def test_realistic_messages_come_back_byte_for_byte_and_valid():
    for message in Workload(seed=11).mix(50):
        payload = serialise(message)
        restored, _ = mosaic.decode(mosaic.encode(payload))
        assert restored == payload
        assert validate(restored).valid


@pytest.mark.parametrize(
    ("payload", "why"),
    [
        (b"not json", "not JSON"),
        (b"[1]", "not a JSON object"),
        (b'{"messageBody": {}}', "messageHeader"),
        (b'{"messageHeader": {"messageId": "x"}, "messageBody": {}}', "publishedTimestamp"),
    ],
)
def test_what_is_not_an_rdss_message_is_refused_with_the_reason(payload, why):
    with pytest.raises(mosaic.TranslationError, match=why):
        mosaic.encode(payload)


def test_an_envelope_from_a_plain_mosaic_service_is_not_an_rdss_message():
    native = {
        "message_id": "1",
        "message_type": "ExampleCreated",
        "timestamp": "t",
        "payload": {},
        "message_version": "1",
    }
    with pytest.raises(mosaic.TranslationError, match=mosaic.CONTEXT_KEY):
        mosaic.to_rdss(native)


def test_the_reserved_context_key_cannot_be_overwritten():
    message = Workload(seed=1).message("MetadataDelete", "Event")
    with pytest.raises(mosaic.TranslationError, match="reserved"):
        mosaic.to_mosaic(message, context={mosaic.CONTEXT_KEY: {}})
