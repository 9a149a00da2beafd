"""The classifier on Message API 4.0.0: judged by the version declared, the same stages and codes
as 3.0.2 (ARCHITECTURE.md's table), the published 4.0.0 examples, the Vocabulary types refused."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest

from rdss import MAX_MESSAGE_BYTES
from rdss.model import schemas
from rdss.model.errors import ErrorCode
from rdss.model.sequences import split
from rdss.model.validation import validate
from rdss.model.workload import Workload, Workload4
from tests.support.published import EXAMPLES_4, examples_4, location_4, reference_4

NOW = datetime(2026, 11, 29, tzinfo=UTC)


def _create() -> dict[str, Any]:
    return Workload4(41).message("MetadataCreate", "Event")


def _delete() -> dict[str, Any]:
    return Workload4(41).message("MetadataDelete", "Event")


def _judged(message: dict[str, Any], **kwargs: Any) -> tuple[str | None, str]:
    verdict = validate(orjson.dumps(message), **kwargs)
    return (None if verdict.error_code is None else str(verdict.error_code)), verdict.version


# -- the published examples -----------------------------------------------------------------------


@pytest.mark.parametrize("example", examples_4(), ids=lambda example: example.name)
def test_the_published_examples_composed_into_whole_messages(example):
    payload = orjson.dumps(example.message)
    verdict = validate(payload, check_expiry=False)  # every example header expired in 2004
    assert verdict.version == "4.0.0"
    assert verdict.valid is example.valid, verdict.error_description
    assert reference_4()(payload) is example.valid  # as the published validator judges them


def test_the_update_example_is_refused_for_its_3_x_shape():
    (update,) = [example for example in examples_4() if "update" in example.name]
    verdict = validate(orjson.dumps(update.message), check_expiry=False)
    assert verdict.error_code is ErrorCode.GENERR001
    # named as the field the 4.0.0 research object misses (it still says objectUuid)
    assert verdict.error_description == 'messageBody: "objectUUID" is a required property'


def test_every_published_example_body_is_composed():
    bodies = location_4() / "messages" / "body"
    published = {path.relative_to(bodies).with_suffix("").as_posix() for path in bodies.rglob("*.json")}
    assert published == {body for _, body, _ in EXAMPLES_4}


def test_the_published_example_headers_have_expired():
    # as published (2004-08-01): judged with expiry, the examples are GENERR003, as 3.0.2's would be
    example = examples_4()[0]
    assert _judged(example.message, now=NOW) == ("GENERR003", "4.0.0")


# -- which version judges -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("declared", "judged"),
    [
        ("4.0.0", "4.0.0"),
        ("4.1.7", "4.0.0"),
        ("4.0.0-rc.1+build.5", "4.0.0"),
        ("3.0.2", "3.0.2"),
        ("3.0.0", "3.0.2"),
        ("1.2.3", "3.0.2"),
        ("5.0.0", "3.0.2"),
        ("40.0.0", "3.0.2"),
        (4, "3.0.2"),
        (None, "3.0.2"),
    ],
)
def test_the_declared_major_version_chooses_the_schemas(declared: Any, judged: str):
    message = _delete()
    message["messageHeader"]["version"] = declared
    assert validate(orjson.dumps(message)).version == judged
    assert schemas.for_version(declared).version == judged


def test_a_3_0_2_message_is_judged_as_before():
    for message_type, message_class, _ in (("MetadataCreate", "Event", 0), ("VocabularyPatch", "Event", 0)):
        message = Workload(41).message(message_type, message_class)
        assert _judged(message) == (None, "3.0.2")
        message["messageHeader"]["tenantJiscID"] = 7  # no 3.0.2 header field
        assert _judged(message) == ("GENERR004", "3.0.2")


def test_a_3_0_2_shaped_message_declaring_4_0_0_is_judged_as_4_0_0():
    message = Workload(41).message("MetadataDelete", "Event")
    message["messageHeader"]["version"] = "4.0.0"
    verdict = validate(orjson.dumps(message))
    assert (str(verdict.error_code), verdict.version) == ("GENERR004", "4.0.0")
    assert "tenantJiscID" in (verdict.error_description or "")


def test_verdicts_before_a_header_is_read_are_3_0_2():
    assert validate(b"not json").version == "3.0.2"
    assert validate(b"[]").version == "3.0.2"
    assert validate(orjson.dumps({"messageBody": {}})).version == "3.0.2"


# -- the stages, in order ---------------------------------------------------------------------------


def _set(message: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    changed = copy.deepcopy(message)
    parent: Any = changed
    for step in path[:-1]:
        parent = parent[step]
    if value is _DELETE:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return changed


_DELETE = object()


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        (("extra",), 1, "GENERR004"),  # envelope
        (("messageHeader", "messageId"), "ABC", "GENERR010"),
        (("messageHeader", "tenantJiscID"), _DELETE, "GENERR004"),
        (("messageHeader", "tenantJiscID"), "1", "GENERR004"),
        (("messageHeader", "messageSequence", "position"), 2, "GENERR004"),
        (("messageHeader", "messageSequence", "total"), 10_001, "GENERR004"),
        (("messageHeader", "messageType"), "MetadataPatch", "GENERR002"),
        (("messageHeader", "messageTimings", "expirationTimestamp"), "2020-01-01T00:00:00Z", "GENERR003"),
        (("messageBody", "objectUUID"), "not-a-uuid", "GENERR010"),
        (("messageBody",), _DELETE, "GENERR001"),
        (("messageBody", "objectUUID"), _DELETE, "GENERR001"),
        (("messageBody", "objectUuid"), "3f2c9f0e-5b7a-4c1e-9d3a-2b1c0d4e5f60", "GENERR001"),
    ],
)
def test_4_0_0_faults_get_the_codes_of_the_stage_table(path: tuple[Any, ...], value: Any, expected: str):
    assert _judged(_set(_delete(), path, value), now=NOW) == (expected, "4.0.0")


def test_a_malformed_uuid_inside_a_research_object_is_generr010():
    # the body is any of four research object forms: the failure is explained by the form the
    # objectResourceType names, so the malformed UUID is found, not hidden in "none of four"
    for kind in ("dataset", "article", "thesisDissertation", "text"):
        message = _set(_create(), ("messageBody", "objectResourceType"), kind)
        message["messageBody"]["objectPersonRole"][0]["person"]["personUUID"] = "X"
        verdict = validate(orjson.dumps(message))
        assert verdict.error_code is ErrorCode.GENERR010, kind
        assert (verdict.error_description or "").startswith("messageBody.objectPersonRole[0].person.personUUID:")


def test_a_3_0_2_integer_enumeration_is_a_4_0_0_body_fault():
    message = _set(_create(), ("messageBody", "objectResourceType"), 7)
    verdict = validate(orjson.dumps(message))
    assert verdict.error_code is ErrorCode.GENERR001
    assert (verdict.error_description or "").startswith("messageBody.objectResourceType:")


def test_a_whole_4_0_0_message_over_the_limit_is_generr006():
    big = Workload4(41).large(MAX_MESSAGE_BYTES + 10)
    assert _judged(big) == ("GENERR006", "4.0.0")
    parts = split(big)
    assert all(validate(orjson.dumps(part)).is_part for part in parts)
    assert {_judged(part) for part in parts} == {(None, "4.0.0")}


@pytest.mark.parametrize("message_type", ["VocabularyRead", "VocabularyPatch"])
def test_a_4_0_0_vocabulary_message_is_generr002_saying_the_types_are_gone(message_type: str):
    message = _set(_delete(), ("messageHeader", "messageType"), message_type)
    verdict = validate(orjson.dumps(message))
    assert (verdict.error_code, verdict.version) == (ErrorCode.GENERR002, "4.0.0")
    assert verdict.error_description == (
        f"messageHeader.messageType: {message_type} has no form in 4.0.0: the Vocabulary message types "
        "are gone in 4.0.0 (MetadataCreate, MetadataUpdate, MetadataDelete, MetadataRead, "
        "PreservationEvent); a vocabulary message declares version 3.0.2"
    )


def test_a_4_0_0_read_travels_as_command_or_document_only():
    message = Workload4(41).message("MetadataRead", "Command")
    message["messageHeader"]["messageClass"] = "Event"
    verdict = validate(orjson.dumps(message))
    assert verdict.error_code is ErrorCode.GENERR002
    assert "Command or Document only" in (verdict.error_description or "")


def test_a_4_0_0_read_response_needs_its_correlation_id():
    message = _set(Workload4(41).message("MetadataRead", "Document"), ("messageHeader", "correlationId"), _DELETE)
    verdict = validate(orjson.dumps(message))
    assert verdict.error_code is ErrorCode.GENERR004
    assert verdict.error_description == (
        "messageHeader.correlationId: required on a Document answering a MetadataRead (it carries the "
        "request's messageId)"
    )


def test_a_preservation_event_is_a_4_0_0_type_only():
    event = Workload4(41).message("PreservationEvent", "Event")
    assert _judged(event) == (None, "4.0.0")
    event["messageHeader"]["version"] = "3.0.2"
    assert _judged(event)[0] in ("GENERR004", "GENERR002")  # tenantJiscID first: a header fault
    del event["messageHeader"]["tenantJiscID"]
    assert _judged(event) == ("GENERR002", "3.0.2")


def test_every_4_0_0_workload_message_is_valid_to_both():
    for message in Workload4(5).mix(200):
        payload = orjson.dumps(message)
        assert validate(payload).valid
        assert reference_4()(payload)
