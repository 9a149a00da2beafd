"""Mutations that each break one rule of the schemas, found by walking a valid message
alongside the schema that governs it.

For every keyword the walk meets (type, required, additionalProperties, minItems, uniqueItems,
minLength, pattern, format, minimum, maximum, enum, anyOf) at a place where the instance has a
value, it yields a copy of the message with that one rule broken, and the error code the
classifier must give it. An integer is also written with a fraction (``1.0``): draft 04, the
published schemas' draft, counts that as a number but not an integer.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urldefrag, urljoin

from rdss.model import schemas

_WRONG_TYPE = {
    "string": 12345,
    "integer": "1",
    "number": "1.5",
    "boolean": "true",
    "array": {"not": "an array"},
    "object": ["not", "an", "object"],
}
_BAD_FORMAT = {
    "date-time": "2026-13-01T25:61:00Z",
    "email": "no-at-sign.example.ac.uk",
    "uri": "not a uri",
    "hostname": "-bad-host-",
    "ipv4": "256.1.1.1",
    "ipv6": "::g",
}


@dataclass(frozen=True)
class Mutation:
    path: tuple[str | int, ...]
    rule: str
    message: dict[str, Any]
    expected_code: str

    def __str__(self) -> str:
        return f"{'.'.join(map(str, self.path))}: {self.rule} -> {self.expected_code}"


def mutations(message: dict[str, Any]) -> Iterator[Mutation]:
    """Every single-rule mutation of a valid whole message."""
    header = message["messageHeader"]
    body_ref = schemas.body_schema(header["messageType"], header["messageClass"])
    assert body_ref is not None
    walker = _Walker(message)
    yield from walker.walk(
        {"$ref": schemas.uri(schemas.HEADER)}, schemas.SCHEMA_BASE, header, ("messageHeader",), False
    )
    yield from walker.walk(
        {"$ref": schemas.uri(body_ref)}, schemas.SCHEMA_BASE, message["messageBody"], ("messageBody",), False
    )


class _Walker:
    def __init__(self, message: dict[str, Any]) -> None:
        self.message = message
        self.documents = {schemas.uri(relative): doc for relative, doc in schemas.documents().items()}

    def _resolve(self, schema: dict[str, Any], base: str) -> tuple[dict[str, Any], str, bool]:
        """Follow $ref chains, keeping the keywords beside each $ref (e.g. an integer's range);
        report whether the uuid definition was on the way."""
        uuid = False
        merged: dict[str, Any] = {}
        while "$ref" in schema:
            merged = {**{k: v for k, v in schema.items() if k != "$ref"}, **merged}
            target = urljoin(base, schema["$ref"])
            uuid = uuid or target == schemas.UUID_LOCATION
            document_uri, fragment = urldefrag(target)
            node: Any = self.documents[document_uri]
            for token in filter(None, fragment.split("/")):
                node = node[token]
            schema, base = node, document_uri
        return {**schema, **merged}, base, uuid

    def _mutated(self, path: tuple[str | int, ...], value: Any = None, *, delete: bool = False) -> dict[str, Any]:
        mutated = copy.deepcopy(self.message)
        target: Any = mutated
        for step in path[:-1]:
            target = target[step]
        if delete:
            del target[path[-1]]
        else:
            target[path[-1]] = value
        return mutated

    def _code(self, path: tuple[str | int, ...], uuid: bool) -> str:
        if path[:2] == ("messageHeader", "messageType"):
            return "GENERR002"
        if uuid:
            return "GENERR010"
        return "GENERR004" if path[0] == "messageHeader" else "GENERR001"

    def walk(self, schema: Any, base: str, value: Any, path: tuple[str | int, ...], uuid: bool) -> Iterator[Mutation]:
        if not isinstance(schema, dict):
            return
        schema, base, via_uuid = self._resolve(schema, base)
        uuid = uuid or via_uuid
        code = self._code(path, uuid)
        kind = schema.get("type")
        if isinstance(kind, str):
            yield Mutation(path, f"type {kind}", self._mutated(path, _WRONG_TYPE[kind]), code)
        if "enum" in schema:
            yield Mutation(path, "enum", self._mutated(path, "NotOneOfThem"), code)
        if "anyOf" in schema and isinstance(value, str):
            yield Mutation(path, "anyOf", self._mutated(path, "not a host!"), code)
        if isinstance(value, str):
            if schema.get("minLength", 0) >= 1:
                yield Mutation(path, "minLength", self._mutated(path, ""), code)
            if "pattern" in schema:
                yield Mutation(path, "pattern", self._mutated(path, value.upper() + "!"), code)
            if schema.get("format") in _BAD_FORMAT:
                yield Mutation(
                    path, f"format {schema['format']}", self._mutated(path, _BAD_FORMAT[schema["format"]]), code
                )
        if isinstance(value, int) and not isinstance(value, bool):
            if kind == "integer":
                yield Mutation(path, "integer written with a fraction", self._mutated(path, float(value)), code)
            if "minimum" in schema:
                yield Mutation(path, "minimum", self._mutated(path, schema["minimum"] - 1), code)
            if "maximum" in schema:
                yield Mutation(path, "maximum", self._mutated(path, schema["maximum"] + 1), code)
        if isinstance(value, list):
            if schema.get("minItems", 0) >= 1:
                yield Mutation(path, "minItems", self._mutated(path, []), code if not uuid else "GENERR004")
            if schema.get("uniqueItems") and value:
                yield Mutation(path, "uniqueItems", self._mutated(path, [*value, copy.deepcopy(value[0])]), code)
            if "items" in schema and value:
                yield from self.walk(schema["items"], base, value[0], (*path, 0), False)
        if isinstance(value, dict):
            properties = schema.get("properties", {})
            for name in schema.get("required", []):
                if name in value:
                    yield Mutation(
                        (*path, name), "required", self._mutated((*path, name), delete=True), self._code(path, False)
                    )
            if schema.get("additionalProperties") is False:
                yield Mutation(
                    path, "additionalProperties", self._mutated((*path, "unexpectedMember"), 1), self._code(path, False)
                )
            for name, sub in properties.items():
                if name in value:
                    yield from self.walk(sub, base, value[name], (*path, name), False)
