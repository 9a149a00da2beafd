"""Where the members of a JSON object lie in its text, for edits that touch no other byte.

Decoration (errorCode and errorDescription into the messageHeader) and messageHistory (a hop
appended) change a message by *inserting* bytes, never by serialising it again, so both need
to know where the header object and its members sit in the text: this is the one walker they
share. Offsets count characters of the decoded text (what the standard library's scanner
counts); :func:`byte_offset` turns one into an offset into the payload's bytes.

Each value is skipped with the standard library's C scanner, which builds the value as it
finds its end: a member carries its parsed value at no further cost.
"""

# No ``from __future__ import annotations``: a NamedTuple would compile each string annotation
# when made, on every processor's cold start (rdss.model.history says the same).

import json
import re
from collections.abc import Iterator
from typing import Any, NamedTuple

# The standard library's C scanners, called as its own decoder calls them: a name's string, and
# a value (which the scanner builds as it finds the value's end).
_scanstring = json.decoder.scanstring  # type: ignore[attr-defined]
_scan = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
_WHITESPACE = " \t\n\r"
_SPACES = re.compile(r"[ \t\n\r]*").match
#: Makes a Member without the Python-level ``__new__`` a NamedTuple's call runs: a header's
#: members are walked on every hop, and that call doubled what the walk costs per member.
_tuple = tuple.__new__


class Member(NamedTuple):
    """One member of an object: its name, where its name and value lie, and its value."""

    name: str
    #: The opening quote of the name.
    name_start: int
    #: The value's first character, and one past its last.
    value_start: int
    value_end: int
    value: Any


def members(text: str, index: int = 0) -> Iterator[Member]:
    """The members of the object at ``index`` (after any whitespace), in order, a name given
    twice given twice. What follows the object's closing brace is not read.

    Raises:
        ValueError: the text there is not an object, as far as it has been walked (the members
            before the fault have been yielded by then), or a value nests deeper than Python's
            recursion limit lets the scanner go.
    """
    # Whitespace is looked for inline, and a run of it skipped by a regular expression: compact
    # text has none, and a call per gap was what the walk spent most on besides the scanners.
    try:
        if text[index] in _WHITESPACE:
            index = _past_spaces(text, index)
        if text[index] != "{":
            raise ValueError("not a JSON object")
        index += 1
        if text[index] in _WHITESPACE:
            index = _past_spaces(text, index)
        if text[index] == "}":
            return
        while True:
            if text[index] != '"':
                raise ValueError(f"malformed object: a name expected at {index}")
            name_start = index
            name, index = _scanstring(text, index + 1)
            if text[index] in _WHITESPACE:
                index = _past_spaces(text, index)
            if text[index] != ":":
                raise ValueError(f"malformed object: ':' expected at {index}")
            start = index + 1
            if text[start] in _WHITESPACE:
                start = _past_spaces(text, start)
            try:
                value, end = _scan(text, start)
            except StopIteration:  # the scanner's word for "no value starts here"
                raise ValueError(f"malformed object: a value expected at {start}") from None
            yield _tuple(Member, (name, name_start, start, end, value))
            index = end
            if text[index] in _WHITESPACE:
                index = _past_spaces(text, index)
            if text[index] == "}":
                return
            if text[index] != ",":
                raise ValueError(f"malformed object: ',' or '}}' expected at {index}")
            index += 1
            if text[index] in _WHITESPACE:
                index = _past_spaces(text, index)
    except IndexError as error:  # the text ends inside the object
        raise ValueError("malformed object: the text ends inside it") from error
    except RecursionError as error:  # the scanner recurses once a level; orjson goes deeper
        raise ValueError("a value nested too deep to walk") from error


def last_member(text: str, name: str, index: int = 0) -> Member | None:
    """The member ``name`` of the object at ``index`` that JSON parsers keep (the last of that
    name), or None when there is none.

    Past the one found, the walk goes on only while the rest of the text could name it again:
    spelled as it is, or with an escape (``"message\\u0048eader"``). A message's body is not
    parsed to read its header.

    Raises:
        ValueError: the text is not an object, as far as it has to be walked.
    """
    found = None
    quoted = f'"{name}"'
    for member in members(text, index):
        if member.name == name:
            found = member
            rest = member.value_end
            if text.find(quoted, rest) < 0 and text.find("\\", rest) < 0:
                break
    return found


def _past_spaces(text: str, index: int) -> int:
    """One past the run of whitespace at ``index`` (the pattern matches even an empty run)."""
    return _SPACES(text, index).end()  # type: ignore[union-attr]


def byte_offset(text: str, index: int) -> int:
    """The offset into the UTF-8 bytes of ``text`` of its character at ``index``."""
    prefix = text[:index]
    return index if prefix.isascii() else len(prefix.encode("utf-8"))
