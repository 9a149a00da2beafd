"""Compiling schemas into programs for the classifier's C fast path (``rdss._fastcheck``).

The program is a list of nodes, one per (sub)schema, each a dict of the keywords the C
interpreter understands. Known patterns and formats become named string checks. A schema
using anything else makes :func:`compile_checker` return None, and the classifier relies on
jsonschema-rs alone: the fast path is an optimisation, never a second opinion.
"""

from __future__ import annotations

from typing import Any, Protocol
from urllib.parse import urldefrag, urljoin

from rdss import schemas

try:
    from rdss import _fastcheck  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - built by `pip install`; absent where no compiler ran
    _fastcheck = None

_TYPE_BITS = {"null": 1, "boolean": 2, "integer": 4, "number": 8, "string": 16, "array": 32, "object": 64}

#: String checks of the C interpreter, by name (the values are the C_* codes).
CHECKS = {"uuid": 1, "semver": 2, "date-time": 3, "email": 4, "uri": 5, "hostname": 6, "ipv4": 7, "ipv6": 8}

_FORMATS = {"date-time", "email", "uri", "hostname", "ipv4", "ipv6"}
_ANNOTATIONS = {"$schema", "$id", "$defs", "title", "description", "x-rdss-names", "examples", "$comment"}
# keywords whose result the C interpreter decides exactly (usable inside "if")
_EXACT = {"type", "properties", "required", "enum", "const"}


class Checker(Protocol):
    def is_valid(self, instance: Any) -> bool: ...


class Unsupported(Exception):
    """The schema uses a keyword (or a form of one) the C interpreter does not implement."""


def available() -> bool:
    """True when the C extension was built for this interpreter."""
    return _fastcheck is not None


def compile_checker(schema: dict[str, Any]) -> Checker | None:
    """A compiled fast checker for ``schema`` (refs resolved through the project's schemas),
    or None when the extension is missing or the schema is outside the supported subset."""
    if _fastcheck is None:
        return None
    try:
        program = compile_program(schema)
    except Unsupported:
        return None
    checker: Checker = _fastcheck.Checker(program)
    return checker


def compile_program(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """The node list for ``schema``; node 0 is the root.

    Raises:
        Unsupported: the schema needs a keyword the interpreter lacks.
    """
    compiler = _Compiler()
    compiler.compile(schema, schemas.SCHEMA_BASE)
    if any(node is None for node in compiler.nodes):
        raise Unsupported("a reference cycle through $ref-only schemas")
    return compiler.nodes  # type: ignore[return-value]


def check_string(check: str, text: str) -> bool:
    """Apply one named string check of the C interpreter (for tests and diagnostics)."""
    if _fastcheck is None:
        raise RuntimeError("rdss._fastcheck is not built")
    return bool(_fastcheck.check_string(CHECKS[check], text))


def _patterns() -> dict[str, str]:
    types = schemas.documents()["model/types.json"]["$defs"]
    return {types["uuid"]["pattern"]: "uuid", types["semVer"]["pattern"]: "semver"}


class _Compiler:
    def __init__(self) -> None:
        self.nodes: list[dict[str, Any] | None] = []
        self.by_ref: dict[str, int] = {}
        self.documents = {doc["$id"]: doc for doc in schemas.documents().values()}
        self.patterns = _patterns()

    def compile(self, schema: Any, base: str) -> int:
        if schema is True:
            return self._add({})
        if not isinstance(schema, dict):
            raise Unsupported(f"schema {schema!r}")
        base = urljoin(base, schema.get("$id", ""))
        if "$ref" in schema:
            extra = set(schema) - _ANNOTATIONS - {"$ref"}
            if extra:
                raise Unsupported(f"$ref beside {sorted(extra)}")
            return self._ref(urljoin(base, schema["$ref"]))
        index = self._add(None)
        self.nodes[index] = self._node(schema, base)
        return index

    def _add(self, node: dict[str, Any] | None) -> int:
        self.nodes.append(node)
        return len(self.nodes) - 1

    def _ref(self, target: str) -> int:
        if target in self.by_ref:
            return self.by_ref[target]
        document_uri, fragment = urldefrag(target)
        document = self.documents.get(document_uri)
        if document is None:
            raise Unsupported(f"unknown document {document_uri}")
        schema: Any = document
        for token in filter(None, fragment.split("/")):
            schema = schema[token.replace("~1", "/").replace("~0", "~")]
        if isinstance(schema, dict) and "$ref" not in schema:
            # registered before compiling, so a definition that refers to itself terminates
            index = self._add(None)
            self.by_ref[target] = index
            self.nodes[index] = self._node(schema, urljoin(document_uri, schema.get("$id", "")))
            return index
        index = self.compile(schema, document_uri)
        self.by_ref[target] = index
        return index

    def _node(self, schema: dict[str, Any], base: str) -> dict[str, Any]:
        node: dict[str, Any] = {}
        for key, value in schema.items():
            if key in _ANNOTATIONS:
                continue
            if key == "type":
                names = [value] if isinstance(value, str) else list(value)
                node["types"] = sum(_TYPE_BITS[name] for name in names)
            elif key == "properties":
                node["properties"] = {name: self.compile(sub, base) for name, sub in value.items()}
            elif key == "required":
                node["required"] = list(value)
            elif key == "additionalProperties":
                if value is False:
                    node["forbidAdditional"] = True
                elif value is not True:
                    raise Unsupported("additionalProperties with a schema")
            elif key == "items":
                node["items"] = self.compile(value, base)
            elif key in ("minItems", "minLength"):
                node[key] = int(value)
            elif key == "uniqueItems":
                node["uniqueItems"] = bool(value)
            elif key in ("minimum", "maximum"):
                if type(value) is not int:
                    raise Unsupported(f"non-integer {key}")
                node[key] = value
            elif key == "enum":
                node["enum"] = list(value)
            elif key == "const":
                node["enum"] = [value]
            elif key == "pattern":
                self._set_check(node, self.patterns.get(value), f"pattern {value!r}")
            elif key == "format":
                self._set_check(node, value if value in _FORMATS else None, f"format {value!r}")
            elif key == "anyOf":
                node["anyOf"] = [self.compile(sub, base) for sub in value]
            elif key == "if":
                _require_exact(value)
                node["if"] = self.compile(value, base)
            elif key == "then":
                node["then"] = self.compile(value, base)
            else:
                raise Unsupported(f"keyword {key!r}")
        if ("if" in node) != ("then" in node):
            raise Unsupported("if without then (or then without if)")
        return node

    @staticmethod
    def _set_check(node: dict[str, Any], check: str | None, what: str) -> None:
        if check is None or "check" in node:
            raise Unsupported(what)
        node["check"] = CHECKS[check]


def _require_exact(schema: Any) -> None:
    """An "if" schema must be decided exactly by the interpreter (no conservative checks)."""
    if not isinstance(schema, dict):
        raise Unsupported("non-object if")
    for key, value in schema.items():
        if key in _ANNOTATIONS:
            continue
        if key not in _EXACT:
            raise Unsupported(f"{key!r} inside if")
        if key == "properties":
            for sub in value.values():
                _require_exact(sub)
