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
    try:
        parsed = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(parsed, dict) or not isinstance(parsed.get("messageHeader"), dict):
        return None
    if decoration.is_wrapped(parsed):
        try:
            parsed = orjson.loads(decoration.original(data))
        except (ValueError, orjson.JSONDecodeError):
            return None
        if not isinstance(parsed, dict) or not isinstance(parsed.get("messageHeader"), dict):
            return None
    header: dict[str, Any] = parsed["messageHeader"]
    return header


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
    try:
        parsed = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    header = parsed.get("messageHeader") if isinstance(parsed, dict) else None
    return header if isinstance(header, dict) and header.get("errorCode") else None


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
