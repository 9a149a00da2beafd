"""The project's JSON Schemas (``schemas/``): located, loaded once, compiled on demand.

``schemas/`` holds one set per version of the Message API the system speaks: 3.0.2 at its top
(``model/``, ``body/``, ``message/``: the paths the package, the Lambda assets and the tests have
always used) and 4.0.0 in ``schemas/4.0.0/`` with the same layout. A message is judged by the
set of the version its header declares (:func:`for_version`: MAJOR 4 is 4.0.0, anything else
3.0.2, as before 4.0.0 was spoken).

Every schema of a set has an ``$id`` under its :attr:`SchemaSet.base`; references between files
are relative, so one in-memory registry per set resolves them all without any network access.

Both sets are draft 2020-12 but for one document of 3.0.2, :data:`INTEGER` (draft 04): the
published 3.0.2 schemas are draft 04, where ``1.0`` is not an integer, and 2020-12 cannot tell
``1.0`` from ``1``. jsonschema-rs judges each document by its own ``$schema``, so every 3.0.2
integer refers to that definition and the valid path pays nothing for the difference. The
published 4.0.0 schemas are draft 06, which counts ``1.0`` as an integer as 2020-12 does, so
the 4.0.0 set needs no such document.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    import jsonschema_rs

#: Draft of every schema in the sets but :data:`INTEGER`.
DIALECT = "https://json-schema.org/draft/2020-12/schema"

#: The integer definition of 3.0.2, draft 04 (whose documents name themselves with ``id``).
INTEGER = "model/integer.json"
INTEGER_DIALECT = "http://json-schema.org/draft-04/schema#"

#: Within a set: the header definition, the schema of a sequence part, the uuid type (errors
#: raised under it are malformed UUIDs, GENERR010).
HEADER = "message/header.json#/$defs/header"
PART = "message/part.json"
UUID = "model/types.json#/$defs/uuid"

_COMMAND, _EVENT, _DOCUMENT = "Command", "Event", "Document"
_ANY_CLASS = (_COMMAND, _EVENT, _DOCUMENT)

#: The message classes of the spec (the same in every version).
MESSAGE_CLASSES: tuple[str, ...] = _ANY_CLASS


@dataclass(frozen=True, eq=False)
class SchemaSet:
    """The schemas of one version of the Message API, and which body schema each message takes.

    Compiled validators are cached per set (the set is hashed by identity: there is one of each).
    """

    #: The version the set implements (what a Verdict reports it was judged against).
    version: str
    #: Where the set lies under ``schemas/`` ("" for 3.0.2, which is ``schemas/`` itself).
    directory: str
    #: Body schema by messageType, then messageClass; a class missing from a type's row is not
    #: supported for that type (GENERR002).
    bodies: Mapping[str, Mapping[str, str]] = field(repr=False)

    @property
    def base(self) -> str:
        """The namespace of every ``$id`` of the set (``.example`` is reserved: never fetched)."""
        return f"https://schemas.rdss.example/{self.version}/"

    @property
    def message_types(self) -> tuple[str, ...]:
        """The message types of this version, in the spec's order."""
        return tuple(self.bodies)

    def classes_for(self, message_type: str) -> tuple[str, ...]:
        """The message classes ``message_type`` can travel as."""
        return tuple(self.bodies.get(message_type, ()))

    def body_schema(self, message_type: str, message_class: str) -> str | None:
        """The body schema (path within the set) for a type and class, or None if unsupported."""
        return self.bodies.get(message_type, {}).get(message_class)

    def uri(self, reference: str) -> str:
        """The absolute URI of ``reference`` (a path within the set, optionally with a fragment)."""
        return reference if "://" in reference else self.base + reference

    def root(self) -> Path:
        """The directory holding the set."""
        return schemas_dir() / self.directory if self.directory else schemas_dir()

    @functools.cache  # noqa: B019 - one instance per version, kept for the process's life anyway
    def documents(self) -> Mapping[str, dict[str, Any]]:
        """Every schema document of the set, keyed by its path within the set (``model/types.json``)."""
        root = self.root()
        nested = {s.directory for s in SETS if s.directory and s is not self}
        docs: dict[str, dict[str, Any]] = {}
        for path in sorted(root.rglob("*.json")):
            relative = path.relative_to(root).as_posix()
            if relative.split("/", 1)[0] in nested:  # another version's set, inside this one's directory
                continue
            doc = orjson.loads(path.read_bytes())
            expected = self.base + relative
            keyword = "id" if doc.get("$schema") == INTEGER_DIALECT else "$id"
            if doc.get(keyword) != expected:
                raise ValueError(f"{path}: {keyword} must be {expected!r}, found {doc.get(keyword)!r}")
            docs[relative] = doc
        return docs

    @functools.cache  # noqa: B019
    def registry(self) -> jsonschema_rs.Registry:
        """A registry holding every document of the set under its ``$id``."""
        # jsonschema-rs (a native module) loads with the first validator compiled, not at import:
        # a Lambda that never classifies (the sweep) or has not yet met a payload does not pay for it
        import jsonschema_rs

        return jsonschema_rs.Registry([(self.base + relative, doc) for relative, doc in self.documents().items()])

    @functools.cache  # noqa: B019
    def validator(self, reference: str) -> jsonschema_rs.Validator:
        """A compiled validator for one schema of the set (``body/metadata-create.json``, ``HEADER``...)."""
        return self._compile({"$ref": self.uri(reference)})

    def message_schema(self, message_type: str, message_class: str, part: bool) -> dict[str, Any] | None:
        """The schema of a whole message of this type and class (header and body), or None when
        the pair is not supported. Parts carry a string fragment as their body, whatever their type.
        """
        body = self.body_schema(message_type, message_class)
        if body is None:
            return None
        return {"$ref": self.uri(PART)} if part else self._whole_message_schema(body)

    def _whole_message_schema(self, body: str) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {
                "messageHeader": {"$ref": self.uri(HEADER)},
                "messageBody": {"$ref": self.uri(body)},
            },
            "required": ["messageHeader", "messageBody"],
            "additionalProperties": False,
        }

    def message_validator(self, message_type: str, message_class: str, part: bool) -> jsonschema_rs.Validator | None:
        """A compiled validator for a whole message of this type and class (see :meth:`message_schema`).

        Compiled once per distinct schema: the classes sharing a body schema share one validator,
        and every part shares the part validator.
        """
        body = self.body_schema(message_type, message_class)
        if body is None:
            return None
        return self.validator(PART) if part else self._whole_message_validator(body)

    @functools.cache  # noqa: B019
    def _whole_message_validator(self, body: str) -> jsonschema_rs.Validator:
        return self._compile(self._whole_message_schema(body))

    def _compile(self, schema: dict[str, Any]) -> jsonschema_rs.Validator:
        import jsonschema_rs  # see registry()

        return jsonschema_rs.Draft202012Validator(
            {"$schema": DIALECT, **schema}, registry=self.registry(), validate_formats=True
        )


#: The Metadata types' bodies, the same paths (each in its own set) in 3.0.2 and 4.0.0: in 4.0.0
#: a whole-message schema per type as published, a MetadataRead request or response by its
#: class; as in the published schemas, only MetadataRead's class chooses its body.
_METADATA_BODIES: Mapping[str, Mapping[str, str]] = {
    "MetadataCreate": dict.fromkeys(_ANY_CLASS, "body/metadata-create.json"),
    "MetadataUpdate": dict.fromkeys(_ANY_CLASS, "body/metadata-update.json"),
    "MetadataDelete": dict.fromkeys(_ANY_CLASS, "body/metadata-delete.json"),
    "MetadataRead": {
        _COMMAND: "body/metadata-read-request.json",
        _DOCUMENT: "body/metadata-read-response.json",
    },
}

#: The Message API 3.0.2 (ARCHITECTURE.md, "Body schema selection").
V3 = SchemaSet(
    "3.0.2",
    "",
    {
        **_METADATA_BODIES,
        "VocabularyRead": {
            _COMMAND: "body/vocabulary-read-request.json",
            _DOCUMENT: "body/vocabulary-read-response.json",
        },
        "VocabularyPatch": dict.fromkeys(_ANY_CLASS, "body/vocabulary-patch.json"),
    },
)

#: The Message API 4.0.0: the Vocabulary types are gone, PreservationEvent is new.
V4 = SchemaSet(
    "4.0.0",
    "4.0.0",
    {
        **_METADATA_BODIES,
        "PreservationEvent": dict.fromkeys(_ANY_CLASS, "body/preservation-event.json"),
    },
)

#: Every set, oldest first.
SETS: tuple[SchemaSet, ...] = (V3, V4)

#: The versions spoken, as a Verdict names them.
VERSIONS: tuple[str, ...] = tuple(s.version for s in SETS)

#: Every message type some version speaks (3.0.2's, then those 4.0.0 brought): what a part
#: carrying messages of every version names them by - RabbitMQ's queues and bindings, the Glue
#: jobs' partitions - so that no valid message of a version is dropped or filed as unknown.
SPOKEN_TYPES: tuple[str, ...] = tuple(dict.fromkeys(t for spoken in SETS for t in spoken.message_types))


def spoken_classes(message_type: str) -> tuple[str, ...]:
    """The message classes ``message_type`` can travel as in any version spoken."""
    return tuple(c for c in MESSAGE_CLASSES if any(c in s.classes_for(message_type) for s in SETS))


def for_version(version: Any) -> SchemaSet:
    """The set that judges a message declaring ``version`` (its header's ``version``): 4.0.0 for
    MAJOR 4 (SemVer: MAJOR versions are not compatible), else 3.0.2 - every version the system
    judged before it spoke 4.0.0, so no verdict of those changes."""
    return V4 if type(version) is str and version[:2] == "4." else V3


def for_name(version: str) -> SchemaSet:
    """The set of exactly ``version`` (``"3.0.2"``, ``"4.0.0"``).

    Raises:
        ValueError: not a version the system speaks.
    """
    for spoken in SETS:
        if spoken.version == version:
            return spoken
    raise ValueError(f"version {version!r} is not spoken here; one of {', '.join(VERSIONS)}")


# -- 3.0.2, as the names have always been ------------------------------------------------------

#: The namespace of every ``$id`` of the 3.0.2 set.
SCHEMA_BASE = V3.base

#: Where the 3.0.2 uuid type lives.
UUID_LOCATION = SCHEMA_BASE + UUID

#: The 3.0.2 message types, in the spec's order.
MESSAGE_TYPES: tuple[str, ...] = V3.message_types

classes_for = V3.classes_for
body_schema = V3.body_schema
uri = V3.uri
documents = V3.documents
registry = V3.registry
validator = V3.validator
message_schema = V3.message_schema
message_validator = V3.message_validator


def schemas_dir() -> Path:
    """The directory holding the schema sets.

    ``RDSS_SCHEMAS_DIR`` wins; then a copy packaged inside ``rdss`` (wheels, Lambda assets
    built from a wheel); then ``schemas/`` beside the package (a checkout or a Lambda asset).
    """
    override = os.environ.get("RDSS_SCHEMAS_DIR")
    if override:
        return Path(override)
    here = Path(__file__).resolve().parents[1]  # rdss/, this module being in rdss/model or rdss/deployment
    for candidate in (here / "_schemas", here.parent / "schemas"):
        if (candidate / "message" / "header.json").is_file():
            return candidate
    raise FileNotFoundError(f"RDSS schemas not found beside {here}; set RDSS_SCHEMAS_DIR to the schemas/ directory")


def enumeration_names(name: str) -> tuple[str, ...]:
    """The names of a 3.0.2 integer-coded enumeration, in code order (code 1 first)."""
    definition = documents()["model/enumerations.json"]["$defs"][name]
    return tuple(definition.get("x-rdss-names") or definition["enum"])
