"""The project's schemas: well-formed, faithful to the published data model, and exercised by
the repository's examples and by a mutation of every rule they state."""

from __future__ import annotations

from pathlib import Path

import jsonschema_rs
import orjson
import pytest

from rdss.model import schemas
from rdss.model.validation import _validator, validate
from tests.conftest import invalid_examples, valid_examples
from tests.support.mutations import mutations


def test_every_document_is_a_valid_2020_12_schema_under_the_project_namespace():
    documents = schemas.documents()
    assert len(documents) == 17
    for relative, document in documents.items():
        if relative == schemas.INTEGER:
            continue
        assert document["$schema"] == schemas.DIALECT, relative
        assert document["$id"] == schemas.SCHEMA_BASE + relative
        assert jsonschema_rs.meta.is_valid(document), relative


def test_the_integer_definition_is_the_one_draft_04_document():
    document = schemas.documents()[schemas.INTEGER]
    assert document["$schema"] == schemas.INTEGER_DIALECT
    assert document["id"] == schemas.SCHEMA_BASE + schemas.INTEGER
    assert jsonschema_rs.meta.is_valid(document)
    # draft 04 counts 1.0 as a number, not an integer; draft 2020-12 would accept it
    checker = schemas.validator(schemas.INTEGER)
    assert checker.is_valid(1)
    assert not checker.is_valid(1.0)
    assert not checker.is_valid(True)
    assert jsonschema_rs.Draft202012Validator({"type": "integer"}).is_valid(1.0)


def _integers(node: object) -> int:
    """How many places of a schema state "type": "integer" themselves instead of referring to
    the draft-04 definition."""
    if isinstance(node, dict):
        own = node.get("type") == "integer" or "integer" in (node.get("type") or [])
        return int(own) + sum(_integers(value) for value in node.values())
    if isinstance(node, list):
        return sum(_integers(value) for value in node)
    return 0


def test_every_integer_refers_to_the_draft_04_definition():
    for relative, document in schemas.documents().items():
        if relative != schemas.INTEGER:
            assert _integers(document) == 0, relative


def test_integer_coded_enumerations_keep_the_published_ranges_and_names():
    # ranges and names as published in the RDSS 3.0.0 data model
    expected = {
        "accessType": (5, "open"),
        "checksumType": (2, "md5"),
        "dateType": (10, "accepted"),
        "fileUse": (7, "originalFile"),
        "identifierType": (19, "ARK"),
        "objectValue": (3, "normal"),
        "organisationRole": (10, "funder"),
        "organisationType": (15, "charity"),
        "personIdentifierType": (6, "ORCID"),
        "personRole": (22, "administrator"),
        "preservationEventType": (18, "capture"),
        "relationType": (37, "cites"),
        "resourceType": (27, "artDesignItem"),
        "storageStatus": (3, "online"),
        "storageType": (2, "S3"),
        "uploadStatus": (3, "uploadStarted"),
    }
    definitions = schemas.documents()["model/enumerations.json"]["$defs"]
    for name, (maximum, first) in expected.items():
        assert definitions[name]["$ref"] == "integer.json", name
        assert definitions[name]["minimum"] == 1
        assert definitions[name]["maximum"] == maximum, name
        assert schemas.enumeration_names(name)[0] == first
    assert schemas.enumeration_names("resourceType")[6] == "dataset"  # code 7


def test_body_schema_selection_follows_type_and_class():
    assert schemas.body_schema("MetadataCreate", "Event") == "body/metadata-create.json"
    assert schemas.body_schema("MetadataRead", "Command") == "body/metadata-read-request.json"
    assert schemas.body_schema("MetadataRead", "Document") == "body/metadata-read-response.json"
    assert schemas.body_schema("VocabularyRead", "Command") == "body/vocabulary-read-request.json"
    assert schemas.body_schema("VocabularyRead", "Document") == "body/vocabulary-read-response.json"
    assert schemas.body_schema("MetadataRead", "Event") is None
    assert schemas.body_schema("MetadataPatch", "Event") is None


@pytest.mark.parametrize("path", valid_examples(), ids=lambda p: p.name)
def test_valid_examples_are_accepted(path: Path):
    verdict = validate(path.read_bytes())
    assert verdict.valid, verdict.error_description


@pytest.mark.parametrize("path", invalid_examples(), ids=lambda p: p.name)
def test_invalid_examples_get_the_code_in_their_name(path: Path):
    expected = path.name.split("-", 1)[0]
    verdict = validate(path.read_bytes())
    assert str(verdict.error_code) == expected, verdict.error_description
    assert verdict.error_description


def test_examples_cover_every_type_and_class():
    names = {p.name for p in valid_examples()}
    for message_type in schemas.MESSAGE_TYPES:
        for message_class in schemas.classes_for(message_type):
            kebab = "".join("-" + c.lower() if c.isupper() else c for c in message_type).lstrip("-")
            assert f"{kebab}-{message_class.lower()}.json" in names


def _whole_examples() -> list[Path]:
    return [p for p in valid_examples() if "sequence-part" not in p.name]


@pytest.mark.parametrize("path", _whole_examples(), ids=lambda p: p.name)
def test_every_rule_rejects_its_mutation(path: Path):
    message = orjson.loads(path.read_bytes())
    count = 0
    for mutation in mutations(message):
        count += 1
        payload = orjson.dumps(mutation.message)
        verdict = validate(payload)
        assert str(verdict.error_code) == mutation.expected_code, f"{mutation}: {verdict.error_description}"
        header = mutation.message.get("messageHeader")
        if isinstance(header, dict):
            checker = _validator(header.get("messageType"), header.get("messageClass"), False)
            if checker is not None:  # None: the mutation made the type unsupported
                # the valid path's single is_valid call must reject what the staged walk describes
                assert not checker.is_valid(mutation.message), str(mutation)
    assert count >= 20  # the walk really visited the message


# -- the 4.0.0 set ---------------------------------------------------------------------------------


def test_the_4_0_0_set_is_valid_2020_12_under_its_own_namespace_and_apart_from_3_0_2():
    documents = schemas.V4.documents()
    assert len(documents) == 18
    for relative, document in documents.items():
        assert document["$schema"] == schemas.DIALECT, relative
        assert document["$id"] == schemas.V4.base + relative
        assert jsonschema_rs.meta.is_valid(document), relative
    # the 3.0.2 set is schemas/ itself, less the 4.0.0 directory within it
    assert not [relative for relative in schemas.documents() if relative.startswith("4.0.0/")]


def test_every_4_0_0_definition_compiles_its_references_resolving_within_the_set():
    for relative, document in schemas.V4.documents().items():
        for name in document.get("$defs", {}):
            assert schemas.V4.validator(f"{relative}#/$defs/{name}") is not None, (relative, name)


def test_4_0_0_enumerations_are_strings():
    definitions = schemas.V4.documents()["model/enumerations.json"]["$defs"]
    assert len(definitions) == 23
    for name, definition in definitions.items():
        assert definition["enum"], name
        assert all(type(value) is str for value in definition["enum"]), name
    assert definitions["messageType"]["enum"] == list(schemas.V4.message_types)
    # draft 06 (the published 4.0.0 schemas) counts 1.0 as an integer, as 2020-12 does
    assert schemas.V4.validator("message/header.json#/$defs/messageSequence").is_valid(
        {"sequence": "9b2e9f5c-1c1a-4d5e-8f00-0a0b0c0d0e0f", "position": 1.0, "total": 1.0}
    )
