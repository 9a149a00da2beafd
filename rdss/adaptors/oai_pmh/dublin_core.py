"""Dublin Core -> RDSS: the message a harvested record calls for, and the research object it
carries (what Dublin Core lacks comes from the repository's :class:`Profile`)."""

from __future__ import annotations

import functools
import json
import logging
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rdss import __version__
from rdss.adaptors.oai_pmh.client import Record
from rdss.host.display import shorten
from rdss.host.inputs import InputTooLarge, read_regular_file
from rdss.model import messages, schemas, timestamps
from rdss.model.messages import Message

_log = logging.getLogger(__name__)

#: The namespace of every UUIDv5 the adaptor derives (objects, messages, people).
NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://schemas.rdss.example/adaptors/oai-pmh")

# dc:type values (lower-cased, last path segment for info:eu-repo/semantics/...) -> resourceType
_RESOURCE_TYPES = {
    "dataset": 7,
    "data": 7,
    "text": 22,
    "article": 2,
    "journalarticle": 2,
    "book": 4,
    "bookpart": 5,
    "booksection": 5,
    "conferenceobject": 6,
    "conferencepaper": 6,
    "image": 9,
    "stillimage": 9,
    "movingimage": 12,
    "video": 12,
    "sound": 3,
    "audio": 3,
    "software": 21,
    "thesis": 23,
    "doctoralthesis": 23,
    "masterthesis": 23,
    "report": 18,
    "preprint": 17,
    "review": 19,
    "patent": 15,
    "website": 25,
    "workflow": 26,
    "other": 14,
}
_ORCID = re.compile(r"(\d{4}-\d{4}-\d{4}-\d{3}[\dX])")
_DATE = re.compile(r"(\d{4})(?:-(\d{2})(?:-(\d{2}))?)?\Z")

#: The largest profile file read.
_MAX_PROFILE_BYTES = 1024 * 1024
#: The largest Jisc ID (organisationJiscId, tenantJiscID): the 64-bit integer JSON writers carry.
MAX_JISC_ID = 2**63 - 1


#: The profile's integer-coded fields and the data model's enumerations they hold.
_ENUMERATIONS = {
    "organisation_type": "organisationType",
    "access_type": "accessType",
    "person_identifier_type": "personIdentifierType",
}


@functools.cache
def _codes(name: str) -> tuple[int, int, tuple[str, ...]]:
    """An integer-coded enumeration of the data model (schemas/model/enumerations.json): its
    lowest and highest code and the codes' names, code order."""
    definition = schemas.documents()["model/enumerations.json"]["$defs"][name]
    return definition["minimum"], definition["maximum"], schemas.enumeration_names(name)


def _shown(value: object) -> str:
    return shorten(json.dumps(value, default=repr), 60)


@dataclass(frozen=True)
class Profile:
    """What the adaptor says about the repository that Dublin Core does not."""

    organisation_name: str = "Unknown organisation"
    organisation_jisc_id: int = 0
    #: organisationType code (8: higherEducation).
    organisation_type: int = 8
    organisation_address: str = "Unknown address"
    #: The unit people are attached to (personOrganisationUnit is required, DC has no affiliation).
    unit_name: str = "Repository depositors"
    #: licenceIdentifier for records whose dc:rights names no licence.
    licence: str = "unspecified"
    #: accessType code for the records (1: open - what an OAI-PMH endpoint exposes).
    access_type: int = 1
    #: personIdentifierType for names without an ORCID. DC carries no person identifiers, so such
    #: names get a repository-scoped identifier (``<base URL>#person:<name>``); the data model
    #: names 1 ORCID and 2 researcherId and reserves 3..6: 3 marks these local identifiers by
    #: default. Agree the code with your consumers.
    person_identifier_type: int = 3
    generator: str = f"rdss-oai-pmh-adaptor-{__version__}"

    def __post_init__(self) -> None:
        """Refuse a field of the wrong type or outside its codes: such a profile would make
        every record invalid, and the harvest would move past them (lost).

        Raises:
            ValueError: which field, what it expects, what it found.
        """
        for field_ in fields(self):
            value = getattr(self, field_.name)
            if field_.name in _ENUMERATIONS:
                enumeration = _ENUMERATIONS[field_.name]
                low, high, names = _codes(enumeration)
                if type(value) is not int or not low <= value <= high:
                    hint = f" (write {names.index(value) + low} for {value})" if value in names else ""
                    raise ValueError(
                        f"{field_.name}: expected a code of {enumeration}, a whole number {low}..{high}"
                        f"{hint}, found {_shown(value)}"
                    )
            elif field_.name == "organisation_jisc_id":
                if type(value) is not int or not 0 <= value <= MAX_JISC_ID:
                    raise ValueError(
                        f"{field_.name}: expected a Jisc ID, a whole number 0..2^63-1, found {_shown(value)}"
                    )
            elif not isinstance(value, str) or not value.strip():
                raise ValueError(f"{field_.name}: expected a non-empty string, found {_shown(value)}")

    @classmethod
    def from_file(cls, path: str | Path) -> Profile:
        """A profile from a JSON object of these field names.

        Raises:
            ValueError: unknown fields, or not a JSON object.
            OSError: the file cannot be read, or is no regular file (a FIFO would block the open
                for ever: :func:`rdss.host.inputs.read_regular_file` judges it unopened).
        """
        try:
            text = read_regular_file(Path(path), _MAX_PROFILE_BYTES)  # a few lines, not /dev/zero
        except InputTooLarge:
            raise ValueError(f"{path}: larger than {_MAX_PROFILE_BYTES:,} bytes, not a profile") from None
        try:
            values = json.loads(text)
        except (ValueError, RecursionError) as error:  # UnicodeDecodeError is a ValueError
            raise ValueError(f"{path}: not JSON ({shorten(str(error), 200)})") from None
        if not isinstance(values, dict):
            raise ValueError(f"{path}: expected a JSON object")
        unknown = set(values) - {f.name for f in fields(cls)}
        if unknown:
            shown = ", ".join(shorten(repr(name), 60) for name in sorted(unknown)[:5])
            raise ValueError(f"{path}: unknown profile field(s) {shown}")
        try:
            return cls(**values)
        except ValueError as error:
            raise ValueError(f"{path}: {error}") from None


@dataclass(frozen=True)
class Known:
    """The last version of an identifier the adaptor published."""

    object_uuid: str
    datestamp: str
    deleted: bool = False


def object_uuid(base_url: str, identifier: str, datestamp: str) -> str:
    """The objectUuid of one version of a record (the same every time it is computed)."""
    return str(uuid.uuid5(NAMESPACE, f"{base_url}|{identifier}|{datestamp}"))


def translate(
    record: Record,
    known: Known | None,
    *,
    base_url: str,
    profile: Profile = Profile(),
    now: datetime | None = None,
) -> Message | None:
    """The RDSS message a record calls for, given what was published for it before; None when
    nothing is to be published (already published, or a deletion of something never published)."""
    if known is not None and known.datestamp == record.datestamp and known.deleted == record.deleted:
        return None
    if known is not None and moment(record.datestamp) < moment(known.datestamp):
        return None  # older than what was published: a stale copy
    if record.deleted:
        if known is None or known.deleted:
            return None
        return _message("MetadataDelete", {"objectUuid": known.object_uuid}, record, base_url, profile, now)
    current = object_uuid(base_url, record.identifier, record.datestamp)
    body = research_object(record, current, base_url=base_url, profile=profile)
    if known is not None and not known.deleted:
        previous = {"identifierValue": f"urn:uuid:{known.object_uuid}", "identifierType": 19}  # URN
        body.setdefault("objectRelatedIdentifier", []).append({"identifier": previous, "relationType": 9})
        return _message("MetadataUpdate", body, record, base_url, profile, now)
    return _message("MetadataCreate", body, record, base_url, profile, now)


def research_object(record: Record, uuid_: str, *, base_url: str, profile: Profile) -> dict[str, Any]:
    """A research object from a Dublin Core record (RDSS data model 3.0.0)."""
    dc = record.dc
    organisation = {
        "organisationJiscId": profile.organisation_jisc_id,
        "organisationName": profile.organisation_name,
        "organisationType": profile.organisation_type,
        "organisationAddress": profile.organisation_address,
    }
    unit = {
        "organisationUnitUuid": str(uuid.uuid5(NAMESPACE, f"{base_url}|unit|{profile.unit_name}")),
        "organisationUnitName": profile.unit_name,
        "organisation": organisation,
    }
    people = [(name, 20) for name in dc.get("creator", ())] + [(name, 19) for name in dc.get("contributor", ())]
    if not people:  # objectPersonRole needs one: the depositing unit stands in
        people = [(profile.unit_name, 21)]
    person_roles = _unique([{"person": _person(name, unit, base_url, profile), "role": role} for name, role in people])
    rights = list(dc.get("rights", ()))
    licences = [r for r in rights if _is_licence(r)] or [profile.licence]
    statements = [r for r in rights if not _is_licence(r)]
    object_rights: dict[str, Any] = {}
    if statements:
        object_rights["rightsStatement"] = _unique(statements)
    object_rights["licence"] = [{"licenceIdentifier": licence} for licence in _unique(licences)]
    object_rights["access"] = [{"accessType": profile.access_type}]
    dates = [{"dateValue": value, "dateType": 7} for value in map(_date, dc.get("date", ())) if value]
    dates.append({"dateValue": _date(record.datestamp) or timestamps.format(timestamps.now()), "dateType": 8})
    identifiers = [{"identifierValue": record.identifier, "identifierType": 16}]  # SourceID
    identifiers.extend(i for i in map(_identifier, dc.get("identifier", ())) if i is not None)
    related = [
        {"identifier": i, "relationType": 31}  # hasRelatedMaterial
        for i in map(_identifier, dc.get("relation", ()))
        if i is not None
    ]
    body: dict[str, Any] = {
        "objectUuid": uuid_,
        "objectTitle": next(iter(dc.get("title", ())), "") or f"Untitled ({record.identifier})",
        "objectPersonRole": person_roles,
        "objectDescription": "\n\n".join(dc.get("description", ())) or "No description in the source record.",
        "objectRights": object_rights,
        "objectDate": _unique(dates),
    }
    keywords = _unique(list(dc.get("subject", ())))
    if keywords:
        body["objectKeywords"] = keywords
    body["objectResourceType"] = _resource_type(dc.get("type", ()))
    body["objectValue"] = 1
    body["objectIdentifier"] = _unique(identifiers)
    if related:
        body["objectRelatedIdentifier"] = _unique(related)
    body["objectOrganisationRole"] = [{"organisation": organisation, "role": 2}]  # hostingInstitution
    return body


def _message(
    message_type: str, body: Any, record: Record, base_url: str, profile: Profile, now: datetime | None
) -> Message:
    message = messages.new_message(message_type, body, message_class="Event", generator=profile.generator, now=now)
    seed = f"{base_url}|{record.identifier}|{record.datestamp}|{message_type}"
    header = message["messageHeader"]
    header["messageId"] = str(uuid.uuid5(NAMESPACE, seed))  # the same message each time: receivers drop repeats
    header["messageSequence"]["sequence"] = str(uuid.uuid5(NAMESPACE, seed + "|sequence"))
    return message


def _person(name: str, unit: dict[str, Any], base_url: str, profile: Profile) -> dict[str, Any]:
    orcid = _ORCID.search(name)
    clean = _ORCID.sub("", name).replace("https://orcid.org/", "").strip(" ,;()") or name
    if "," in clean:
        family, _, given = clean.partition(",")
    else:
        given, _, family = clean.rpartition(" ")
    family, given = family.strip() or clean, given.strip() or clean
    identifier = (
        {"personIdentifierValue": orcid.group(1), "personIdentifierType": 1}
        if orcid
        else {
            "personIdentifierValue": f"{base_url}#person:{clean}",
            "personIdentifierType": profile.person_identifier_type,
        }
    )
    return {
        "personUuid": str(uuid.uuid5(NAMESPACE, f"{base_url}|person|{orcid.group(1) if orcid else clean}")),
        "personIdentifier": [identifier],
        "personGivenNames": given,
        "personFamilyNames": family,
        "personOrganisationUnit": unit,
    }


def _identifier(value: str) -> dict[str, Any] | None:
    """An identifier and its scheme, or None for free text (citations often sit in dc:identifier)."""
    text = value.strip()
    lower = text.lower()
    if lower.startswith(("doi:", "https://doi.org/", "http://doi.org/", "http://dx.doi.org/", "10.")):
        doi = re.sub(r"^(doi:|https?://(dx\.)?doi\.org/)", "", text, flags=re.IGNORECASE)
        return {"identifierValue": doi, "identifierType": 4}
    if lower.startswith(("hdl:", "https://hdl.handle.net/", "http://hdl.handle.net/")):
        return {"identifierValue": text, "identifierType": 7}
    if lower.startswith("urn:"):
        return {"identifierValue": text, "identifierType": 19}
    if lower.startswith(("http://", "https://")):
        return {"identifierValue": text, "identifierType": 18}
    if lower.startswith("arxiv:"):
        return {"identifierValue": text, "identifierType": 2}
    if text and " " not in text:
        return {"identifierValue": text, "identifierType": 16}
    return None


def _is_licence(value: str) -> bool:
    """A licence URL or SPDX-like identifier (``CC-BY-4.0``) rather than a rights statement."""
    return value.lower().startswith(("http://", "https://", "info:eu-repo/semantics/")) or (
        " " not in value.strip() and bool(re.fullmatch(r"[A-Za-z0-9.+-]+", value.strip()))
    )


def _resource_type(values: Sequence[str]) -> int:
    for value in values:
        word = re.sub(r"[^a-z]", "", value.lower().rstrip("/").rsplit("/", 1)[-1])
        if word in _RESOURCE_TYPES:
            return _RESOURCE_TYPES[word]
    return 24  # unknown


def _date(value: str) -> str | None:
    """An RFC 3339 date-time for a DC or OAI date (``2020``, ``2020-05``, ``2020-05-17``, full)."""
    text = value.strip()
    match = _DATE.match(text)
    if match:
        year, month, day = match.group(1), match.group(2) or "01", match.group(3) or "01"
        try:
            return timestamps.format(datetime(int(year), int(month), int(day), tzinfo=UTC))
        except ValueError:  # no such day, or the year 0000
            return None
    candidate = text if re.search(r"([Zz]|[+-]\d{2}:\d{2})$", text) else text + "Z"
    try:
        return timestamps.format(timestamps.parse(candidate))
    except (ValueError, OverflowError):  # OverflowError: a zone carrying it past 9999 or before 1
        return None


def readable(datestamp: str) -> bool:
    """Whether a datestamp is one the adaptor can order records by (a date or date-time Python
    represents): a record whose datestamp is not cannot be placed in the harvest."""
    return _date(datestamp) is not None


def moment(datestamp: str) -> datetime:
    normalised = _date(datestamp)
    return timestamps.parse(normalised) if normalised else datetime.min.replace(tzinfo=UTC)


def _unique(items: list[Any]) -> list[Any]:
    """``items`` without repeats, in first-seen order, in one pass: a record may carry 100,000
    subjects, and comparing each with every one kept before would take minutes."""
    seen: set[Any] = set()
    kept: list[Any] = []
    for item in items:
        key = _hashable(item)
        if key not in seen:
            seen.add(key)
            kept.append(item)
    return kept


def _hashable(value: Any) -> Any:
    """A hashable stand-in for ``value``, equal for equal JSON values (dicts whatever their
    order; a list is not a tuple)."""
    if isinstance(value, dict):
        return ("{}", frozenset((k, _hashable(v)) for k, v in value.items()))
    if isinstance(value, list):
        return ("[]", tuple(_hashable(v) for v in value))
    return value
