"""Realistic RDSS traffic, generated deterministically from a seed.

Benchmarks, the demo and tests need messages that look like what repositories really send:
research objects with abstracts, several people and files, identifiers and dates, plus the
small Delete, Read and Vocabulary messages around them. Every message generated here is
valid; tests derive invalid ones from them.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from rdss.model import messages, timestamps
from rdss.model.messages import Message

#: The Metadata kinds and their weights, the same in both versions' mixes.
_METADATA_MIX: tuple[tuple[str, str, int], ...] = (
    ("MetadataCreate", "Event", 40),
    ("MetadataUpdate", "Event", 25),
    ("MetadataDelete", "Event", 5),
    ("MetadataRead", "Command", 8),
    ("MetadataRead", "Document", 7),
)
#: (messageType, messageClass, weight): the share of each kind in :func:`mix`.
MIX: tuple[tuple[str, str, int], ...] = (
    *_METADATA_MIX,
    ("VocabularyRead", "Command", 5),
    ("VocabularyRead", "Document", 5),
    ("VocabularyPatch", "Event", 5),
)

_WORDS = [
    "climate",
    "ocean",
    "sediment",
    "protein",
    "lattice",
    "cohort",
    "survey",
    "archive",
    "corpus",
    "genome",
    "isotope",
    "glacier",
    "microbial",
    "neural",
    "catalyst",
    "polymer",
    "mortality",
    "rainfall",
    "census",
    "dialect",
    "manuscript",
    "spectra",
    "turbulence",
    "enzyme",
    "aquifer",
    "migration",
    "harvest",
    "textile",
    "lexicon",
    "reactor",
    "estuary",
    "fossil",
]
_PROSE = (
    "This dataset accompanies a study of {a} and {b} across {n} sites. Measurements were taken "
    "over {y} years using calibrated instruments; raw files, processing scripts and derived tables "
    "are included. Values are reported in SI units with uncertainties at one standard deviation. "
    "Sampling followed the protocol described in the accompanying article, and quality control "
    "removed {q} per cent of observations flagged as instrument faults. Readers should consult the "
    "README for the variable dictionary, the coordinate reference system and known limitations. "
)
_GIVEN = ["Ada", "Alan", "Grace", "Rosalind", "Dorothy", "Tim", "Mary", "Chidi", "Siân", "Zoë", "Łukasz", "Mei"]
_FAMILY = ["Lovelace", "Turing", "Hopper", "Franklin", "Hodgkin", "Berners-Lee", "Somerville", "Okafor", "Jones"]
_INSTITUTIONS = [
    ("University of Northshire", "Department of Earth Sciences"),
    ("Royal College of Data", "School of Computing"),
    ("Institute of Marine Studies", "Ocean Observation Unit"),
    ("University of the Fens", "Library and Research Services"),
]
_FORMATS = [("csv", "text/csv"), ("nc", "application/x-netcdf"), ("zip", "application/zip"), ("pdf", "application/pdf")]
_BASE_TIME = datetime(2026, 11, 1, tzinfo=UTC)


class Workload:
    """A deterministic source of valid messages (same seed, same messages, fresh UUIDs aside).

    UUIDs come from the seeded generator too, so a seed reproduces messages exactly.
    """

    #: (messageType, messageClass, weight) of the traffic :meth:`stream` draws.
    proportions: tuple[tuple[str, str, int], ...] = MIX

    def __init__(
        self,
        seed: int = 0,
        *,
        generator: str = "rdss-workload-1.0.0",
        base_time: datetime = _BASE_TIME,
        spread: timedelta = timedelta(hours=1),
    ) -> None:
        """
        Args:
            base_time: messages are published within ``spread`` before it (and dated within
                the month before it); fixed by default so a seed reproduces messages exactly.
        """
        self.rng = random.Random(seed)
        self.generator = generator
        self.base_time = base_time
        self.spread = spread.total_seconds()

    # -- identifiers and values ---------------------------------------------------------------
    def uuid(self) -> str:
        """A seeded UUID version 4."""
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def timestamp(self, days: float = 30.0) -> str:
        """A timestamp within ``days`` before the workload's base time."""
        moment = self.base_time - timedelta(seconds=self.rng.uniform(0, days * 86400))
        return timestamps.format(moment)

    def _orcid(self) -> str:
        digits = [self.rng.randint(0, 9999) for _ in range(3)]
        return "0000-{:04d}-{:04d}-{:04d}".format(*digits)

    def _words(self, count: int) -> str:
        return " ".join(self.rng.choice(_WORDS) for _ in range(count))

    # -- data model ----------------------------------------------------------------------------
    def organisation(self) -> dict[str, Any]:
        name, _ = self.rng.choice(_INSTITUTIONS)
        return {
            "organisationJiscId": self.rng.randint(1, 9999),
            "organisationName": name,
            "organisationType": 8,  # higherEducation
            "organisationAddress": f"{self.rng.randint(1, 200)} College Road, {name.split()[-1]}",
        }

    def person_role(self) -> dict[str, Any]:
        given, family = self.rng.choice(_GIVEN), self.rng.choice(_FAMILY)
        institution, unit = self.rng.choice(_INSTITUTIONS)
        return {
            "person": {
                "personUuid": self.uuid(),
                "personIdentifier": [
                    {
                        "personIdentifierValue": self._orcid(),
                        "personIdentifierType": 1,  # ORCID
                    }
                ],
                "personGivenNames": given,
                "personFamilyNames": family,
                "personMail": f"{_ascii(given)[:1]}.{_ascii(family)}@example.ac.uk",
                "personOrganisationUnit": {
                    "organisationUnitUuid": self.uuid(),
                    "organisationUnitName": unit,
                    "organisation": {**self.organisation(), "organisationName": institution},
                },
            },
            "role": self.rng.choice([5, 8, 14, 20, 21]),
        }

    def file(self, index: int) -> dict[str, Any]:
        extension, _mime = self.rng.choice(_FORMATS)
        name = f"{self._words(2).replace(' ', '_')}_{index:02d}.{extension}"
        return {
            "fileUuid": self.uuid(),
            "fileIdentifier": f"file-{self.rng.getrandbits(32):08x}",
            "fileName": name,
            "fileSize": self.rng.randint(1_000, 5_000_000_000),
            "fileChecksum": [
                {"checksumUuid": self.uuid(), "checksumType": 1, "checksumValue": f"{self.rng.getrandbits(128):032x}"}
            ],
            "fileCompositionLevel": "0",
            "fileDateModified": [self.timestamp()],
            "fileUse": 1,
            "filePreservationEvent": [{"preservationEventValue": "ingest", "preservationEventType": 11}],
            "fileUploadStatus": 2,
            "fileStorageStatus": 1,
            "fileStorageLocation": f"https://repository.example.ac.uk/files/{self.uuid()}/{name}",
            "fileStoragePlatform": {
                "storagePlatformUuid": self.uuid(),
                "storagePlatformName": "Institutional S3",
                "storagePlatformType": 1,
                "storagePlatformCost": "standard",
            },
        }

    def research_object(self, *, people: int | None = None, files: int | None = None) -> dict[str, Any]:
        """A research object as a repository deposits it: abstract, people, files, identifiers."""
        people = self.rng.randint(1, 3) if people is None else people
        files = self.rng.randint(0, 4) if files is None else files
        a, b = self.rng.sample(_WORDS, 2)
        abstract = "".join(
            _PROSE.format(a=a, b=b, n=self.rng.randint(3, 90), y=self.rng.randint(1, 30), q=self.rng.randint(1, 9))
            for _ in range(self.rng.randint(1, 2))
        ).strip()
        body: dict[str, Any] = {
            "objectUuid": self.uuid(),
            "objectTitle": f"{a.capitalize()} and {b} observations, {self.rng.randint(1990, 2026)}",
            "objectPersonRole": [self.person_role() for _ in range(max(1, people))],
            "objectDescription": abstract,
            "objectRights": {
                "rightsStatement": ["Copyright the authors"],
                "licence": [{"licenceName": "Creative Commons Attribution 4.0", "licenceIdentifier": "CC-BY-4.0"}],
                "access": [{"accessType": 1, "accessStatement": "Open access"}],
            },
            "objectDate": [{"dateValue": self.timestamp(), "dateType": 7}],
            "objectKeywords": sorted({a, b, *self.rng.sample(_WORDS, 3)}),
            "objectResourceType": 7,  # dataset
            "objectValue": 1,
            "objectIdentifier": [
                {
                    "identifierValue": f"10.{self.rng.randint(1000, 9999)}/rdss.{self.rng.getrandbits(24):06x}",
                    "identifierType": 4,
                }
            ],
            "objectOrganisationRole": [{"organisation": self.organisation(), "role": 2}],
        }
        if files:
            body["objectFile"] = [self.file(i) for i in range(files)]
        return body

    def vocabulary(self) -> dict[str, Any]:
        terms = sorted({self._words(self.rng.randint(1, 2)) for _ in range(self.rng.randint(5, 40))})
        return {"vocabularyId": self.rng.randint(1, 50), "vocabularyTerms": terms}

    # -- messages ------------------------------------------------------------------------------
    def message(self, message_type: str, message_class: str, *, correlation_id: str | None = None) -> Message:
        """A valid message of the given type and class."""
        body: Any
        if message_type in ("MetadataCreate", "MetadataUpdate") or (
            message_type == "MetadataRead" and message_class == "Document"
        ):
            body = self.research_object()
        elif message_type in ("MetadataDelete", "MetadataRead"):
            body = {"objectUuid": self.uuid()}
        elif message_type == "VocabularyRead":
            vocabulary = self.vocabulary()
            body = vocabulary if message_class == "Document" else {"vocabularyId": vocabulary["vocabularyId"]}
        elif message_type == "VocabularyPatch":
            vocabulary = self.vocabulary()
            body = {
                "vocabularyId": vocabulary["vocabularyId"],
                "vocabularyName": self._words(2).title(),
                "vocabularyTerms": vocabulary["vocabularyTerms"],
            }
        else:
            raise ValueError(f"unknown message type {message_type!r}")
        reads = message_type in ("MetadataRead", "VocabularyRead")
        if reads and message_class == "Document" and correlation_id is None:
            correlation_id = self.uuid()
        message = messages.new_message(
            message_type,
            body,
            message_class=message_class,
            generator=self.generator,
            correlation_id=correlation_id,
            return_address="responses" if reads and message_class == "Command" else None,
            now=self.base_time - timedelta(seconds=self.rng.uniform(0, self.spread)),
        )
        header = message["messageHeader"]
        header["messageId"] = self.uuid()
        header["messageSequence"]["sequence"] = self.uuid()
        return message

    def mix(self, count: int) -> list[Message]:
        """``count`` valid messages in the class's :attr:`proportions` (:data:`MIX`; 4.0.0's :data:`MIX_4`)."""
        return list(self.stream(count))

    def stream(self, count: int) -> Iterator[Message]:
        """``count`` valid messages, drawn one by one in the class's :attr:`proportions`."""
        kinds = [(t, c) for t, c, _ in self.proportions]
        weights = [w for _, _, w in self.proportions]
        for _ in range(count):
            message_type, message_class = self.rng.choices(kinds, weights)[0]
            yield self.message(message_type, message_class)

    def large(self, target_bytes: int) -> Message:
        """A MetadataCreate at least ``target_bytes`` serialised: a deposit with many files."""
        message = self.message("MetadataCreate", "Event")
        body = message["messageBody"]
        files = body.setdefault("objectFile", [])
        while len(messages.serialise(message)) < target_bytes:
            files.extend(self.file(len(files) + i) for i in range(50))
        return message


#: (messageType, messageClass, weight) of 4.0.0 traffic (:meth:`Workload4.mix`): the 3.0.2 mix
#: with the Vocabulary types, gone in 4.0.0, replaced by the preservation events that came in.
MIX_4: tuple[tuple[str, str, int], ...] = (*_METADATA_MIX, ("PreservationEvent", "Event", 15))

#: 3.0.2's integer codes the generator above writes, by name, as 4.0.0 writes them.
_PERSON_ROLES_4 = {5: "dataCollector", 8: "depositingUser", 14: "projectMember", 20: "rightsHolder", 21: "sponsor"}


class Workload4(Workload):
    """The same traffic in Message API 4.0.0: string enumerations, ``...UUID`` identifiers, a
    description list, ``objectKeyword``, ``tenantJiscID``; PreservationEvent in place of the
    Vocabulary types. Every message generated is a valid 4.0.0 message."""

    proportions = MIX_4
    #: The tenant every generated message belongs to.
    tenant = 1

    def organisation(self) -> dict[str, Any]:
        # 3.0.2's organisation, drawn alike, with 4.0.0's string for its integer type
        return {**super().organisation(), "organisationType": "higherEducation"}

    def person_role(self) -> dict[str, Any]:
        # 3.0.2's, drawn alike, in 4.0.0's spelling, with 4.0.0's names for its codes
        role = _v4_members(super().person_role())
        person = role["person"]
        person["personIdentifier"] = [{**i, "personIdentifierType": "ORCID"} for i in person["personIdentifier"]]
        return {**role, "role": _PERSON_ROLES_4[role["role"]]}

    def file(self, index: int) -> dict[str, Any]:
        # 3.0.2's, drawn alike, in 4.0.0's spelling, with 4.0.0's names for its codes (and one
        # preservation event, a string)
        file = _v4_members(super().file(index))
        return {
            **file,
            "fileChecksum": [{**checksum, "checksumType": "md5"} for checksum in file["fileChecksum"]],
            "fileUse": "originalFile",
            "filePreservationEvent": "ingest",
            "fileUploadStatus": "uploadComplete",
            "fileStorageStatus": "online",
            "fileStoragePlatform": {**file["fileStoragePlatform"], "storagePlatformType": "S3"},
        }

    def research_object(self, *, people: int | None = None, files: int | None = None) -> dict[str, Any]:
        body = super().research_object(people=people, files=files)
        return {
            "objectUUID": body["objectUuid"],
            "objectTitle": body["objectTitle"],
            "objectPersonRole": body["objectPersonRole"],
            "objectDescription": [{"descriptionValue": body["objectDescription"], "descriptionType": "abstract"}],
            "objectRights": {
                **body["objectRights"],
                "access": [{"accessType": "open", "accessStatement": "Open access"}],
            },
            "objectDate": [{"dateValue": body["objectDate"][0]["dateValue"], "dateType": "published"}],
            "objectKeyword": body["objectKeywords"],
            "objectResourceType": "dataset",
            "objectValue": "normal",
            "objectIdentifier": [{**body["objectIdentifier"][0], "identifierType": "DOI"}],
            "objectOrganisationRole": [{"organisation": self.organisation(), "role": "hostingInstitution"}],
            **({"objectFile": body["objectFile"]} if "objectFile" in body else {}),
        }

    def information_package(self) -> dict[str, Any]:
        return {
            "objectUUID": self.uuid(),
            "packageUUID": self.uuid(),
            "packageType": self.rng.choice(["AIP", "DIP", "SIP"]),
            "packageContainerType": "zip",
            "packageDescription": f"Package of {self._words(3)}",
            "packagePreservationEvent": {
                "preservationEventValue": "ingested",
                "preservationEventType": self.rng.choice(["ingestion", "fixityCheck", "virusCheck", "replication"]),
                "preservationEventDetail": f"{self.rng.randint(1, 400)} files, checksums verified",
            },
        }

    def message(self, message_type: str, message_class: str, *, correlation_id: str | None = None) -> Message:
        """A valid 4.0.0 message of the given type and class."""
        if message_type.startswith("Vocabulary"):
            raise ValueError(f"{message_type} has no form in 4.0.0")
        if message_type == "PreservationEvent":
            message = super().message("MetadataDelete", message_class)
            message["messageHeader"]["messageType"] = message_type
            message["messageBody"] = self.information_package()
        else:
            message = super().message(message_type, message_class, correlation_id=correlation_id)
            if "objectUuid" in message["messageBody"]:  # a Delete's, a Read request's
                message["messageBody"] = {"objectUUID": message["messageBody"]["objectUuid"]}
        header = message["messageHeader"]
        header["version"] = "4.0.0"
        header["tenantJiscID"] = self.tenant
        return message


def _ascii(name: str) -> str:
    """A name as the ASCII local part of an e-mail address (RFC 5322 allows no other)."""
    import unicodedata

    folded = unicodedata.normalize("NFKD", name.replace("Ł", "L").replace("ł", "l"))
    return "".join(ch for ch in folded.lower() if (ch.isascii() and ch.isalnum()) or ch == "-")


def _v4_members(value: Any) -> Any:
    """``value`` with every ``...Uuid`` member spelt as 4.0.0 spells it, ``...UUID``."""
    if isinstance(value, list):
        return [_v4_members(item) for item in value]
    if isinstance(value, dict):
        return {(name[:-4] + "UUID" if name.endswith("Uuid") else name): _v4_members(v) for name, v in value.items()}
    return value
