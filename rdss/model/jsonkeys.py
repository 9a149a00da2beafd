"""Duplicate names in a JSON text's objects: the classifier's parse stage refuses them (GENERR007).

RFC 8259 says the names within an object SHOULD be unique and that parsers disagree on which of
two equal names they keep: orjson keeps the last, others keep the first or refuse. A message
whose ``messageId`` is written twice is therefore two different messages to two consumers, so the
classifier judges such a payload malformed instead of choosing one reading.

Parsers hand back objects with the duplicates already merged, so the check compares the text with
what was parsed, cheaply enough for every message (:func:`has_unique_names`), and only a payload
that fails it is scanned (:func:`first_duplicate`) to name the object and the name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import orjson

# A string token (well formed: the text has been parsed already) or one structural character;
# numbers, literals and whitespace are skipped by finditer.
_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[{}\[\],]', re.DOTALL)
# An escaped colon (\u003a or \u003A) writes a colon the count below cannot see.
_ESCAPED_COLON = b"\\u003"


def has_unique_names(payload: bytes | bytearray | memoryview, parsed: Any) -> bool:
    """Whether every object of the JSON text ``payload`` names each member once, given what a
    parser made of it (``parsed``, in which duplicates are already merged).

    A text equal to the parsed value's compact serialisation has none. Otherwise every member
    of the text has one structural colon, and every colon inside a string stays a colon in the
    serialisation (orjson never escapes one): unless the text escapes a colon, the text holds as
    many colons as the serialisation exactly when no member was merged away. Only a text that
    escapes a colon, or that the serialiser cannot write back, is scanned.
    """
    try:
        compact = orjson.dumps(parsed)
    except orjson.JSONEncodeError:  # nested deeper than orjson writes: scan the text itself
        return first_duplicate(payload) is None
    if compact == payload:
        return True
    text = payload if type(payload) is bytes else bytes(payload)
    if b"\\" in text and _ESCAPED_COLON in text:  # one byte is searched fastest
        return first_duplicate(text) is None
    return text.count(b":") == compact.count(b":")


@dataclass
class _Frame:
    """An object or array being read."""

    #: None for an array, else the names seen so far in the object
    names: set[str] | None
    #: the path element of the member or item being read (a name, or an index)
    at: str | int = 0
    expecting_name: bool = True


def first_duplicate(payload: bytes | bytearray | memoryview) -> tuple[list[str | int], str] | None:
    """The first repeated name in an object of the JSON text ``payload``: the path of the object
    (member names and array indices from the root) and the name; None when there is none.

    ``payload`` must be well-formed JSON. Iterative, so any depth of nesting is scanned.
    """
    text = payload if type(payload) is bytes else bytes(payload)
    stack: list[_Frame] = []
    for match in _TOKEN.finditer(text):
        token = match.group()
        first = token[0]
        if first == 0x22:  # a string: a name when an object expects one
            top = stack[-1] if stack else None
            if top is not None and top.names is not None and top.expecting_name:
                name = orjson.loads(token)
                if name in top.names:
                    return [frame.at for frame in stack[:-1]], name
                top.names.add(name)
                top.at = name
                top.expecting_name = False
        elif first == 0x7B:  # {
            stack.append(_Frame(set()))
        elif first == 0x5B:  # [
            stack.append(_Frame(None))
        elif first in (0x7D, 0x5D):  # } ]
            stack.pop()
        elif stack:  # ,
            top = stack[-1]
            if top.names is None:
                top.at = int(top.at) + 1
            else:
                top.expecting_name = True
    return None


def describe(path: list[str | int], name: str) -> str:
    """``payload: messageHeader has the member "messageId" twice ...`` for an errorDescription."""
    where = "the message"
    if path:
        where = ""
        for part in path:
            where += f"[{part}]" if isinstance(part, int) else (f".{part}" if where else part)
    quoted = orjson.dumps(name).decode()
    if len(quoted) > 80:
        quoted = quoted[:77] + "..."
    return (
        f"payload: {where} names the member {quoted} more than once; parsers disagree on which one "
        "they keep (RFC 8259 section 4), so the message is ambiguous"
    )
