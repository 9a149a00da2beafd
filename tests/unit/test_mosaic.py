"""The Message Translator: RDSS <-> Mosaic envelope, lossless both ways."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rdss.gateway.amqp import mosaic
from rdss.messages import serialise
from rdss.validation import validate
from tools.workload import Workload

_TEXT = st.text(max_size=12)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=12,
)
_UUID = st.uuids().map(str)
_STAMP = st.datetimes().map(lambda d: d.isoformat() + "Z")


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
    timings = {"publishedTimestamp": draw(_STAMP)}
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


def test_the_envelope_fields_are_the_rdss_ones():
    message = Workload(seed=3).message("MetadataCreate", "Event")
    header = message["messageHeader"]
    envelope = mosaic.to_mosaic(message, auth_token="eyJhbGciOi.x.y", context={"ingest_id": 7})
    assert envelope["message_id"] == header["messageId"]
    assert envelope["message_type"] == "MetadataCreate"
    assert envelope["message_version"] == "3.0.2"
    assert envelope["timestamp"] == header["messageTimings"]["publishedTimestamp"]
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
