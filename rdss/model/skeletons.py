"""Minimal valid messages: every required field, placeholder values, nothing more.

What ``rdss new`` prints: a starting point a vendor fills in.
"""

from __future__ import annotations

from typing import Any

from rdss.model import messages, schemas
from rdss.model.messages import Message

_PLACEHOLDER_TIME = "2026-01-01T00:00:00Z"


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


def default_class(message_type: str) -> str:
    """Reads are asked for as Commands; everything else announces an Event."""
    return "Command" if message_type in ("MetadataRead", "VocabularyRead") else "Event"


def skeleton(message_type: str, message_class: str | None = None) -> Message:
    """A minimal valid message of this type and class.

    Raises:
        ValueError: the type is unknown or cannot travel as that class.
    """
    message_class = message_class or default_class(message_type)
    body_schema = schemas.body_schema(message_type, message_class)
    if body_schema is None:
        if message_type not in schemas.MESSAGE_TYPES:
            raise ValueError(f"unknown message type {message_type!r}; one of {', '.join(schemas.MESSAGE_TYPES)}")
        classes = " or ".join(schemas.classes_for(message_type))
        raise ValueError(f"{message_type} does not travel as {message_class}, only as {classes}")
    body: dict[str, Any]
    if body_schema.endswith(("metadata-create.json", "metadata-update.json", "metadata-read-response.json")):
        body = research_object()
    elif body_schema.endswith(("metadata-delete.json", "metadata-read-request.json")):
        body = {"objectUuid": messages.new_id()}
    elif body_schema.endswith("vocabulary-read-request.json"):
        body = {"vocabularyId": 1}
    elif body_schema.endswith("vocabulary-read-response.json"):
        body = {"vocabularyId": 1, "vocabularyTerms": ["term"]}
    else:
        body = {"vocabularyId": 1, "vocabularyName": "Vocabulary name", "vocabularyTerms": ["term"]}
    is_read = message_type in ("MetadataRead", "VocabularyRead")
    return messages.new_message(
        message_type,
        body,
        message_class=message_class,
        correlation_id=messages.new_id() if is_read and message_class == "Document" else None,
        return_address="responses" if is_read and message_class == "Command" else None,
    )
