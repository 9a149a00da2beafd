"""What a record's bytes say, for ``rdss trace``: its header (a wrapped record's original's),
whether it is a given message, whether it is a part of a sequence.

Every function here takes whatever a channel or an archive holds - JSON or not, decorated,
wrapped, broken copies - and answers without raising.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping
from typing import Any

import orjson

from rdss.model import decoration


def header_of(data: bytes) -> dict[str, Any] | None:
    """The message header of a record; for a wrapped one (a payload that could not be decorated
    in place), its original's header when that can be read."""
    found = _with_header(data)
    if found is None:
        return None
    record, header = found
    if not decoration.is_wrapped(record):
        return header
    try:
        original = decoration.original(data)
    except (ValueError, orjson.JSONDecodeError):
        return None
    found = _with_header(original)
    return None if found is None else found[1]


def mentions(data: bytes, needle: bytes) -> bool:
    """Whether a record's bytes hold ``needle``, or a wrapped record's original does (a payload
    that was not valid UTF-8 travels base64-encoded in its wrapper)."""
    if needle in data:
        return True
    if f'"{decoration.WRAPPER_KEY}"'.encode() not in data:
        return False
    try:
        return needle in decoration.original(data)
    except (ValueError, KeyError, TypeError, orjson.JSONDecodeError):
        return False


def holds(data: bytes, message_id: str) -> bool:
    """Whether a record is the message: its header (or, decorated, its original's) names the id;
    for a record that is not JSON at all, a ``"messageId":"<id>"`` member among its bytes."""
    header = header_of(data)
    if header is not None:
        return header.get("messageId") == message_id
    with contextlib.suppress(ValueError, KeyError, TypeError, orjson.JSONDecodeError):
        data = decoration.original(data)  # a wrapped record: its original's bytes
    return re.search(rb'"messageId"\s*:\s*"' + re.escape(message_id.encode()) + rb'"', data) is not None


def carried_header(data: bytes) -> dict[str, Any] | None:
    """The outer header of a record that is decorated itself (errorCode on it as it travels)."""
    found = _with_header(data)
    return found[1] if found is not None and found[1].get("errorCode") else None


def _with_header(data: bytes) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(the record, its messageHeader) when ``data`` is a JSON object whose header is one."""
    try:
        parsed = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    header = parsed.get("messageHeader") if isinstance(parsed, dict) else None
    return (parsed, header) if isinstance(header, dict) else None


def message_id(data: bytes) -> str | None:
    header = header_of(data)
    value = (header or {}).get("messageId")
    return value if isinstance(value, str) else None


def is_part(data: bytes) -> bool:
    header = header_of(data) or {}
    return bool(member_object(header, "messageSequence").get("total", 1) != 1)


def member_object(header: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    """A header member that should be an object (a broken copy's may be anything): {} if not."""
    value = header.get(name)
    return value if isinstance(value, Mapping) else {}
