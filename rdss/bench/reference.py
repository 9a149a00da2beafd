"""The reference validators: ``jsonschema`` over the *published* RDSS schemas, as the spec's own
tooling would validate a message - Draft4Validator with a FormatChecker for 3.0.2, and for 4.0.0
what the 4.0.0 spec's own validator does: Draft6Validator, a resolver over the schemas' ``$id``s,
a FormatChecker, and the whole-message definition of the message's type.

The published schemas are not part of this project (never copy them in): the benchmark and
the reference-comparison tests read them from where :func:`default_location` (3.0.2) and
:func:`default_location_4` (4.0.0) find them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

#: Published body schema (under body-schemas/) per (messageType, messageClass); None = any class.
_BODIES = {
    ("MetadataCreate", None): "metadata/create/request_schema.json",
    ("MetadataUpdate", None): "metadata/update/request_schema.json",
    ("MetadataDelete", None): "metadata/delete/request_schema.json",
    ("MetadataRead", "Command"): "metadata/read/request_schema.json",
    ("MetadataRead", "Document"): "metadata/read/response_schema.json",
    ("VocabularyRead", "Command"): "vocabulary/read/request_schema.json",
    ("VocabularyRead", "Document"): "vocabulary/read/response_schema.json",
    ("VocabularyPatch", None): "vocabulary/patch/request_schema.json",
}


#: The published data model's directory name: what the search looks for.
DIRECTORY = "rdss-spec-3.0.2"
#: The variable naming the 3.0.2 directory outright.
VARIABLE = "RDSS_REFERENCE_SCHEMAS"
#: The published 4.0.0 specification's directory name, and the variable naming it outright.
DIRECTORY_4 = "rdss-spec-4.0.0"
VARIABLE_4 = "RDSS_REFERENCE_SCHEMAS_4"
#: Virtual file systems a search from the root never enters.
_NOT_FILES = frozenset({"proc", "sys", "dev", "run"})


def candidate_locations(directory: str = DIRECTORY, variable: str = VARIABLE) -> list[Path]:
    """Where to look, in order: ``$variable``; then a directory named ``directory`` within two
    levels below each directory the checkout lies in, nearest first (the published schemas are
    kept beside a project, never in it). Nothing outside that is assumed."""
    candidates = []
    override = os.environ.get(variable)
    if override:
        candidates.append(Path(override))
    for ancestor in Path(__file__).resolve().parents[2].parents:
        candidates += _named_below(ancestor, directory)
    return candidates


def _named_below(directory: Path, name: str, depth: int = 2) -> list[Path]:
    """``directory/name``, and the same in its subdirectories ``depth`` levels down, for those
    that exist (virtual file systems under the root are not entered)."""
    found = [directory / name] if (directory / name).is_dir() else []
    if depth == 0:
        return found
    try:
        children = sorted(p for p in directory.iterdir() if p.is_dir() and p.name != name)
    except OSError:
        return found
    for child in children:
        if directory.parent == directory and child.name in _NOT_FILES:
            continue
        found += _named_below(child, name, depth - 1)
    return found


def default_location() -> Path | None:
    """The first of :func:`candidate_locations` holding the published 3.0.2 schemas, if any."""
    for candidate in candidate_locations():
        if (candidate / "schemas" / "header.json").is_file():
            return candidate
    return None


def candidate_locations_4() -> list[Path]:
    """Where to look for the published 4.0.0 specification (as :func:`candidate_locations`)."""
    return candidate_locations(DIRECTORY_4, VARIABLE_4)


def default_location_4() -> Path | None:
    """The first of :func:`candidate_locations_4` holding the published 4.0.0 schemas, if any."""
    for candidate in candidate_locations_4():
        if (candidate / "schemas" / "message" / "header.json").is_file():
            return candidate
    return None


def reference_validator(location: Path) -> Callable[[bytes], bool]:
    """``payload -> valid?`` with the reference stack: ``json`` and ``jsonschema`` Draft 4.

    Valid means: a JSON object whose messageHeader the published header schema accepts and
    whose messageBody the published body schema of its (messageType, messageClass) accepts. A
    pair without a published body schema (a Read as an Event) cannot be valid.
    """
    import jsonschema
    from referencing.jsonschema import DRAFT4

    documents = list((location / "schemas").glob("*.json")) + list((location / "body-schemas").rglob("*.json"))
    registry = _registry(documents, DRAFT4, "id")
    checker = jsonschema.Draft4Validator.FORMAT_CHECKER

    def compile_schema(path: Path) -> Any:
        return jsonschema.Draft4Validator(json.loads(path.read_text()), registry=registry, format_checker=checker)

    header = compile_schema(location / "body-schemas" / "header_schema.json")
    bodies = {key: compile_schema(location / "body-schemas" / rel) for key, rel in _BODIES.items()}

    def is_valid(payload: bytes) -> bool:
        try:
            message = json.loads(payload)
        except ValueError:
            return False
        if type(message) is not dict or not header.is_valid(message.get("messageHeader")):
            return False
        head = message["messageHeader"]
        body = bodies.get((head["messageType"], head["messageClass"])) or bodies.get((head["messageType"], None))
        return body is not None and "messageBody" in message and bool(body.is_valid(message["messageBody"]))

    return is_valid


def _registry(documents: Iterable[Path], specification: Any, id_key: str) -> Any:
    """A ``referencing`` registry of the published schema ``documents`` (a draft's
    ``specification``), each under its ``id_key`` with and without a trailing ``#`` or ``/``:
    the forms the published schemas' references name each other by."""
    from referencing import Registry

    resources = []
    for path in documents:
        document = json.loads(path.read_text())
        resource = specification.create_resource(document)
        identifier = document[id_key]
        for alias in {identifier, identifier.rstrip("#"), identifier.rstrip("#").rstrip("/")}:
            resources.append((alias, resource))
    return Registry().with_resources(resources)


#: The published 4.0.0 whole-message definition per (messageType, messageClass); None = any class
#: (the spec's own tests judge each type by one definition; only MetadataRead's class chooses).
_MESSAGES_4 = {
    ("MetadataCreate", None): ("message/metadata/create_request.json", "MetadataCreateRequest"),
    ("MetadataUpdate", None): ("message/metadata/update_request.json", "MetadataUpdateRequest"),
    ("MetadataDelete", None): ("message/metadata/delete_request.json", "MetadataDeleteRequest"),
    ("MetadataRead", "Command"): ("message/metadata/read_request.json", "MetadataReadRequest"),
    ("MetadataRead", "Document"): ("message/metadata/read_response.json", "MetadataReadResponse"),
    ("PreservationEvent", None): ("message/preservation/preservation_event_request.json", "PreservationEventRequest"),
}


def reference_validator_4(location: Path) -> Callable[[bytes], bool]:
    """``payload -> valid?`` as the published 4.0.0 validator judges: ``json``, then ``jsonschema``
    Draft 6 with its FormatChecker, every schema file registered under its ``$id``, and the
    message checked whole against ``<$id>/definitions/<Name>`` of its (messageType, messageClass).
    A pair without a definition (a Read as an Event, a Vocabulary type) cannot be valid.
    """
    import jsonschema
    from referencing.jsonschema import DRAFT6

    registry = _registry((location / "schemas").rglob("*.json"), DRAFT6, "$id")
    checker = jsonschema.Draft6Validator.FORMAT_CHECKER

    def compile_definition(relative: str, name: str) -> Any:
        identifier = json.loads((location / "schemas" / relative).read_text())["$id"]
        schema = {"$ref": f"{identifier}/definitions/{name}"}
        return jsonschema.Draft6Validator(schema, registry=registry, format_checker=checker)

    messages = {key: compile_definition(*where) for key, where in _MESSAGES_4.items()}

    def is_valid(payload: bytes) -> bool:
        try:
            message = json.loads(payload)
        except ValueError:
            return False
        head = message.get("messageHeader") if type(message) is dict else None
        if type(head) is not dict:
            return False
        kind, klass = head.get("messageType"), head.get("messageClass")
        if type(kind) is not str or type(klass) is not str:
            return False
        schema = messages.get((kind, klass)) or messages.get((kind, None))
        return schema is not None and bool(schema.is_valid(message))

    return is_valid
