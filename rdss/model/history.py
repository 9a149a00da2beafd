"""messageHistory: every hop that forwards a message appends itself, touching no other byte.

The spec's ``messageHistory`` is "the route that this Message has taken": one entry per hop,
``{machineId, machineAddress, timestamp}``. The gateway's send, the broker, the sequencer and
the bridge each append one. Re-serialising the message would change its bytes (key order,
spacing, number forms), so :func:`append` *inserts* the entry - at the end of the existing
array, or as a new member where the spec's header order puts it (before ``version``) - the way
:mod:`rdss.model.decoration` inserts errorCode. (Mosaic envelopes carry the header in the spec's
order, so a message crosses RabbitMQ and back byte for byte, hops and all.)
:func:`extends` tells whether a record is another record plus appended hops, so accounting and
tracing can follow a record through the hops that changed it.
"""

# No ``from __future__ import annotations``: a NamedTuple would compile each string annotation
# when made. Every processor's cold start defines the records here (rdss.deployment.topology says more).

import os
import re
import socket
from collections.abc import Mapping
from datetime import datetime
from functools import lru_cache
from typing import Any, NamedTuple

import orjson

from rdss.model import jsontext, timestamps

_COMPACT = b'{"messageHeader":{'
#: Header members that follow messageHistory in the spec's order: a first hop goes before them.
_AFTER_HISTORY = frozenset({"version", "errorCode", "errorDescription", "generator"})
_HOSTNAME = re.compile(
    r"(?=.{1,253}\Z)([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\Z"
)


class Hop(NamedTuple):
    """One entry of messageHistory."""

    machine_id: str
    machine_address: str
    timestamp: str

    def entry(self) -> dict[str, str]:
        return {"machineId": self.machine_id, "machineAddress": self.machine_address, "timestamp": self.timestamp}


def hop(machine_id: str, *, now: datetime | None = None) -> Hop:
    """This machine as a hop named ``machine_id`` (the processor or application), now."""
    return Hop(machine_id, machine_address(), timestamps.format(now or timestamps.now()))


def processor_id(processor: str, environment: str) -> str:
    """A processor's machineId: its Lambda function's name where it runs in Lambda, else
    ``rdss-<environment>-<processor>`` (the local runtime, tests)."""
    return os.environ.get("AWS_LAMBDA_FUNCTION_NAME") or f"rdss-{environment}-{processor}"


@lru_cache(maxsize=1)
def machine_address() -> str:
    """This host's name, or its address when the name is not a valid host name (the schema
    wants a host name, an IPv4 or an IPv6 address)."""
    name = socket.gethostname()
    if name and _HOSTNAME.match(name):
        return name
    try:
        return socket.gethostbyname(name)
    except OSError:
        return "127.0.0.1"


def append(payload: bytes, entry: Hop, *, header: Mapping[str, Any] | None = None) -> bytes:
    """``payload`` with ``entry`` appended to its messageHeader's messageHistory.

    ``header``, the messageHeader a caller already parsed (the classifier's verdict has it),
    lets a compact payload be done without parsing it again.

    Raises:
        ValueError: the payload has no messageHeader object, or its messageHistory is not an
            array (such a payload is invalid, and is moved rather than forwarded).
    """
    encoded = orjson.dumps(entry.entry())
    if header is not None and payload.startswith(_COMPACT):
        fast = _append_compact(payload, header, entry, encoded)
        if fast is not None:
            return fast
    text, start, end, parsed = _header(payload)
    header = parsed
    if "messageHistory" not in header:
        member = b'"messageHistory":[' + encoded + b"]"
        members = list(jsontext.members(text, start))
        following = next((m for m in members if m.name in _AFTER_HISTORY), None)
        if following is None:
            at, insertion = end - 1, (b"," if members else b"") + member  # before the closing brace
        else:
            at, insertion = following.name_start, member + b","  # before the member's name
    else:
        if not isinstance(header["messageHistory"], list):
            raise ValueError("messageHistory is not an array")
        # the last member of that name is the one parsers keep
        if entry.entry() in header["messageHistory"]:
            return payload  # the schema wants entries unique: this hop is there already
        value_end = [m.value_end for m in jsontext.members(text, start) if m.name == "messageHistory"][-1]
        empty = not header["messageHistory"]
        insertion = encoded if empty else b"," + encoded
        at = value_end - 1  # the array's closing bracket
    offset = jsontext.byte_offset(text, at)
    return payload[:offset] + insertion + payload[offset:]


def _append_compact(payload: bytes, header: Mapping[str, Any], entry: Hop, encoded: bytes) -> bytes | None:
    """What producers send most: compact JSON, header first. When the parsed header serialises
    to exactly the bytes that follow ``{"messageHeader":``, the insertion point is found
    without parsing; None when it does not (then the payload is parsed)."""
    compact = orjson.dumps(header)
    base = len(_COMPACT) - 1
    end = base + len(compact)
    if len(compact) <= 2 or payload[base:end] != compact or payload.find(b'"messageHeader"', end) >= 0:
        return None
    history = header.get("messageHistory")
    if history is None:
        member = b'"messageHistory":[' + encoded + b"]"
        keys = list(header)
        following = next((i for i, key in enumerate(keys) if key in _AFTER_HISTORY), None)
        if following is None:
            at, insertion = end - 1, b"," + member
        elif following == 0:
            at, insertion = base + 1, member + b","
        else:  # the members before it serialise to the bytes before its comma
            before = orjson.dumps({key: header[key] for key in keys[:following]})
            at, insertion = base + len(before) - 1, b"," + member
    elif isinstance(history, list):
        if entry.entry() in history:
            return payload
        member = b'"messageHistory":' + orjson.dumps(history)
        index = compact.rfind(member)  # a quote cannot appear unescaped inside a string value
        if index < 0:
            return None
        at, insertion = base + index + len(member) - 1, (b"," if history else b"") + encoded
    else:
        return None
    return payload[:at] + insertion + payload[at:]


def hops(payload: bytes) -> list[dict[str, Any]]:
    """The messageHistory entries of a payload (empty when it has none or is not a message)."""
    try:
        header = orjson.loads(payload)["messageHeader"]
        history = header.get("messageHistory") or []
    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
        return []
    return [h for h in history if isinstance(h, dict)] if isinstance(history, list) else []


def extends(original: bytes, record: bytes) -> bool:
    """True when ``record`` is ``original`` with zero or more entries appended by :func:`append`."""
    if record == original:
        return True
    before, after = hops(original), hops(record)
    if len(after) <= len(before) or after[: len(before)] != before:
        return False
    rebuilt = original
    try:
        for entry in after[len(before) :]:
            rebuilt = append(rebuilt, Hop(entry["machineId"], entry["machineAddress"], entry["timestamp"]))
    except (KeyError, ValueError):
        return False
    return rebuilt == record


def _header(payload: bytes) -> tuple[str, int, int, dict[str, Any]]:
    """The payload as text, the character span of its messageHeader object and its value."""
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError("not UTF-8") from error
    try:
        member = jsontext.last_member(text, "messageHeader")
    except ValueError as error:
        raise ValueError(f"not a JSON object: {error}") from error
    if member is None or not isinstance(member.value, dict):
        raise ValueError("no messageHeader object")
    return text, member.value_start, member.value_end, member.value
