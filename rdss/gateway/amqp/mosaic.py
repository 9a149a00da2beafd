"""The Message Translator between RDSS messages and the Mosaic message envelope (EIP).

Mosaic services exchange JSON envelopes::

    {"message_id": ..., "message_type": ..., "message_version": ..., "timestamp": ...,
     "auth_token": ..., "message_context": {...}, "payload": {...}}

An RDSS message maps onto one field for field where the two agree, and the rest of its header
travels in ``message_context`` under the reserved key :data:`CONTEXT_KEY`, so nothing is lost:

=====================  ==============================================================
Mosaic                 RDSS
=====================  ==============================================================
``message_id``         ``messageHeader.messageId``
``message_type``       ``messageHeader.messageType``
``message_version``    ``messageHeader.version`` (the RDSS spec version, e.g. 3.0.2)
``timestamp``          ``messageHeader.messageTimings.publishedTimestamp``, in UTC
``payload``            ``messageBody``
``message_context``    ``{"rdss_header": <every other header field>, ...}``
``auth_token``         no RDSS field: :class:`Carried` alongside the message
=====================  ==============================================================

Mosaic's ``timestamp`` is UTC: the envelope carries the published time converted to UTC
(``2024-05-01T08:00:00Z``); when that is not how the RDSS message wrote it (another zone, other
digits), the message's own text stays in ``rdss_header.messageTimings`` so that it comes back
as it was. A published time that is not a date-time with a zone cannot be converted: such a
payload is no message the translator maps (:class:`TranslationError`).

Both directions are lossless: ``to_rdss(to_mosaic(m)) == m`` for every RDSS message, and
``to_mosaic(to_rdss(e), **carried(e).as_kwargs()) == e`` for every envelope made from one
(whatever auth token and context it was given). Header members keep their order (the mapped
fields go back to their places in the spec's order), so a message serialised by
:func:`rdss.model.messages.serialise` comes back byte for byte.

The RDSS header schema admits no extra members, so what only Mosaic has (the JWT of the actor,
the caller's own context) cannot ride inside the RDSS message: :func:`carried` returns it, and
the RabbitMQ backend hands it on with the delivery (``Delivery.attributes``).

Pure functions, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

from rdss.model.messages import Message

#: The key of ``message_context`` that holds the RDSS header fields the envelope has no place for.
CONTEXT_KEY = "rdss_header"

#: Envelope fields in the order Mosaic's documentation lists them.
FIELDS = ("message_id", "message_type", "message_version", "timestamp", "auth_token", "message_context", "payload")

#: The spec's order of header members: where the mapped fields go back on the way in.
_HEADER_ORDER = (
    "messageId",
    "correlationId",
    "messageClass",
    "messageType",
    "returnAddress",
    "messageTimings",
    "messageSequence",
    "messageHistory",
    "version",
    "errorCode",
    "errorDescription",
    "generator",
)
_RANK = {name: index for index, name in enumerate(_HEADER_ORDER)}
_MAPPED = {"messageId": "message_id", "messageType": "message_type", "version": "message_version"}


class TranslationError(ValueError):
    """The input is not a message the translator can map (says which field is missing)."""


@dataclass(frozen=True)
class Carried:
    """What a Mosaic envelope carries that an RDSS message has no place for."""

    auth_token: str | None = None
    #: ``message_context`` without the reserved :data:`CONTEXT_KEY`.
    context: Mapping[str, Any] = field(default_factory=dict)

    def as_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for :func:`to_mosaic`."""
        return {"auth_token": self.auth_token, "context": self.context}


def to_mosaic(
    message: Mapping[str, Any], *, auth_token: str | None = None, context: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The Mosaic envelope of an RDSS message.

    Args:
        auth_token: the JWT of the actor behind the message, when there is one.
        context: Mosaic's message context to carry besides the RDSS header (must not use the
            reserved key :data:`CONTEXT_KEY`).

    Raises:
        TranslationError: not an RDSS message (no header object, a mapped field missing or not
            a string, members other than messageHeader and messageBody).
    """
    header = message.get("messageHeader")
    if not isinstance(header, Mapping):
        raise TranslationError("no messageHeader object")
    if set(message) != {"messageHeader", "messageBody"}:
        raise TranslationError("an RDSS message has exactly messageHeader and messageBody")
    timings = header.get("messageTimings")
    if not isinstance(timings, Mapping) or not isinstance(timings.get("publishedTimestamp"), str):
        raise TranslationError("messageHeader.messageTimings.publishedTimestamp is missing or not a string")
    for name in _MAPPED:
        if not isinstance(header.get(name), str):
            raise TranslationError(f"messageHeader.{name} is missing or not a string")
    if context is not None and CONTEXT_KEY in context:
        raise TranslationError(f"message_context.{CONTEXT_KEY} is reserved for the RDSS header")
    published = timings["publishedTimestamp"]
    timestamp = utc(published)
    rest: dict[str, Any] = {}
    for name, value in header.items():
        if name in _MAPPED:
            continue
        if name == "messageTimings" and timestamp == published:
            # the envelope's timestamp says it exactly: no need to say it twice
            value = {k: v for k, v in value.items() if k != "publishedTimestamp"}
        rest[name] = value
    envelope: dict[str, Any] = {
        "message_id": header["messageId"],
        "message_type": header["messageType"],
        "message_version": header["version"],
        "timestamp": timestamp,
    }
    if auth_token is not None:
        envelope["auth_token"] = auth_token
    envelope["message_context"] = {**(context or {}), CONTEXT_KEY: rest}
    envelope["payload"] = message["messageBody"]
    return envelope


def utc(timestamp: str) -> str:
    """An ISO 8601 date-time with a zone, in UTC with a ``Z`` (microseconds when there are any).

    Raises:
        TranslationError: not a date-time, or one without a zone (its UTC time is unknown).
    """
    try:
        moment = datetime.fromisoformat(timestamp)
    except ValueError:
        raise TranslationError(f"publishedTimestamp {timestamp!r} is not an ISO 8601 date-time") from None
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise TranslationError(f"publishedTimestamp {timestamp!r} has no zone: its UTC time is unknown")
    try:
        return moment.astimezone(UTC).replace(tzinfo=None).isoformat() + "Z"
    except OverflowError:  # year 1 or 9999 shifted past the calendar's end
        raise TranslationError(f"publishedTimestamp {timestamp!r} is outside the years UTC can express") from None


def to_rdss(envelope: Mapping[str, Any]) -> Message:
    """The RDSS message an envelope made by :func:`to_mosaic` carries.

    Raises:
        TranslationError: a field is missing, or the context holds no RDSS header (an envelope
            from a Mosaic service that never was an RDSS message).
    """
    context = envelope.get("message_context")
    rest = context.get(CONTEXT_KEY) if isinstance(context, Mapping) else None
    if not isinstance(rest, Mapping):
        raise TranslationError(f"message_context.{CONTEXT_KEY} is missing: not an RDSS message")
    for name in ("message_id", "message_type", "message_version", "timestamp"):
        if not isinstance(envelope.get(name), str):
            raise TranslationError(f"{name} is missing or not a string")
    if "payload" not in envelope:
        raise TranslationError("payload is missing")
    timings = rest.get("messageTimings")
    if not isinstance(timings, Mapping):
        raise TranslationError(f"message_context.{CONTEXT_KEY}.messageTimings is missing")
    restored = dict(rest)
    # the message's own text of the published time, when it differed from the UTC one
    restored["messageTimings"] = {"publishedTimestamp": envelope["timestamp"], **timings}
    mapped = [(name, envelope[key]) for name, key in _MAPPED.items()]
    return {"messageHeader": _merge(restored, mapped), "messageBody": envelope["payload"]}


def carried(envelope: Mapping[str, Any]) -> Carried:
    """The auth token and context of an envelope (what :func:`to_rdss` cannot put in the message)."""
    context = envelope.get("message_context")
    own = {k: v for k, v in context.items() if k != CONTEXT_KEY} if isinstance(context, Mapping) else {}
    token = envelope.get("auth_token")
    return Carried(token if isinstance(token, str) else None, own)


def encode(payload: bytes, *, auth_token: str | None = None, context: Mapping[str, Any] | None = None) -> bytes:
    """Serialised RDSS message -> serialised envelope.

    Raises:
        TranslationError: the payload is not JSON, or not an RDSS message (see :func:`to_mosaic`).
    """
    return orjson.dumps(to_mosaic(_load_object(payload), auth_token=auth_token, context=context))


def decode(body: bytes) -> tuple[bytes, Carried]:
    """Serialised envelope -> serialised RDSS message, and what the envelope carried besides.

    Raises:
        TranslationError: not JSON, or not an envelope of an RDSS message.
    """
    envelope = _load_object(body)
    return orjson.dumps(to_rdss(envelope)), carried(envelope)


def _load_object(data: bytes) -> dict[str, Any]:
    """The JSON object serialised in ``data``.

    Raises:
        TranslationError: not JSON, or JSON but not an object.
    """
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as error:
        raise TranslationError(f"not JSON: {error}") from None
    if not isinstance(value, dict):
        raise TranslationError("not a JSON object")
    return value


def _merge(rest: Mapping[str, Any], mapped: list[tuple[str, Any]]) -> dict[str, Any]:
    """``rest`` in its own order, each mapped field put back before the first member the spec
    orders after it (unknown members count as last)."""
    pending = sorted(mapped, key=lambda item: _RANK[item[0]])
    merged: dict[str, Any] = {}
    for name, value in rest.items():
        rank = _RANK.get(name, len(_HEADER_ORDER))
        while pending and _RANK[pending[0][0]] < rank:
            key, mapped_value = pending.pop(0)
            merged[key] = mapped_value
        merged[name] = value
    for key, mapped_value in pending:
        merged[key] = mapped_value
    return merged
