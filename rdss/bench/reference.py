"""The reference validator: ``jsonschema``'s Draft4Validator with a FormatChecker over the
*published* RDSS 3.0.2 schemas, as the spec's own tooling would validate a message.

The published schemas are not part of this project (never copy them in): the benchmark and
the reference-comparison test read them from where :func:`default_location` finds them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
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
#: Virtual file systems a search from the root never enters.
_NOT_FILES = frozenset({"proc", "sys", "dev", "run"})


def candidate_locations() -> list[Path]:
    """Where to look, in order: $RDSS_REFERENCE_SCHEMAS; then a directory named :data:`DIRECTORY`
    within two levels below each directory the checkout lies in, nearest first (the published
    schemas are kept beside a project, never in it). Nothing outside that is assumed."""
    candidates = []
    override = os.environ.get("RDSS_REFERENCE_SCHEMAS")
    if override:
        candidates.append(Path(override))
    for ancestor in Path(__file__).resolve().parents[2].parents:
        candidates += _named_below(ancestor)
    return candidates


def _named_below(directory: Path, depth: int = 2) -> list[Path]:
    """``directory/DIRECTORY``, and the same in its subdirectories ``depth`` levels down, for
    those that exist (virtual file systems under the root are not entered)."""
    found = [directory / DIRECTORY] if (directory / DIRECTORY).is_dir() else []
    if depth == 0:
        return found
    try:
        children = sorted(p for p in directory.iterdir() if p.is_dir() and p.name != DIRECTORY)
    except OSError:
        return found
    for child in children:
        if directory.parent == directory and child.name in _NOT_FILES:
            continue
        found += _named_below(child, depth - 1)
    return found


def default_location() -> Path | None:
    """The first of :func:`candidate_locations` holding the published schemas, if any."""
    for candidate in candidate_locations():
        if (candidate / "schemas" / "header.json").is_file():
            return candidate
    return None


def reference_validator(location: Path) -> Callable[[bytes], bool]:
    """``payload -> valid?`` with the reference stack: ``json`` and ``jsonschema`` Draft 4.

    Valid means: a JSON object whose messageHeader the published header schema accepts and
    whose messageBody the published body schema of its (messageType, messageClass) accepts. A
    pair without a published body schema (a Read as an Event) cannot be valid.
    """
    import jsonschema
    from referencing import Registry
    from referencing.jsonschema import DRAFT4

    resources = []
    documents = list((location / "schemas").glob("*.json")) + list((location / "body-schemas").rglob("*.json"))
    for path in documents:
        document = json.loads(path.read_text())
        resource = DRAFT4.create_resource(document)
        identifier = document["id"]
        for alias in {identifier, identifier.rstrip("#"), identifier.rstrip("#").rstrip("/")}:
            resources.append((alias, resource))
    registry = Registry().with_resources(resources)
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
