"""Building messages and decorating them for the invalid and error channels, losslessly."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rdss import SPEC_VERSION
from rdss.model import decoration, schemas
from rdss.model.errors import DESCRIPTIONS, ChannelKind, ErrorCode
from rdss.model.messages import append_history, new_message, reply
from rdss.model.skeletons import skeleton
from rdss.model.validation import validate

UUID4 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


def test_a_new_message_is_valid_and_fresh():
    now = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
    message = new_message(
        "MetadataDelete",
        {"objectUuid": "6ba7b810-9dad-41d1-80b4-00c04fd430c8"},
        now=now,
        expires_in=timedelta(days=7),
        generator="vendor-app-2.1.0",
    )
    header = message["messageHeader"]
    assert UUID4.match(header["messageId"])
    assert UUID4.match(header["messageSequence"]["sequence"])
    assert header["messageSequence"] == {"sequence": header["messageSequence"]["sequence"], "position": 1, "total": 1}
    assert header["version"] == SPEC_VERSION == "3.0.2"
    assert header["generator"] == "vendor-app-2.1.0"
    assert header["messageTimings"] == {
        "publishedTimestamp": "2026-11-21T10:00:00.000Z",
        "expirationTimestamp": "2026-11-28T10:00:00.000Z",
    }
    assert validate(orjson.dumps(message), now=now).valid
    assert new_message("MetadataDelete", {})["messageHeader"]["messageId"] != header["messageId"]


def test_a_reply_correlates_with_its_request():
    request = skeleton("MetadataRead")
    body = skeleton("MetadataCreate")["messageBody"]
    answer = reply(request, body)
    header = answer["messageHeader"]
    assert header["correlationId"] == request["messageHeader"]["messageId"]
    assert header["messageType"] == "MetadataRead"
    assert header["messageClass"] == "Document"
    assert validate(orjson.dumps(answer)).valid


def test_history_entries_accumulate():
    message = skeleton("MetadataDelete")
    append_history(message, machine_id="broker-1", machine_address="10.0.0.5")
    append_history(message, machine_id="gateway-2", machine_address="gw.example.ac.uk")
    history = message["messageHeader"]["messageHistory"]
    assert [h["machineId"] for h in history] == ["broker-1", "gateway-2"]
    assert validate(orjson.dumps(message)).valid


@pytest.mark.parametrize("message_type", schemas.MESSAGE_TYPES)
def test_skeletons_are_valid_for_every_type_and_class(message_type: str):
    for message_class in schemas.classes_for(message_type):
        assert validate(orjson.dumps(skeleton(message_type, message_class))).valid


@pytest.mark.parametrize("message_type", schemas.V4.message_types)
def test_4_0_0_skeletons_are_valid_4_0_0_messages_for_every_type_and_class(message_type: str):
    for message_class in schemas.V4.classes_for(message_type):
        message = skeleton(message_type, message_class, version="4.0.0")
        assert message["messageHeader"]["version"] == "4.0.0"
        verdict = validate(orjson.dumps(message))
        assert (verdict.valid, verdict.version) == (True, "4.0.0"), verdict.error_description
        # judged against 3.0.2 (the version it does not declare), it would not pass
        message["messageHeader"]["version"] = "3.0.2"
        assert not validate(orjson.dumps(message)).valid


def test_skeletons_refuse_unsupported_pairs():
    with pytest.raises(ValueError, match="does not travel as Event"):
        skeleton("MetadataRead", "Event")
    with pytest.raises(ValueError, match="unknown message type"):
        skeleton("MetadataPatch")
    with pytest.raises(ValueError, match=r"unknown message type 'VocabularyRead' in 4\.0\.0"):
        skeleton("VocabularyRead", version="4.0.0")
    with pytest.raises(ValueError, match="unknown message type 'PreservationEvent'"):
        skeleton("PreservationEvent")
    with pytest.raises(ValueError, match="not spoken here"):
        skeleton("MetadataCreate", version="5.0.0")


def test_every_spec_error_code_is_defined_with_its_channel():
    assert {c.value for c in ErrorCode} == {f"GENERR{n:03d}" for n in range(1, 11)} | {
        "APPERRMET001",
        "APPERRMET002",
        "APPERRMET003",
        "APPERRMET004",
        "APPERRVOC002",
    }
    assert all(DESCRIPTIONS[c] for c in ErrorCode)
    invalid = {ErrorCode.GENERR001, ErrorCode.GENERR002, ErrorCode.GENERR004, ErrorCode.GENERR007, ErrorCode.GENERR010}
    for code in invalid:
        assert code.channel is ChannelKind.INVALID
    for code in (ErrorCode.GENERR003, ErrorCode.GENERR006, ErrorCode.GENERR005):
        assert code.channel is ChannelKind.ERROR
    assert "retries" in ErrorCode.GENERR005.description


# -- decoration -------------------------------------------------------------------------------
def test_decoration_inserts_the_error_into_the_header_and_nothing_else():
    original = b'{ "messageHeader" : {"messageId": "x",  "n": 1.50}, "messageBody": {"k": [1, 2]} }\n'
    decorated = decoration.decorate(original, ErrorCode.GENERR001, "messageBody.k: wrong")
    record = orjson.loads(decorated)
    assert record["messageHeader"]["errorCode"] == "GENERR001"
    assert record["messageHeader"]["errorDescription"] == "messageBody.k: wrong"
    assert record["messageBody"] == {"k": [1, 2]}
    assert decoration.original(decorated) == original
    # the bytes around the insertion are the original bytes
    assert decorated.startswith(b'{ "messageHeader" : {"messageId": "x",  "n": 1.50')
    assert decorated.endswith(b'}, "messageBody": {"k": [1, 2]} }\n')


def test_a_header_already_carrying_an_error_is_wrapped():
    original = orjson.dumps({"messageHeader": {"errorCode": "GENERR009"}, "messageBody": {}})
    decorated = decoration.decorate(original, ErrorCode.GENERR004, "bad")
    record = orjson.loads(decorated)
    assert decoration.is_wrapped(record)
    assert record["messageHeader"] == {"errorCode": "GENERR004", "errorDescription": "bad"}
    assert decoration.original(decorated) == original


@pytest.mark.parametrize(
    "payload", [b"", b"\xff\xfe not utf-8", b"[1, 2]", b'{"messageHeader": []}', b'{"a": 1', "é".encode()]
)
def test_undecoratable_payloads_are_wrapped_losslessly(payload: bytes):
    decorated = decoration.decorate(payload, ErrorCode.GENERR007, "malformed")
    record = orjson.loads(decorated)
    assert record["messageHeader"]["errorCode"] == "GENERR007"
    assert decoration.original(decorated) == payload


@settings(max_examples=300)
@given(st.binary(max_size=200))
def test_any_bytes_survive_decoration(payload: bytes):
    verdict = validate(payload)
    code = verdict.error_code or ErrorCode.GENERR009
    decorated = decoration.decorate(payload, code, verdict.error_description or "x")
    assert orjson.loads(decorated)["messageHeader"]["errorCode"] == str(code)
    assert decoration.original(decorated) == payload


_keys = st.sampled_from(["messageHeader", "messageBody", "a", "é", "messageHeaders"])
_values = st.recursive(
    st.none() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=5),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3),
    max_leaves=8,
)


@settings(max_examples=300)
@given(st.dictionaries(_keys, _values, max_size=4), st.sampled_from([None, 2]), st.text(max_size=30))
def test_any_json_object_survives_decoration(document: dict, indent, description: str):
    payload = orjson.dumps(document, option=orjson.OPT_INDENT_2 if indent else 0)
    decorated = decoration.decorate(payload, ErrorCode.GENERR001, description or "d")
    record = orjson.loads(decorated)
    assert record["messageHeader"]["errorCode"] == "GENERR001"
    assert decoration.original(decorated) == payload


@pytest.mark.parametrize("payload", [b'{"messageHeader": {"a": NaN}}', b'{"messageHeader": {}, "x": Infinity}'])
def test_payloads_json_only_to_python_are_wrapped(payload: bytes):
    decorated = decoration.decorate(payload, ErrorCode.GENERR007, "malformed")
    assert decoration.is_wrapped(orjson.loads(decorated))
    assert decoration.original(decorated) == payload


@pytest.mark.parametrize("header_first", [True, False])
def test_a_body_nested_deeper_than_python_recurses_is_still_decorated(header_first: bool):
    # orjson reads 1020 levels; the standard library's scanner, which finds the header, stops
    # near Python's recursion limit: the header is found without reading the body, or wrapped
    header, body = b'"messageHeader":{"messageId":"m"}', b'"messageBody":' + b"[" * 1020 + b"]" * 1020
    payload = b"{" + (header + b"," + body if header_first else body + b"," + header) + b"}"
    record = decoration.decorate(payload, ErrorCode.GENERR001, "deep")
    assert orjson.loads(record)["messageHeader"]["errorCode"] == "GENERR001"
    assert decoration.is_wrapped(orjson.loads(record)) is not header_first
    assert decoration.original(record) == payload
