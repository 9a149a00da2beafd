"""Minimal valid messages: every required field, placeholder values, nothing more.

What ``rdss new`` prints: a starting point a vendor fills in, in the version of the Message API
asked for (3.0.2 by default, or 4.0.0: string enumerations, ``objectUUID``, ``tenantJiscID``).
"""

from __future__ import annotations

from typing import Any

from rdss.model import messages, schemas
from rdss.model.messages import Message

_PLACEHOLDER_TIME = "2026-01-01T00:00:00Z"

#: The tenant a 4.0.0 skeleton belongs to: a placeholder for the institution's own Jisc ID.
PLACEHOLDER_TENANT = 1


def research_object() -> dict[str, Any]:
    """A research object with only its required fields."""
    organisation = {
        "organisationJiscId": 1,
        "organisationName": "Example University",
        "organisationType": 8,
        "organisationAddress": "1 Example Road, Exampleton",
    }
    return {
        "objectUuid": messages.new_id(),
        "objectTitle": "Title of the research object",
        "objectPersonRole": [
            {
                "person": {
                    "personUuid": messages.new_id(),
                    "personIdentifier": [{"personIdentifierValue": "0000-0000-0000-0000", "personIdentifierType": 1}],
                    "personGivenNames": "Given",
                    "personFamilyNames": "Family",
                    "personOrganisationUnit": {
                        "organisationUnitUuid": messages.new_id(),
                        "organisationUnitName": "Example Department",
                        "organisation": organisation,
                    },
                },
                "role": 21,
            }
        ],
        "objectDescription": "Description of the research object",
        "objectRights": {"licence": [{"licenceIdentifier": "CC-BY-4.0"}], "access": [{"accessType": 1}]},
        "objectDate": [{"dateValue": _PLACEHOLDER_TIME, "dateType": 7}],
        "objectResourceType": 7,
        "objectValue": 1,
        "objectIdentifier": [{"identifierValue": "10.0000/example", "identifierType": 4}],
        "objectOrganisationRole": [{"organisation": organisation, "role": 2}],
    }


def research_object_4() -> dict[str, Any]:
    """A 4.0.0 research object with only its required fields (enumerations by name)."""
    organisation = {"organisationJiscId": 1, "organisationName": "Example University"}
    return {
        "objectUUID": messages.new_id(),
        "objectTitle": "Title of the research object",
        "objectPersonRole": [
            {
                "person": {
                    "personUUID": messages.new_id(),
                    "personIdentifier": [
                        {"personIdentifierValue": "0000-0000-0000-0000", "personIdentifierType": "ORCID"}
                    ],
                    "personGivenNames": "Given",
                    "personFamilyNames": "Family",
                },
                "role": "author",
            }
        ],
        "objectDescription": [
            {"descriptionValue": "Description of the research object", "descriptionType": "abstract"}
        ],
        "objectRights": {"licence": [{"licenceIdentifier": "CC-BY-4.0"}], "access": [{"accessType": "open"}]},
        "objectDate": [{"dateValue": _PLACEHOLDER_TIME, "dateType": "published"}],
        "objectResourceType": "dataset",
        "objectIdentifier": [{"identifierValue": "10.0000/example", "identifierType": "DOI"}],
        "objectOrganisationRole": [{"organisation": organisation, "role": "hostingInstitution"}],
    }


def information_package() -> dict[str, Any]:
    """A 4.0.0 PreservationEvent body: the package a preservation system made of an object."""
    return {
        "objectUUID": messages.new_id(),
        "packageUUID": messages.new_id(),
        "packageType": "AIP",
        "packageContainerType": "zip",
        "packagePreservationEvent": {"preservationEventValue": "Stored", "preservationEventType": "ingestion"},
    }


def default_class(message_type: str) -> str:
    """Reads are asked for as Commands; everything else announces an Event."""
    return "Command" if message_type in ("MetadataRead", "VocabularyRead") else "Event"


def skeleton(message_type: str, message_class: str | None = None, *, version: str = schemas.V3.version) -> Message:
    """A minimal valid message of this type and class, in ``version`` of the Message API.

    Raises:
        ValueError: the version is not spoken here, or the type is unknown in it, or cannot
            travel as that class.
    """
    spec = schemas.for_name(version)
    message_class = message_class or default_class(message_type)
    body_schema = spec.body_schema(message_type, message_class)
    if body_schema is None:
        if message_type not in spec.message_types:
            known = ", ".join(spec.message_types)
            where = "" if spec is schemas.V3 else f" in {spec.version}"
            raise ValueError(f"unknown message type {message_type!r}{where}; one of {known}")
        classes = " or ".join(spec.classes_for(message_type))
        raise ValueError(f"{message_type} does not travel as {message_class}, only as {classes}")
    body = _body_4(body_schema) if spec is schemas.V4 else _body_3(body_schema)
    is_read = message_type in ("MetadataRead", "VocabularyRead")
    message = messages.new_message(
        message_type,
        body,
        message_class=message_class,
        correlation_id=messages.new_id() if is_read and message_class == "Document" else None,
        return_address="responses" if is_read and message_class == "Command" else None,
    )
    if spec is not schemas.V3:
        header = message["messageHeader"]
        header["version"] = spec.version
        header["tenantJiscID"] = PLACEHOLDER_TENANT
    return message


def _body_3(body_schema: str) -> dict[str, Any]:
    if body_schema.endswith(("metadata-create.json", "metadata-update.json", "metadata-read-response.json")):
        return research_object()
    if body_schema.endswith(("metadata-delete.json", "metadata-read-request.json")):
        return {"objectUuid": messages.new_id()}
    if body_schema.endswith("vocabulary-read-request.json"):
        return {"vocabularyId": 1}
    if body_schema.endswith("vocabulary-read-response.json"):
        return {"vocabularyId": 1, "vocabularyTerms": ["term"]}
    return {"vocabularyId": 1, "vocabularyName": "Vocabulary name", "vocabularyTerms": ["term"]}


def _body_4(body_schema: str) -> dict[str, Any]:
    if body_schema.endswith(("metadata-create.json", "metadata-update.json", "metadata-read-response.json")):
        return research_object_4()
    if body_schema.endswith(("metadata-delete.json", "metadata-read-request.json")):
        return {"objectUUID": messages.new_id()}
    return information_package()
