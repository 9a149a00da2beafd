"""The project's JSON Schemas (``schemas/``): located, loaded once, compiled on demand.

Every schema has an ``$id`` under :data:`SCHEMA_BASE`; references between files are relative,
so one in-memory registry resolves them all without any network access.

The set is draft 2020-12 but for one document, :data:`INTEGER` (draft 04): the published
schemas are draft 04, where ``1.0`` is not an integer, and 2020-12 cannot tell ``1.0`` from
``1``. jsonschema-rs judges each document by its own ``$schema``, so every integer refers to
that definition and the valid path pays nothing for the difference.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    import jsonschema_rs

#: The namespace of every ``$id`` in ``schemas/`` (``.example`` is reserved: never fetched).
SCHEMA_BASE = "https://schemas.rdss.example/3.0.2/"

#: Draft of every schema in the set but :data:`INTEGER`.
DIALECT = "https://json-schema.org/draft/2020-12/schema"

#: The integer definition, draft 04 (whose documents name themselves with ``id``).
INTEGER = "model/integer.json"
INTEGER_DIALECT = "http://json-schema.org/draft-04/schema#"

#: Where the uuid type lives: validation errors raised under it are malformed UUIDs (GENERR010).
UUID_LOCATION = SCHEMA_BASE + "model/types.json#/$defs/uuid"

HEADER = "message/header.json#/$defs/header"
PART = "message/part.json"

_COMMAND, _EVENT, _DOCUMENT = "Command", "Event", "Document"
_ANY_CLASS = (_COMMAND, _EVENT, _DOCUMENT)

# Body schema by messageType, then messageClass (ARCHITECTURE.md, "Body schema selection").
# A class missing from a type's row is not supported for that type (GENERR002).
_BODIES: dict[str, dict[str, str]] = {
    "MetadataCreate": dict.fromkeys(_ANY_CLASS, "body/metadata-create.json"),
    "MetadataUpdate": dict.fromkeys(_ANY_CLASS, "body/metadata-update.json"),
    "MetadataDelete": dict.fromkeys(_ANY_CLASS, "body/metadata-delete.json"),
    "MetadataRead": {
        _COMMAND: "body/metadata-read-request.json",
        _DOCUMENT: "body/metadata-read-response.json",
    },
    "VocabularyRead": {
        _COMMAND: "body/vocabulary-read-request.json",
        _DOCUMENT: "body/vocabulary-read-response.json",
    },
    "VocabularyPatch": dict.fromkeys(_ANY_CLASS, "body/vocabulary-patch.json"),
}

#: The message types this system supports, in the spec's order.
MESSAGE_TYPES: tuple[str, ...] = tuple(_BODIES)

#: The message classes of the spec.
MESSAGE_CLASSES: tuple[str, ...] = _ANY_CLASS


def classes_for(message_type: str) -> tuple[str, ...]:
    """The message classes ``message_type`` can travel as."""
    return tuple(_BODIES.get(message_type, ()))


def body_schema(message_type: str, message_class: str) -> str | None:
    """The body schema (path under ``schemas/``) for a type and class, or None if unsupported."""
    return _BODIES.get(message_type, {}).get(message_class)


def schemas_dir() -> Path:
    """The directory holding the schema set.

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


@functools.cache
def documents() -> Mapping[str, dict[str, Any]]:
    """Every schema document, keyed by its path under ``schemas/`` (e.g. ``model/types.json``)."""
    root = schemas_dir()
    docs: dict[str, dict[str, Any]] = {}
    for path in sorted(root.rglob("*.json")):
        relative = path.relative_to(root).as_posix()
        doc = orjson.loads(path.read_bytes())
        expected = SCHEMA_BASE + relative
        keyword = "id" if doc.get("$schema") == INTEGER_DIALECT else "$id"
        if doc.get(keyword) != expected:
            raise ValueError(f"{path}: {keyword} must be {expected!r}, found {doc.get(keyword)!r}")
        docs[relative] = doc
    return docs


@functools.cache
def registry() -> jsonschema_rs.Registry:
    """A registry holding every document of the set under its ``$id``."""
    # jsonschema-rs (a native module) loads with the first validator compiled, not at import:
    # a Lambda that never classifies (the sweep) or has not yet met a payload does not pay for it
    import jsonschema_rs

    return jsonschema_rs.Registry([(SCHEMA_BASE + relative, doc) for relative, doc in documents().items()])


def uri(reference: str) -> str:
    """The absolute URI of ``reference`` (a path under ``schemas/``, optionally with a fragment)."""
    return reference if "://" in reference else SCHEMA_BASE + reference


@functools.cache
def validator(reference: str) -> jsonschema_rs.Validator:
    """A compiled validator for one schema (``body/metadata-create.json``, ``HEADER``...)."""
    return _compile({"$ref": uri(reference)})


def message_schema(message_type: str, message_class: str, part: bool) -> dict[str, Any] | None:
    """The schema of a whole message of this type and class (header and body), or None when
    the pair is not supported. Parts carry a string fragment as their body, whatever their type.
    """
    body = body_schema(message_type, message_class)
    if body is None:
        return None
    return {"$ref": uri(PART)} if part else _whole_message_schema(body)


def _whole_message_schema(body: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "messageHeader": {"$ref": uri(HEADER)},
            "messageBody": {"$ref": uri(body)},
        },
        "required": ["messageHeader", "messageBody"],
        "additionalProperties": False,
    }


def message_validator(message_type: str, message_class: str, part: bool) -> jsonschema_rs.Validator | None:
    """A compiled validator for a whole message of this type and class (see :func:`message_schema`).

    Compiled once per distinct schema: the classes sharing a body schema share one validator,
    and every part shares the part validator.
    """
    body = body_schema(message_type, message_class)
    if body is None:
        return None
    return validator(PART) if part else _whole_message_validator(body)


@functools.cache
def _whole_message_validator(body: str) -> jsonschema_rs.Validator:
    return _compile(_whole_message_schema(body))


def _compile(schema: dict[str, Any]) -> jsonschema_rs.Validator:
    import jsonschema_rs  # see registry()

    return jsonschema_rs.Draft202012Validator(
        {"$schema": DIALECT, **schema}, registry=registry(), validate_formats=True
    )


def enumeration_names(name: str) -> tuple[str, ...]:
    """The names of an integer-coded enumeration, in code order (code 1 first)."""
    definition = documents()["model/enumerations.json"]["$defs"][name]
    return tuple(definition.get("x-rdss-names") or definition["enum"])
