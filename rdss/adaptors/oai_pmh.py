"""The OAI-PMH Channel Adaptor: a repository's Dublin Core records, published as RDSS messages.

Most institutional repositories cannot take a Message Gateway into their code, but nearly all
of them serve OAI-PMH. The adaptor harvests that endpoint incrementally and publishes through a
gateway:

* a record seen for the first time becomes a **MetadataCreate**; a record seen before, with a
  newer datestamp, a **MetadataUpdate** (a new objectUuid for the new version, and
  ``objectRelatedIdentifier`` *isNewVersionOf* the previous one, as the spec's versioning asks);
  a deleted record (``status="deleted"`` in its header) a **MetadataDelete** of the last version
  published; a deleted record never published is skipped;
* **incremental**: each harvest asks for ``from=`` the largest datestamp the previous one saw
  (``from`` is inclusive, so records stamped exactly then come again and are recognised as
  already published), following ``resumptionToken`` pages to the end;
* **restartable**: after each page is published, the harvest position (the harvest's ``from``,
  the next resumption token, the largest datestamp so far) and the versions published per
  identifier are written to the state file atomically (a temporary file, fsync, rename). A
  restart continues with the saved token, or - when the server no longer knows it
  (``badResumptionToken``) - harvests again from the saved ``from``;
* **at least once, without duplicates downstream**: objectUuid and messageId are UUIDv5s of
  (repository, identifier, datestamp), so a page published again after a crash carries the same
  messageIds, which receivers drop as duplicates.

Dublin Core says less than an RDSS research object requires; what it lacks comes from a
:class:`Profile` of the repository (its organisation, default licence and access). A record
whose message still fails the classifier is logged and skipped, never published.

HTTP and XML are the standard library's: ``urllib`` (503 ``Retry-After`` honoured, network
errors retried with a backoff) and ``xml.etree`` (which fetches no external entities).
"""

from __future__ import annotations

import contextlib
import email.utils
import json
import logging
import os
import re
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from rdss import __version__, messages, timestamps
from rdss.messages import Message
from rdss.retry import Backoff
from rdss.validation import validate

_log = logging.getLogger(__name__)

OAI = "{http://www.openarchives.org/OAI/2.0/}"
DC = "{http://purl.org/dc/elements/1.1/}"

#: The namespace of every UUIDv5 the adaptor derives (objects, messages, people).
NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://schemas.rdss.example/adaptors/oai-pmh")

#: Network trouble: retried 0.5 s doubling to 30 s, eight times.
NETWORK_BACKOFF = Backoff(max_retries=8, base=0.25, cap=30.0)

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


class HarvestError(Exception):
    """The repository answered with an OAI-PMH error, or could not be harvested at all."""

    def __init__(self, message: str, code: str = "harvestFailed") -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


class BadResumptionToken(HarvestError):
    """The server no longer knows the token (tokens expire): harvest again from ``from``."""


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

    @classmethod
    def from_file(cls, path: str | Path) -> Profile:
        """A profile from a JSON object of these field names.

        Raises:
            ValueError: unknown fields, or not a JSON object.
            OSError: the file cannot be read.
        """
        values = json.loads(Path(path).read_text())
        if not isinstance(values, dict):
            raise ValueError(f"{path}: expected a JSON object")
        unknown = set(values) - {f.name for f in fields(cls)}
        if unknown:
            raise ValueError(f"{path}: unknown profile field(s) {', '.join(sorted(unknown))}")
        return cls(**values)


@dataclass(frozen=True)
class Record:
    """One record of a ListRecords answer."""

    identifier: str
    datestamp: str
    deleted: bool = False
    sets: tuple[str, ...] = ()
    #: Dublin Core element (``title``, ``creator``...) -> its values, in document order.
    dc: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Page:
    records: list[Record]
    #: The token for the next page; None on the last one.
    token: str | None = None
    complete_list_size: int | None = None


# -- the protocol --------------------------------------------------------------------------------
class OaiPmhClient:
    """The two requests a harvester needs, over HTTP(S)."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float = 60.0,
        backoff: Backoff = NETWORK_BACKOFF,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.base_url = base_url
        self.timeout = timeout
        self.backoff = backoff
        self.sleep = sleep
        #: HTTP requests made, for tests and logs.
        self.requests = 0

    def identify(self) -> dict[str, str]:
        """Identify: repositoryName, baseURL, earliestDatestamp, granularity, deletedRecord..."""
        root = self._get({"verb": "Identify"})
        identify = root.find(f"{OAI}Identify")
        if identify is None:
            raise HarvestError("no Identify element in the answer", "badAnswer")
        return {child.tag.removeprefix(OAI): (child.text or "").strip() for child in identify}

    def list_records(
        self,
        *,
        metadata_prefix: str = "oai_dc",
        from_: str | None = None,
        set_spec: str | None = None,
        token: str | None = None,
    ) -> Page:
        """One page of ListRecords (the first, or the one ``token`` names).

        Raises:
            BadResumptionToken: the token expired.
            HarvestError: any other OAI-PMH error (``noRecordsMatch`` is an empty page, not one).
        """
        if token is not None:
            params = {"verb": "ListRecords", "resumptionToken": token}
        else:
            params = {"verb": "ListRecords", "metadataPrefix": metadata_prefix}
            if from_:
                params["from"] = from_
            if set_spec:
                params["set"] = set_spec
        try:
            root = self._get(params)
        except HarvestError as error:
            if error.code == "noRecordsMatch":
                return Page([])
            raise
        listing = root.find(f"{OAI}ListRecords")
        if listing is None:
            raise HarvestError("no ListRecords element in the answer", "badAnswer")
        records = [_record(element) for element in listing.findall(f"{OAI}record")]
        resumption = listing.find(f"{OAI}resumptionToken")
        following = (resumption.text or "").strip() if resumption is not None else ""
        size = resumption.get("completeListSize") if resumption is not None else None
        return Page(records, following or None, int(size) if size and size.isdigit() else None)

    def _get(self, params: Mapping[str, str]) -> ET.Element:
        url = f"{self.base_url}?{urlencode(params)}"
        request = urllib.request.Request(url, headers={"User-Agent": f"rdss-oai-pmh-adaptor/{__version__}"})
        delays = self.backoff.delays()
        while True:
            self.requests += 1
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    body = response.read()
                break
            except urllib.error.HTTPError as error:
                if error.code not in (500, 502, 503, 504):
                    raise HarvestError(f"HTTP {error.code} from {url}", "httpError") from error
                delay = _retry_after(error.headers.get("Retry-After")) if error.code == 503 else None
                why = f"HTTP {error.code}"
            except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
                delay, why = None, str(getattr(error, "reason", error))
            backoff = next(delays, None)
            if backoff is None:
                raise HarvestError(
                    f"{url} still failing after {self.backoff.max_retries} retries: {why}", "unreachable"
                )
            wait = delay if delay is not None else backoff
            _log.warning("OAI-PMH request failed (%s); retrying in %.1f s", why, wait)
            self.sleep(wait)
        try:
            root = ET.fromstring(body)
        except ET.ParseError as error:
            raise HarvestError(f"not XML: {error}", "badXML") from error
        found = root.find(f"{OAI}error")
        if found is not None:
            code = found.get("code", "unknown")
            text = (found.text or "").strip()
            raise (BadResumptionToken if code == "badResumptionToken" else HarvestError)(text, code)
        return root


def _retry_after(value: str | None) -> float | None:
    """Seconds to wait per a Retry-After header (seconds or an HTTP date), at most 5 minutes."""
    if not value:
        return None
    if value.strip().isdigit():
        return min(300.0, float(value))
    with contextlib.suppress(TypeError, ValueError):
        moment = email.utils.parsedate_to_datetime(value)
        return max(0.0, min(300.0, (moment - datetime.now(UTC)).total_seconds()))
    return None


def _record(element: ET.Element) -> Record:
    header = element.find(f"{OAI}header")
    if header is None:
        raise HarvestError("a record without a header", "badAnswer")
    identifier = (header.findtext(f"{OAI}identifier") or "").strip()
    datestamp = (header.findtext(f"{OAI}datestamp") or "").strip()
    sets = tuple((s.text or "").strip() for s in header.findall(f"{OAI}setSpec"))
    deleted = header.get("status") == "deleted"
    dc: dict[str, list[str]] = {}
    metadata = element.find(f"{OAI}metadata")
    if metadata is not None and not deleted:
        for container in metadata:  # oai_dc:dc
            for child in container:
                if child.tag.startswith(DC) and child.text and child.text.strip():
                    dc.setdefault(child.tag.removeprefix(DC), []).append(" ".join(child.text.split()))
    return Record(identifier, datestamp, deleted, sets, {k: tuple(v) for k, v in dc.items()})


# -- Dublin Core -> RDSS -------------------------------------------------------------------------
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
    if known is not None and _moment(record.datestamp) < _moment(known.datestamp):
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
        except ValueError:
            return None
    candidate = text if re.search(r"([Zz]|[+-]\d{2}:\d{2})$", text) else text + "Z"
    try:
        return timestamps.format(timestamps.parse(candidate))
    except ValueError:
        return None


def _moment(datestamp: str) -> datetime:
    normalised = _date(datestamp)
    return timestamps.parse(normalised) if normalised else datetime.min.replace(tzinfo=UTC)


def _unique(items: list[Any]) -> list[Any]:
    seen: list[Any] = []
    for item in items:
        if item not in seen:
            seen.append(item)
    return seen


# -- the harvest position ------------------------------------------------------------------------
@dataclass
class HarvestState:
    """Where the harvest is, and what was published per identifier: the state file."""

    base_url: str
    metadata_prefix: str = "oai_dc"
    set_spec: str | None = None
    #: The ``from`` of the harvest in progress (or of the next one); None: from the beginning.
    from_: str | None = None
    #: The resumption token of the next page of the harvest in progress.
    token: str | None = None
    #: The largest datestamp the harvest in progress has seen: the next harvest's ``from``.
    high_water: str | None = None
    harvests: int = 0
    objects: dict[str, Known] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path, base_url: str, metadata_prefix: str, set_spec: str | None) -> HarvestState:
        """The saved state, or a fresh one when there is none.

        Raises:
            ValueError: the file is for another endpoint, prefix or set (start a new file).
        """
        if not path.exists():
            return cls(base_url, metadata_prefix, set_spec)
        data = json.loads(path.read_text())
        state = cls(
            base_url=data["base_url"],
            metadata_prefix=data["metadata_prefix"],
            set_spec=data.get("set_spec"),
            from_=data.get("from"),
            token=data.get("token"),
            high_water=data.get("high_water"),
            harvests=int(data.get("harvests", 0)),
            objects={k: Known(*v) for k, v in data.get("objects", {}).items()},
        )
        if (state.base_url, state.metadata_prefix, state.set_spec) != (base_url, metadata_prefix, set_spec):
            raise ValueError(
                f"{path} holds the harvest of {state.base_url} ({state.metadata_prefix}, set {state.set_spec}): "
                "use another state file for another endpoint"
            )
        return state

    def save(self, path: Path) -> None:
        """Write atomically: a crash leaves the previous state or this one, never half of one."""
        data = {
            "base_url": self.base_url,
            "metadata_prefix": self.metadata_prefix,
            "set_spec": self.set_spec,
            "from": self.from_,
            "token": self.token,
            "high_water": self.high_water,
            "harvests": self.harvests,
            "objects": {k: [v.object_uuid, v.datestamp, v.deleted] for k, v in self.objects.items()},
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(descriptor, "w") as handle:
                json.dump(data, handle, separators=(",", ":"))
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
        directory = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)  # the rename itself survives a power cut
        finally:
            os.close(directory)


@dataclass
class HarvestStats:
    """What one harvest did."""

    pages: int = 0
    records: int = 0
    created: int = 0
    updated: int = 0
    deleted: int = 0
    #: Records already published in this version, or deletions of records never published.
    unchanged: int = 0
    #: Records whose message failed the classifier (logged, not published).
    invalid: int = 0
    #: True when the harvest reached its last page.
    complete: bool = False

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# -- the adaptor ---------------------------------------------------------------------------------
class OaiPmhAdaptor:
    """Harvests one OAI-PMH endpoint into one channel (see the module docstring)."""

    def __init__(
        self,
        client: OaiPmhClient,
        publish: Callable[[list[Message]], object],
        state_file: str | Path,
        *,
        profile: Profile = Profile(),
        metadata_prefix: str = "oai_dc",
        set_spec: str | None = None,
        start_from: str | None = None,
        now: Callable[[], datetime] = timestamps.now,
    ) -> None:
        """
        Args:
            publish: sends a page's messages and returns once the channel has them (e.g.
                ``lambda m: gateway.send_all(m, channel="input")``); raising leaves the page to
                be harvested again.
            start_from: ``from`` of the first harvest when the state file has none.
        """
        self.client = client
        self.publish = publish
        self.state_file = Path(state_file)
        self.profile = profile
        self.now = now
        self.state = HarvestState.load(self.state_file, client.base_url, metadata_prefix, set_spec)
        if self.state.from_ is None and self.state.token is None and start_from:
            self.state.from_ = start_from

    def harvest(self, stop: threading.Event | None = None) -> HarvestStats:
        """One incremental harvest, page by page, each page published then saved.

        Raises:
            HarvestError: the repository failed (after retries); the position is that of the
                last page published.
            Exception: whatever ``publish`` raised; that page is harvested again next time.
        """
        stop = stop or threading.Event()
        stats = HarvestStats()
        state = self.state
        if state.token is not None:
            try:
                page = self.client.list_records(token=state.token)
            except BadResumptionToken:
                _log.warning("the saved resumption token expired: harvesting again from %s", state.from_ or "the start")
                state.token = None
                page = self._first_page()
        else:
            page = self._first_page()
        while True:
            self._publish_page(page, stats)
            state.token = page.token
            if page.token is None:
                state.from_ = state.high_water or state.from_
                state.high_water = None
                state.harvests += 1
                stats.complete = True
            state.save(self.state_file)
            if page.token is None or stop.is_set():
                return stats
            page = self.client.list_records(token=page.token)

    def _first_page(self) -> Page:
        return self.client.list_records(
            metadata_prefix=self.state.metadata_prefix, from_=self.state.from_, set_spec=self.state.set_spec
        )

    def _publish_page(self, page: Page, stats: HarvestStats) -> None:
        state = self.state
        stats.pages += 1
        now = self.now()
        outgoing: list[Message] = []
        published: dict[str, Known] = {}
        high_water = state.high_water
        for record in page.records:
            stats.records += 1
            if high_water is None or _moment(record.datestamp) > _moment(high_water):
                high_water = record.datestamp
            known = published.get(record.identifier) or state.objects.get(record.identifier)
            message = translate(record, known, base_url=state.base_url, profile=self.profile, now=now)
            if message is None:
                stats.unchanged += 1
                continue
            verdict = validate(messages.serialise(message))
            if not verdict.valid:
                stats.invalid += 1
                _log.error(
                    "record %s (%s) not published: %s %s",
                    record.identifier,
                    record.datestamp,
                    verdict.error_code,
                    verdict.error_description,
                )
                continue
            outgoing.append(message)
            message_type = message["messageHeader"]["messageType"]
            if message_type == "MetadataDelete":
                assert known is not None
                published[record.identifier] = Known(known.object_uuid, record.datestamp, deleted=True)
                stats.deleted += 1
            else:
                published[record.identifier] = Known(message["messageBody"]["objectUuid"], record.datestamp)
                stats.created += message_type == "MetadataCreate"
                stats.updated += message_type == "MetadataUpdate"
        if outgoing:
            self.publish(outgoing)
        state.objects.update(published)
        state.high_water = high_water
