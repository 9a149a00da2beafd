"""The reference validator: ``jsonschema``'s Draft4Validator with a FormatChecker over the
*published* RDSS 3.0.2 schemas, as the spec's own tooling would validate a message.

The published schemas are not part of this project; the benchmark reads them from
``../shared/rdss-spec-3.0.2`` (or ``--reference-schemas``).
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


def default_location() -> Path | None:
    """Where the published schemas are, if anywhere: RDSS_REFERENCE_SCHEMAS or ../shared."""
    candidates = [os.environ.get("RDSS_REFERENCE_SCHEMAS", "")]
    root = Path(__file__).resolve().parents[2]
    candidates.append(str(root.parent / "shared" / "rdss-spec-3.0.2"))
    for candidate in candidates:
        if candidate and (Path(candidate) / "schemas" / "header.json").is_file():
            return Path(candidate)
    return None


def reference_validator(location: Path) -> Callable[[bytes], bool]:
    """``payload -> valid?`` with the reference stack: ``json`` and ``jsonschema`` Draft 4."""
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
        message = json.loads(payload)
        head = message["messageHeader"]
        body = bodies.get((head["messageType"], head["messageClass"])) or bodies[(head["messageType"], None)]
        return bool(header.is_valid(head) and body.is_valid(message["messageBody"]))

    return is_valid
