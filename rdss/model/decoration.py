"""Decorating a message for the invalid and error channels without losing a byte of it.

The spec requires every message moved to the Invalid or Error Message Queue to carry
``errorCode`` and ``errorDescription`` in its messageHeader. Re-serialising the message would
change its bytes (key order, spacing, number forms), so decoration *inserts* the two members
just before the header's closing brace and touches nothing else: :func:`original` removes them
again and gives back the payload exactly as it arrived.

A payload with no header object to decorate (not JSON, not an object, no messageHeader), or
whose header already names an error, is wrapped instead::

    {"messageHeader": {"errorCode": ..., "errorDescription": ...},
     "originalPayload": {"encoding": "utf-8" | "base64", "data": ...}}

so that ``record["messageHeader"]["errorCode"]`` reads the same on every decorated record.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import orjson

from rdss.model import jsontext
from rdss.model.errors import ErrorCode

#: Key of the wrapper that carries a payload which could not be decorated in place.
WRAPPER_KEY = "originalPayload"


def decorate(payload: bytes, error_code: ErrorCode | str, error_description: str) -> bytes:
    """The payload with ``errorCode`` and ``errorDescription`` added to its messageHeader."""
    code = str(error_code)
    description = error_description or ErrorCode(code).description
    span = _header_span(payload) if _is_json(payload) else None
    if span is not None:
        _start, end, empty, header = span
        if "errorCode" not in header and "errorDescription" not in header:
            insertion = _insertion(code, description, empty)
            closing = end - 1  # the header's closing brace
            return payload[:closing] + insertion + payload[closing:]
    return _wrap(payload, code, description)


def original(record: bytes) -> bytes:
    """The payload exactly as it was before :func:`decorate`."""
    decorated = orjson.loads(record)
    header = decorated["messageHeader"]
    wrapped = decorated.get(WRAPPER_KEY)
    if set(decorated) == {"messageHeader", WRAPPER_KEY} and isinstance(wrapped, dict):
        if wrapped["encoding"] not in ("utf-8", "base64"):
            where = {k: v for k, v in wrapped.items() if k not in ("bytes", "sha256")}
            raise ValueError(f"the payload is not in the record but kept elsewhere (a claim check): {where}")
        data = wrapped["data"]
        return base64.b64decode(data) if wrapped["encoding"] == "base64" else data.encode("utf-8")
    span = _header_span(record)
    if span is None:
        raise ValueError("not a decorated message: no messageHeader object")
    _, end, _, _ = span
    closing = end - 1
    for empty in (False, True):
        insertion = _insertion(header["errorCode"], header["errorDescription"], empty)
        if record[closing - len(insertion) : closing] == insertion:
            return record[: closing - len(insertion)] + record[closing:]
    raise ValueError("not a decorated message: the header does not end with errorCode and errorDescription")


def claim_check(
    error_code: ErrorCode | str, error_description: str, *, location: Mapping[str, Any], size: int, sha256: str
) -> bytes:
    """The record that stands for a payload too large to travel decorated (Claim Check): the
    payload is kept elsewhere and the wrapper says where (``location``: its ``encoding``, e.g.
    ``s3``, and the members that find it, e.g. ``bucket`` and ``key``), its size and SHA-256."""
    return orjson.dumps(
        {
            "messageHeader": {"errorCode": str(error_code), "errorDescription": error_description},
            WRAPPER_KEY: {**location, "bytes": size, "sha256": sha256},
        }
    )


def is_wrapped(record: dict[str, Any]) -> bool:
    """True for a decorated record that carries its payload in the wrapper."""
    return set(record) == {"messageHeader", WRAPPER_KEY}


def _is_json(payload: bytes) -> bool:
    """What orjson accepts: the standard library's scanner (used to find the header) also takes
    NaN and Infinity, which would make the decorated record unreadable."""
    try:
        orjson.loads(payload)
    except orjson.JSONDecodeError:
        return False
    return True


def _insertion(code: str, description: str, empty: bool) -> bytes:
    members = b'"errorCode":' + orjson.dumps(code) + b',"errorDescription":' + orjson.dumps(description)
    return members if empty else b"," + members


def _wrap(payload: bytes, code: str, description: str) -> bytes:
    try:
        data, encoding = payload.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        data, encoding = base64.b64encode(payload).decode("ascii"), "base64"
    return orjson.dumps(
        {
            "messageHeader": {"errorCode": code, "errorDescription": description},
            WRAPPER_KEY: {"encoding": encoding, "data": data},
        }
    )


def _header_span(payload: bytes) -> tuple[int, int, bool, dict[str, Any]] | None:
    """Byte offsets (start, end) of the top-level messageHeader object, whether it is empty,
    and its value; None when the payload has no such object. Duplicate names resolve to the
    last, as JSON parsers do."""
    try:
        text = payload.decode("utf-8")
        member = jsontext.last_member(text, "messageHeader")
    except (UnicodeDecodeError, ValueError):
        return None
    if member is None or not isinstance(member.value, dict):
        return None
    header: dict[str, Any] = member.value
    return (
        jsontext.byte_offset(text, member.value_start),
        jsontext.byte_offset(text, member.value_end),
        not header,
        header,
    )
