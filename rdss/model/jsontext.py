"""Where the members of a JSON object lie in its text: the one walker for what must change a
message's bytes in place and touch no other byte.

Decoration (:mod:`rdss.model.decoration`) inserts ``errorCode`` and ``errorDescription`` at the
end of the top-level ``messageHeader`` object, and ``messageHistory`` (:mod:`rdss.model.history`)
appends a hop inside it; both need the character span of that object and of its members, not a
re-serialisation. :func:`members` yields each member of the object at an index with its spans;
each value is skipped with the standard library's C scanner, so a large body costs one scan.
Offsets count characters of the decoded text; :func:`byte_offset` turns one into the offset in
the UTF-8 bytes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

_DECODER = json.JSONDecoder()
_WHITESPACE = " \t\n\r"


@dataclass(frozen=True, slots=True)
class Member:
    """One member of an object: its name, where its name starts, where its value starts and
    ends (character offsets), and the value parsed."""

    name: str
    name_start: int
    start: int
    end: int
    value: Any


def skip(text: str, index: int) -> int:
    """The index of the first character at or after ``index`` that is not JSON whitespace."""
    while index < len(text) and text[index] in _WHITESPACE:
        index += 1
    return index


def members(text: str, index: int) -> Iterator[Member]:
    """The members of the object at ``index``, in order.

    Raises:
        ValueError: not an object there, or a malformed one (``json.JSONDecodeError`` for a
            malformed value).
        IndexError: the text ends inside the object.
    """
    if text[index] != "{":
        raise ValueError("not a JSON object")
    index = skip(text, index + 1)
    if text[index] == "}":
        return
    while True:
        if text[index] != '"':
            raise ValueError("malformed object")
        name_start = index
        name, index = json.decoder.scanstring(text, index + 1)  # type: ignore[attr-defined]
        index = skip(text, index)
        if text[index] != ":":
            raise ValueError("malformed object")
        start = skip(text, index + 1)
        value, end = _DECODER.raw_decode(text, start)
        yield Member(name, name_start, start, end, value)
        index = skip(text, end)
        if text[index] == "}":
            return
        if text[index] != ",":
            raise ValueError("malformed object")
        index = skip(text, index + 1)


def top_level(text: str, name: str, *, whole: bool) -> Member | None:
    """The top-level member ``name`` of the object ``text`` holds (the last of that name, as
    JSON parsers keep it), or None when there is none.

    ``whole``: walk the object to its end, so a malformed member anywhere raises; otherwise stop
    once the rest of the text cannot name it again (a cheap search instead of parsing what
    follows, the body).

    Raises:
        ValueError, IndexError: as :func:`members`.
    """
    found: Member | None = None
    quoted = json.dumps(name, ensure_ascii=False)
    for member in members(text, skip(text, 0)):
        if member.name == name:
            found = member
            # another spelling of the name needs an escape (``"messageHead\u0065r"``): only a
            # rest holding neither the name as written nor a backslash cannot name it again
            if not whole and text.find(quoted, member.end) < 0 and text.find("\\", member.end) < 0:
                break
    return found


def byte_offset(text: str, index: int) -> int:
    """The offset in ``text``'s UTF-8 encoding of character ``index``."""
    prefix = text[:index]
    return index if prefix.isascii() else len(prefix.encode("utf-8"))
