"""Building RDSS messages: new ones, replies, history entries, and decoration for the
invalid and error channels.

Messages are plain dicts in the spec's JSON shape; :func:`serialise` gives their compact
UTF-8 form, the form whose size the 1,000,000-byte limit counts.
"""

from __future__ import annotations

import socket
import uuid
from datetime import datetime, timedelta
from typing import Any

import orjson

from rdss import SPEC_VERSION, __version__
from rdss.model import schemas, timestamps
from rdss.model.errors import ErrorCode

#: The generator named in messages this package builds unless told otherwise.
DEFAULT_GENERATOR = f"rdss-messaging-{__version__}"

Message = dict[str, Any]


def new_id() -> str:
    """A fresh message, sequence or object identifier (UUID version 4)."""
    return str(uuid.uuid4())


def new_message(
    message_type: str,
    body: Any,
    *,
    message_class: str = "Event",
    generator: str = DEFAULT_GENERATOR,
    correlation_id: str | None = None,
    return_address: str | None = None,
    expires_in: timedelta | None = None,
    now: datetime | None = None,
) -> Message:
    """A new whole message: fresh messageId and sequence, published now, version 3.0.2.

    Args:
        message_type: one of the spec's types, e.g. ``MetadataCreate``.
        body: the messageBody.
        message_class: ``Command``, ``Event`` or ``Document``.
        generator: the application that generated the message (name and version).
        correlation_id: the messageId of the request this message answers.
        return_address: where the receiver should send its reply (a channel name).
        expires_in: sets expirationTimestamp that long after publication.
        now: the publication time (default: now).
    """
    published = now or timestamps.now()
    timings: dict[str, str] = {"publishedTimestamp": timestamps.format(published)}
    if expires_in is not None:
        timings["expirationTimestamp"] = timestamps.format(published + expires_in)
    header: dict[str, Any] = {"messageId": new_id()}
    if correlation_id is not None:
        header["correlationId"] = correlation_id
    header["messageClass"] = message_class
    header["messageType"] = message_type
    if return_address is not None:
        header["returnAddress"] = return_address
    header["messageTimings"] = timings
    header["messageSequence"] = {"sequence": new_id(), "position": 1, "total": 1}
    header["version"] = SPEC_VERSION
    header["generator"] = generator
    return {"messageHeader": header, "messageBody": body}


def reply(
    request: Message,
    body: Any,
    *,
    message_class: str = "Document",
    generator: str = DEFAULT_GENERATOR,
    now: datetime | None = None,
) -> Message:
    """The reply to ``request``: same messageType, correlationId = the request's messageId.

    The reply travels to the request's returnAddress; that routing is the broker's job, so the
    reply itself carries no returnAddress. A 4.0.0 request is answered in 4.0.0 (its version and
    tenantJiscID); ``body`` is then the caller's to give in 4.0.0's shape.
    """
    header = request["messageHeader"]
    answer = new_message(
        header["messageType"],
        body,
        message_class=message_class,
        generator=generator,
        correlation_id=header["messageId"],
        now=now,
    )
    if schemas.for_version(header.get("version")) is not schemas.V3:  # answered in the version asked in
        answer["messageHeader"]["version"] = header["version"]
        if "tenantJiscID" in header:
            answer["messageHeader"]["tenantJiscID"] = header["tenantJiscID"]
    return answer


def failure_reply(
    request: Message,
    error_code: str,
    error_description: str,
    *,
    generator: str = DEFAULT_GENERATOR,
    now: datetime | None = None,
) -> Message:
    """The reply saying ``request`` could not be answered: a Document with the request's
    messageType, correlationId = its messageId, ``errorCode`` and ``errorDescription`` in the
    header, and the request's body, so it says what could not be found (the classifier checks a
    failure reply's body as its request's).
    """
    if not error_code or not error_description:
        raise ValueError("a failure reply needs an errorCode and an errorDescription")
    message = reply(request, request.get("messageBody"), generator=generator, now=now)
    message["messageHeader"]["errorCode"] = str(error_code)
    message["messageHeader"]["errorDescription"] = error_description
    return message


def append_history(
    message: Message,
    *,
    machine_id: str | None = None,
    machine_address: str | None = None,
    now: datetime | None = None,
) -> Message:
    """Record a hop in messageHistory (in place) and return the message.

    Defaults name this machine: its host name as machineId and machineAddress.
    """
    host = socket.gethostname() or "localhost"
    entry = {
        "machineId": machine_id or host,
        "machineAddress": machine_address or host,
        "timestamp": timestamps.format(now or timestamps.now()),
    }
    message["messageHeader"].setdefault("messageHistory", []).append(entry)
    return message


def serialise(message: Message) -> bytes:
    """The compact UTF-8 JSON form of a message."""
    return orjson.dumps(message)


__all__ = [
    "DEFAULT_GENERATOR",
    "ErrorCode",
    "Message",
    "append_history",
    "failure_reply",
    "new_id",
    "new_message",
    "reply",
    "serialise",
]
