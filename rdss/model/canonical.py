"""The canonical message: one representation of a header and a research object that every
version of the Message API maps onto (Woolf & Brown's Canonical Message Data Model).

Each version is read into it and written out of it by :mod:`rdss.model.translation`; nothing
else reaches into either version's shape. The canonical form is the union of what 3.0.2 and
4.0.0 can say, so reading either loses nothing; what a target version cannot say is decided
when writing it (dropped, invented or refused, each listed in docs/vendors.md "Versions").

Conventions of the canonical body (a JSON-like tree, the research object's own member names):

- member names are spelt as 4.0.0 spells them: ``objectUUID``, ``objectKeyword``,
  ``fileTechnicalAttribute`` (3.0.2: ``objectUuid``, ``objectKeywords``, ...);
- an enumerated value is its *name* (``"open"``), spelt as 4.0.0 spells it (``researcherID``);
  a 3.0.2 code the data model accepts but never named (personRole 22, personIdentifierType
  3..6) stays an ``int``, so reading it back into 3.0.2 keeps it;
- ``objectDescription`` is a list of ``{descriptionValue, descriptionType}`` (3.0.2's one
  string is one entry of type ``description``);
- ``filePreservationEvent`` is a list of events ``{preservationEventValue,
  preservationEventType?, preservationEventDetail?}`` (4.0.0's one string is one event with no
  type); ``objectPreservationEvent`` (3.0.2 only) is kept as 3.0.2 has it, names for codes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: The versions the translators read and write.
V3 = "3.0.2"
V4 = "4.0.0"
VERSIONS = (V3, V4)

#: Which enumeration a member's value is drawn from, by member name. ``role`` depends on where
#: it sits (see :func:`enumeration_of`).
ENUMERATION_OF_MEMBER: Mapping[str, str] = {
    "accessType": "accessType",
    "checksumType": "checksumType",
    "dateType": "dateType",
    "fileUse": "fileUse",
    "identifierType": "identifierType",
    "objectValue": "objectValue",
    "organisationType": "organisationType",
    "personIdentifierType": "personIdentifierType",
    "preservationEventType": "preservationEventType",
    "relationType": "relationType",
    "objectResourceType": "resourceType",
    "fileUploadStatus": "uploadStatus",
    "fileStorageStatus": "storageStatus",
    "storagePlatformType": "storageType",
}
#: Members whose ``role`` is an organisation's role (every other ``role`` is a person's).
_ORGANISATION_ROLE_PARENTS = frozenset({"objectOrganisationRole", "collectionOrganisationRole", "grantFunder"})

#: Names 3.0.2 and 4.0.0 spell differently for one value: {enumeration: {3.0.2: 4.0.0}}.
RENAMED_IN_V4: Mapping[str, Mapping[str, str]] = {
    "personIdentifierType": {"researcherId": "researcherID"},
    "preservationEventType": {"normalisation": "normalization"},
}
#: Names 4.0.0 added (not in 3.0.2): {enumeration: names}. Read from 4.0.0's enumeration.json.
ADDED_IN_V4: Mapping[str, frozenset[str]] = {
    "dateType": frozenset({"awarded"}),
    "identifierType": frozenset({"UUID"}),
    "organisationRole": frozenset({"awardingInstitution"}),
    "relationType": frozenset({"isAIPOf"}),
    "resourceType": frozenset({"informationPackage"}),
}
#: Names 4.0.0 dropped (3.0.2 only): {enumeration: names}. (preservationEventType's many
#: differences never matter: no 3.0.2 preservation event reaches a 4.0.0 enumeration, and a
#: 4.0.0 PreservationEvent message has no form in 3.0.2.)
REMOVED_IN_V4: Mapping[str, frozenset[str]] = {
    "resourceType": frozenset({"equipment", "journal"}),
}

#: Member names: {3.0.2: 4.0.0} beyond the ``...Uuid`` -> ``...UUID`` rule.
MEMBER_RENAMED_IN_V4: Mapping[str, str] = {
    "objectKeywords": "objectKeyword",
    "collectionKeywords": "collectionKeyword",
    "fileTechnicalAttributes": "fileTechnicalAttribute",
}
MEMBER_RENAMED_IN_V3: Mapping[str, str] = {new: old for old, new in MEMBER_RENAMED_IN_V4.items()}


def enumeration_of(member: str, parent: str | None) -> str | None:
    """The enumeration ``member``'s value is drawn from (``parent``: the member holding the
    object it sits in), or None when it is not enumerated."""
    if member == "role":
        return "organisationRole" if parent in _ORGANISATION_ROLE_PARENTS else "personRole"
    return ENUMERATION_OF_MEMBER.get(member)


@dataclass(frozen=True)
class Sequence:
    """Where a message sits in its sequence (a whole message is 1 of 1)."""

    sequence: str
    position: int
    total: int


@dataclass(frozen=True)
class Header:
    """A message's header, whatever version wrote it.

    ``history`` keeps each hop as written; ``tenant_jisc_id`` is 4.0.0's ``tenantJiscID`` (None
    when read from 3.0.2, which has no such field).
    """

    message_id: str
    message_class: str
    message_type: str
    published: str
    sequence: Sequence
    version: str
    generator: str
    correlation_id: str | None = None
    return_address: str | None = None
    expiration: str | None = None
    history: tuple[Mapping[str, Any], ...] = ()
    error_code: str | None = None
    error_description: str | None = None
    tenant_jisc_id: int | None = None


@dataclass(frozen=True)
class Message:
    """A canonical message: its header and its body in the canonical conventions above.

    ``body`` is the research object (Create, Update, a Read response), ``{"objectUUID": ...}``
    (Delete, a Read request), or, for a type only one version has, that version's body as it
    came (nothing reads into it: such a message has no form in the other version).
    """

    header: Header
    body: Any
    #: Members of a 4.0.0 Dataset, Article or ThesisDissertation beyond the research object
    #: (language, coverage, journal, ...): kept for 4.0.0, no place for them in 3.0.2.
    extension: Mapping[str, Any] = field(default_factory=dict)
