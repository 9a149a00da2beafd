"""Reading a delivery's AMQP headers, whoever wrote them, and writing them on a copy again.

A header is anything its publisher chose: the counts this backend keeps (``x-rdss-attempts``,
RabbitMQ's ``x-delivery-count``), the key, the envelope, the auth token and context travel in
headers a producer can set too, with any AMQP type - text, bytes, a negative or 64-bit number, a
double, a decimal, a timestamp, a nested table or array. Nothing here raises for a value: a
count that is not one is counted as no attempt at all (and logged), a text that is not one is
absent, so one message's header never stops its queue.

A copy of a delivery (through a delay tier, to ``dead_letter``, to ``invalid`` or ``error``)
carries its headers on; a value pika cannot encode again (a double, which pika reads but does not
write; a number beyond 64 bits) travels as its text, so the copy is published rather than left
behind its queue.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import pika.data

from rdss.host.display import shorten

_log = logging.getLogger(__name__)

#: The largest count read from a header: what a signed 32-bit AMQP integer holds (this backend
#: writes counts of a few dozen). Anything larger was not written as a count.
MAX_COUNT = 2**31 - 1


def count(value: Any) -> int | None:
    """A count from a header's value: a whole number from 0 to :data:`MAX_COUNT`, else None."""
    # pika reads a 64-bit field as its own subclass of int; a bool is an int too, and not a count
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT:
        return int(value)
    return None


def counted(headers: Mapping[str, Any], name: str, *, queue: str = "") -> int:
    """The count a header holds, or 0 when it is absent or not a count (logged: the message is
    counted as on its first attempt and goes on, never stalls its queue)."""
    if name not in headers or headers[name] is None:
        return 0
    value = headers[name]
    found = count(value)
    if found is None:
        _log.warning(
            "%s: header %s=%s is not a count (a whole number from 0 to %d): counted as 0",
            queue or "a delivery",
            name,
            shorten(repr(value), 80),
            MAX_COUNT,
        )
        return 0
    return found


def text(value: Any) -> str | None:
    """A header's value as text: a string, or bytes that are UTF-8; None for anything else."""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray):
        try:
            return bytes(value).decode()
        except UnicodeDecodeError:
            return None
    return None


def writable(headers: Mapping[str, Any]) -> dict[str, Any]:
    """``headers`` as pika can encode them again: a value it cannot (a double, a number beyond
    64 bits, anything inside a table or array that is one) becomes its ``repr``."""
    return {str(name): _writable(value) for name, value in headers.items()}


def _writable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(name): _writable(inner) for name, inner in value.items()}
    if isinstance(value, list):
        return [_writable(inner) for inner in value]
    try:
        pika.data.encode_value([], value)
    except Exception:  # unsupported types, struct.error past 64 bits: the value travels as text
        return repr(value)
    return value
