"""The classification table of ARCHITECTURE.md, row by row, and the precedence between rows."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta

import orjson
import pytest

from rdss import MAX_MESSAGE_BYTES
from rdss.model.errors import ChannelKind, ErrorCode
from rdss.model.messages import failure_reply, new_message
from rdss.model.sequences import split
from rdss.model.validation import validate, validate_message
from rdss.model.workload import Workload

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


@pytest.fixture
def delete() -> dict:
    return Workload(3).message("MetadataDelete", "Event")


@pytest.fixture
def create() -> dict:
    return Workload(4).message("MetadataCreate", "Event")


def code(payload: bytes | dict, **kwargs) -> str | None:
    if isinstance(payload, dict):
        payload = orjson.dumps(payload)
    verdict = validate(payload, now=NOW, **kwargs)
    return None if verdict.error_code is None else str(verdict.error_code)


# -- parse: GENERR007 ------------------------------------------------------------------------
@pytest.mark.parametrize(
    "payload",
    [
        b"",
        b"   \n",
        b'{"messageHeader": {',
        b"NaN",
        b'{"a": Infinity}',
        b"\xff\xfe{}",
        b'{"a": "\xed\xa0\x80"}',
        b"{'a': 1}",
    ],
    ids=["empty", "blank", "truncated", "nan", "infinity", "bad-bytes", "encoded-surrogate", "single-quotes"],
)
def test_parse_faults_are_generr007(payload: bytes):
    verdict = validate(payload, now=NOW)
    assert verdict.error_code is ErrorCode.GENERR007
    assert verdict.message is None
    assert verdict.channel is ChannelKind.INVALID
    assert verdict.error_description.startswith("payload:")


def test_integers_beyond_64_bits_are_json_but_not_positions(delete: dict):
    payload = orjson.dumps(delete).replace(b'"position":1', b'"position":123456789012345678901234567890')
    verdict = validate(payload, now=NOW)
    assert verdict.error_code is ErrorCode.GENERR004  # parsed, then judged by the header rules
    assert "position" in verdict.error_description


# -- envelope: GENERR004 ---------------------------------------------------------------------
@pytest.mark.parametrize("payload", [b"[]", b'"text"', b"42", b"null", b"true"])
def test_non_object_messages_are_generr004(payload: bytes):
    verdict = validate(payload, now=NOW)
    assert verdict.error_code is ErrorCode.GENERR004
    assert verdict.error_description.startswith("message: a JSON ")


def test_missing_or_non_object_header_is_generr004(delete: dict):
    body_only = {"messageBody": delete["messageBody"]}
    assert code(body_only) == "GENERR004"
    for header in ([], "h", 1, None):
        assert code({**delete, "messageHeader": header}) == "GENERR004"


# -- header: GENERR010 then GENERR004 -----------------------------------------------------------
@pytest.mark.parametrize("field", ["messageId", "correlationId", "sequence"])
@pytest.mark.parametrize(
    "value",
    [
        "not-a-uuid",
        "6BA7B810-9DAD-11D1-80B4-00C04FD430C8",
        "6ba7b810-9dad-61d1-80b4-00c04fd430c8",
        "6ba7b810-9dad-11d1-c0b4-00c04fd430c8",
        "6ba7b8109dad11d180b400c04fd430c8",
        "",
        42,
    ],
    ids=["garbage", "upper-case", "version-6", "bad-variant", "no-hyphens", "empty", "number"],
)
def test_malformed_header_uuids_are_generr010(delete: dict, field: str, value):
    header = delete["messageHeader"]
    if field == "sequence":
        header["messageSequence"]["sequence"] = value
    else:
        header[field] = value
    verdict = validate(orjson.dumps(delete), now=NOW)
    assert verdict.error_code is ErrorCode.GENERR010, verdict.error_description
    assert field in verdict.error_description


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        (lambda h: h.pop("messageClass"), "messageClass"),
        (lambda h: h.pop("messageTimings"), "messageTimings"),
        (lambda h: h.pop("messageSequence"), "messageSequence"),
        (lambda h: h.pop("version"), "version"),
        (lambda h: h.pop("generator"), "generator"),
        (lambda h: h.update(extra="x"), "extra"),
        (lambda h: h.update(messageClass="Query"), "messageClass"),
        (lambda h: h["messageTimings"].update(publishedTimestamp="2026-11-21T12:00:00"), "publishedTimestamp"),
        (lambda h: h["messageTimings"].update(publishedTimestamp="2026-11-21"), "publishedTimestamp"),
        (lambda h: h["messageTimings"].update(publishedTimestamp="12:00:00Z"), "publishedTimestamp"),
        (lambda h: h["messageTimings"].update(expirationTimestamp="tomorrow"), "expirationTimestamp"),
        # digits only: jsonschema-rs 0.60's date-time check alone lets "." and "/" through here
        (lambda h: h["messageTimings"].update(publishedTimestamp="20.6-11-21T12:00:00Z"), "publishedTimestamp"),
        (lambda h: h["messageTimings"].update(publishedTimestamp="2026-11-21T12:0/:00Z"), "publishedTimestamp"),
        (lambda h: h["messageTimings"].update(publishedTimestamp="2026-11-21T12:00:0.Z"), "publishedTimestamp"),
        (lambda h: h["messageTimings"].update(publishedTimestamp="2026-11-21T12:00:00+01:0/"), "publishedTimestamp"),
        (lambda h: h.update(version="3.0"), "version"),
        (lambda h: h.update(version="v3.0.2"), "version"),
        (lambda h: h.update(generator=""), "generator"),
        (lambda h: h.update(returnAddress=""), "returnAddress"),
        (lambda h: h.update(errorCode=""), "errorCode"),
        (lambda h: h.update(errorCode=42), "errorCode"),
        (lambda h: h.update(errorDescription=""), "errorDescription"),
        (lambda h: h["messageSequence"].update(position=1.0), "position"),
        (lambda h: h["messageSequence"].update(total=1.0), "total"),
        (lambda h: h["messageSequence"].update(position=1.5), "position"),
        (lambda h: h["messageSequence"].update(position=0), "position"),
        (lambda h: h["messageSequence"].update(position=2, total=1), "position"),
        (lambda h: h["messageSequence"].update(total=0), "total"),
        (lambda h: h["messageSequence"].update(position="1"), "position"),
        (
            lambda h: h.update(
                messageHistory=[{"machineId": "m", "machineAddress": "bad host!", "timestamp": "2026-11-21T12:00:00Z"}]
            ),
            "machineAddress",
        ),
    ],
)
def test_other_header_faults_are_generr004(delete: dict, change, fragment: str):
    change(delete["messageHeader"])
    verdict = validate(orjson.dumps(delete), now=NOW)
    assert verdict.error_code is ErrorCode.GENERR004, verdict.error_description
    assert fragment in verdict.error_description


@pytest.mark.parametrize("error_code", ["E42", "APPERRXYZ001", "generr001", "anything non-empty"])
def test_an_error_code_outside_the_spec_list_is_accepted(delete: dict, error_code: str):
    # the published header allows any non-empty string (a message decorated elsewhere may
    # carry a code of its own); so does errorDescription
    delete["messageHeader"].update(errorCode=error_code, errorDescription="decorated by someone else")
    assert code(delete) is None


def test_an_integer_written_with_a_fraction_is_a_header_fault(delete: dict):
    # draft 04 (the published schemas) counts 1.0 as a number, not an integer
    payload = orjson.dumps(delete)
    assert b'"position":1,' in payload
    for written in (b"1.0", b"1e0", b"1.00"):
        verdict = validate(payload.replace(b'"position":1,', b'"position":' + written + b","), now=NOW)
        assert verdict.error_code is ErrorCode.GENERR004, written
        assert verdict.error_description.startswith("messageHeader.messageSequence.position: 1.0 is not an integer")


@pytest.mark.parametrize("message_type", ["MetadataRead", "VocabularyRead"])
def test_a_document_answering_a_read_needs_a_correlation_id(message_type: str):
    reply = Workload(5).message(message_type, "Document")
    assert code(reply) is None
    del reply["messageHeader"]["correlationId"]
    verdict = validate(orjson.dumps(reply), now=NOW)
    assert verdict.error_code is ErrorCode.GENERR004
    assert "correlationId" in verdict.error_description
    # a Command asking for the read needs none
    assert code(Workload(5).message(message_type, "Command")) is None


@pytest.mark.parametrize(
    ("message_type", "error_code"), [("MetadataRead", "APPERRMET003"), ("VocabularyRead", "APPERRVOC002")]
)
def test_a_failure_reply_carries_its_requests_body(message_type: str, error_code: str):
    request = Workload(6).message(message_type, "Command")
    failure = failure_reply(request, error_code, "not found here")
    assert code(failure) is None
    assert failure["messageBody"] == request["messageBody"]
    # without its errorCode (or correlationId) it is an ordinary Document, whose body is wrong
    plain = copy.deepcopy(failure)
    del plain["messageHeader"]["errorCode"], plain["messageHeader"]["errorDescription"]
    assert code(plain) == "GENERR001"
    # and the request's body must still be right
    failure["messageBody"] = {"unexpected": True}
    assert code(failure) == "GENERR001"


@pytest.mark.parametrize(
    ("message_type", "error_code"), [("MetadataRead", "APPERRMET003"), ("VocabularyRead", "APPERRVOC002")]
)
def test_a_failure_reply_may_carry_the_response_body(message_type: str, error_code: str):
    """A responder that answers with its response body and an errorCode: the published schemas
    (knowing only the response body) accept it, so the classifier does too (the 3.0.2 fuzz test
    found the difference at 10,000 mutants); a body neither the request's nor the response's is
    described by the request's schema, the form failure replies are written in."""
    request = Workload(6).message(message_type, "Command")
    response = Workload(7).message(message_type, "Document")
    failure = failure_reply(request, error_code, "partly answered")
    failure["messageBody"] = response["messageBody"]
    assert code(failure) is None
    failure["messageBody"] = {"unexpected": True}
    verdict = validate(orjson.dumps(failure), now=NOW)
    assert verdict.error_code is ErrorCode.GENERR001
    assert "unexpected" in (verdict.error_description or "")


# -- type: GENERR002 ---------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["MetadataPatch", "metadatacreate", 7, ["MetadataCreate"], None])
def test_unsupported_message_types_are_generr002(delete: dict, value):
    delete["messageHeader"]["messageType"] = value
    assert code(delete) == "GENERR002"


@pytest.mark.parametrize("message_type", ["MetadataRead", "VocabularyRead"])
def test_reads_travel_as_command_or_document_only(message_type: str):
    message = Workload(6).message(message_type, "Command")
    message["messageHeader"]["messageClass"] = "Event"
    verdict = validate(orjson.dumps(message), now=NOW)
    assert verdict.error_code is ErrorCode.GENERR002
    assert "Event" in verdict.error_description


# -- size: GENERR006 ---------------------------------------------------------------------------
def test_a_whole_message_over_the_limit_is_generr006_and_goes_to_the_error_channel():
    big = Workload(7).large(MAX_MESSAGE_BYTES + 1)
    payload = orjson.dumps(big)
    assert len(payload) > MAX_MESSAGE_BYTES
    verdict = validate(payload, now=NOW)
    assert verdict.error_code is ErrorCode.GENERR006
    assert verdict.channel is ChannelKind.ERROR
    assert f"{len(payload):,}" in verdict.error_description


def test_the_limit_itself_is_allowed(delete: dict):
    payload = orjson.dumps(delete)
    padded = payload[:-1] + b" " * (MAX_MESSAGE_BYTES - len(payload)) + b"}"
    assert len(padded) == MAX_MESSAGE_BYTES
    assert code(padded) is None
    assert code(padded[:-1] + b" }") == "GENERR006"


def test_parts_and_reassembled_messages_are_not_size_checked():
    big = Workload(8).large(1_300_000)
    for part in split(big):
        assert code(part) is None
    assert validate_message(big, now=NOW).valid
    assert code(orjson.dumps(big), size_limit=None) is None


# -- expiry: GENERR003 -------------------------------------------------------------------------
def test_expiry_is_judged_against_now(delete: dict):
    delete["messageHeader"]["messageTimings"]["expirationTimestamp"] = "2026-11-21T13:00:00+01:00"  # = NOW
    payload = orjson.dumps(delete)
    assert validate(payload, now=NOW).error_code is ErrorCode.GENERR003
    assert validate(payload, now=NOW - timedelta(seconds=1)).valid
    assert validate(payload, now=NOW, check_expiry=False).valid
    assert validate(payload, now=NOW).channel is ChannelKind.ERROR


def test_now_must_be_aware(delete: dict):
    delete["messageHeader"]["messageTimings"]["expirationTimestamp"] = "2026-11-21T13:00:00Z"
    with pytest.raises(ValueError, match="aware"):
        validate(orjson.dumps(delete), now=datetime(2026, 11, 21))


def test_lower_case_and_long_fraction_timestamps_expire_too(delete: dict):
    delete["messageHeader"]["messageTimings"]["expirationTimestamp"] = "2026-11-21t11:59:59.123456789z"
    assert code(delete) == "GENERR003"


# -- body: GENERR010 then GENERR001 ---------------------------------------------------------------
def test_a_malformed_body_uuid_is_generr010(create: dict):
    create["messageBody"]["objectPersonRole"][0]["person"]["personUuid"] = "1234"
    verdict = validate(orjson.dumps(create), now=NOW)
    assert verdict.error_code is ErrorCode.GENERR010
    assert verdict.error_description.startswith("messageBody.objectPersonRole[0].person.personUuid:")


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        (lambda m: m.pop("messageBody"), "messageBody"),
        (lambda m: m.update(messageBody=None), "messageBody"),
        (lambda m: m["messageBody"].pop("objectTitle"), "objectTitle"),
        (lambda m: m["messageBody"].update(objectResourceType=28), "objectResourceType"),
        (lambda m: m["messageBody"].update(objectResourceType=7.0), "objectResourceType"),
        (lambda m: m["messageBody"].update(objectValue=1.0), "objectValue"),
        (lambda m: m["messageBody"]["objectPersonRole"][0].update(role=1.0), "role"),
        (lambda m: m["messageBody"].update(objectValue=1.5), "objectValue"),
        (lambda m: m["messageBody"].update(objectDescription=""), "objectDescription"),
        (lambda m: m["messageBody"].update(objectIdentifier=[]), "objectIdentifier"),
        (lambda m: m["messageBody"]["objectRights"].update(licence=[]), "licence"),
        (lambda m: m["messageBody"]["objectDate"][0].update(dateValue="2026-11-21"), "dateValue"),
        (lambda m: m["messageBody"]["objectDate"][0].update(dateValue="/026-11-21T12:00:00Z"), "dateValue"),
        (lambda m: m["messageBody"]["objectPersonRole"][0]["person"].update(personMail="ada"), "personMail"),
    ],
)
def test_body_schema_faults_are_generr001(create: dict, change, fragment: str):
    change(create)
    verdict = validate(orjson.dumps(create), now=NOW)
    assert verdict.error_code is ErrorCode.GENERR001, verdict.error_description
    assert fragment in verdict.error_description


# -- precedence --------------------------------------------------------------------------------
def test_a_bad_header_uuid_beats_a_missing_field(delete: dict):
    delete["messageHeader"]["messageId"] = "nope"
    del delete["messageHeader"]["generator"]
    assert code(delete) == "GENERR010"


def test_expired_beats_a_bad_body(create: dict):
    create["messageHeader"]["messageTimings"]["expirationTimestamp"] = "2020-01-01T00:00:00Z"
    create["messageBody"]["objectUuid"] = "bad"
    del create["messageBody"]["objectTitle"]
    assert code(create) == "GENERR003"


def test_header_faults_beat_an_unsupported_type(delete: dict):
    delete["messageHeader"]["messageType"] = "Nope"
    del delete["messageHeader"]["version"]
    assert code(delete) == "GENERR004"


def test_an_unsupported_type_beats_oversize_and_expiry():
    big = Workload(9).large(MAX_MESSAGE_BYTES + 10)
    big["messageHeader"]["messageType"] = "MetadataPatch"
    big["messageHeader"]["messageTimings"]["expirationTimestamp"] = "2020-01-01T00:00:00Z"
    assert code(big) == "GENERR002"


def test_oversize_beats_expiry():
    big = Workload(10).large(MAX_MESSAGE_BYTES + 10)
    big["messageHeader"]["messageTimings"]["expirationTimestamp"] = "2020-01-01T00:00:00Z"
    assert code(big) == "GENERR006"


def test_a_body_uuid_beats_other_body_faults(create: dict):
    create["messageBody"]["objectUuid"] = "bad"
    del create["messageBody"]["objectTitle"]
    assert code(create) == "GENERR010"


# -- the verdict ------------------------------------------------------------------------------
def test_a_valid_verdict_carries_the_parsed_message(delete: dict):
    verdict = validate(orjson.dumps(delete), now=NOW)
    assert verdict.valid
    assert verdict.error_code is verdict.error_description is verdict.channel is None
    assert verdict.message == delete
    assert verdict.header == delete["messageHeader"]
    assert not verdict.is_part


def test_parts_are_flagged_and_need_a_string_body():
    parts = split(Workload(11).large(40_000), limit=15_000)
    verdict = validate(orjson.dumps(parts[1]), now=NOW)
    assert verdict.valid
    assert verdict.is_part
    broken = copy.deepcopy(parts[1])
    broken["messageBody"] = {"not": "a fragment"}
    verdict = validate(orjson.dumps(broken), now=NOW)
    assert verdict.error_code is ErrorCode.GENERR001
    assert verdict.is_part


def test_str_payloads_are_encoded(delete: dict):
    assert validate(orjson.dumps(delete).decode(), now=NOW).valid


def test_descriptions_are_bounded():
    message = new_message("MetadataDelete", {"objectUuid": "x" * 10_000})
    verdict = validate(orjson.dumps(message), now=NOW)
    assert verdict.error_code is ErrorCode.GENERR010
    assert len(verdict.error_description) <= 500
