"""AMQP field tables (a message's headers) as pika reads them, made total: no header, however
its publisher wrote it, can stop a consumer's connection.

pika decodes a delivery's headers inside its connection's I/O loop, recursively, and lets any
error out of it: a table nested a couple of thousand levels deep (AMQP allows as deep as a frame
holds - tens of thousands - and RabbitMQ stores and delivers it) raised RecursionError, a field
type it does not know or a timestamp ``datetime`` cannot hold raised too. Either way the
connection was torn down, RabbitMQ put the message back at the head of its queue, and the next
connection met it first: the consumer group's queue stalled for good (a classic queue), or until
RabbitMQ's delivery limit dead-lettered it (a quorum queue), with nothing delivered meanwhile.

:func:`install` puts these readers in pika's place (``pika.data.decode_table`` and
``decode_value``, which pika's content header and each other call through the module):

* a table or array nested deeper than :data:`MAX_DEPTH` is skipped whole by its length prefix,
  without recursing, and read as the text :data:`TOO_DEEP`;
* a value pika's reader raises on is read as text saying so (:data:`UNREADABLE`), the table
  going on after it (every scalar type has a known size);
* a field of a type AMQP does not have ends its table: what was read before stays, the rest of
  that table is skipped by its length and one member :data:`UNKNOWN_TYPE` says so.

Whatever else pika reads, it reads as before. The headers a consumer sees are then something
pika can write again (``rdss.gateway.amqp`` copies them onto moved and retried messages).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable
from typing import Any

import pika.data

_log = logging.getLogger(__name__)

#: How deep tables and arrays are read (RabbitMQ's own x-death is 3 levels): far below Python's
#: recursion limit, two frames a level.
MAX_DEPTH = 64
#: What a table or array nested deeper than MAX_DEPTH reads as.
TOO_DEEP = f"(an AMQP table or array nested deeper than {MAX_DEPTH} levels, not read)"
#: What a value pika's reader cannot read (a timestamp past year 9999, a float that is not a number) reads as.
UNREADABLE = "(an AMQP value of type {kind!r} that cannot be read: {error})"
#: The member that ends a table at a field of a type AMQP does not have.
UNKNOWN_TYPE = "x-rdss-unreadable"

#: Bytes after the type code of each scalar field type pika reads (AMQP 0-9-1 and RabbitMQ's errata).
_SIZES = {
    b"t": 1,
    b"b": 1,
    b"B": 1,
    b"U": 2,
    b"u": 2,
    b"s": 2,
    b"I": 4,
    b"i": 4,
    b"f": 4,
    b"L": 8,
    b"l": 8,
    b"d": 8,
    b"T": 8,
    b"D": 5,
    b"V": 0,
}
_LENGTH = struct.Struct(">I")

#: pika's own readers, kept by install(): decode_value reads scalars with its.
_pika_decode_value: Callable[[bytes, int], tuple[Any, int]] | None = None
_pika_decode_table: Callable[[bytes, int], tuple[Any, int]] | None = None


class _UnknownType(Exception):
    """A field of a type whose size is unknown: nothing after it in its table can be found."""


def install() -> None:
    """Read every AMQP field table of this process with :func:`decode_table` (idempotent)."""
    global _pika_decode_value, _pika_decode_table
    if pika.data.decode_table is decode_table:
        return
    _pika_decode_value, _pika_decode_table = pika.data.decode_value, pika.data.decode_table
    pika.data.decode_table = decode_table
    pika.data.decode_value = decode_value


def decode_table(encoded: bytes, offset: int, depth: int = 0) -> tuple[dict[str, Any] | str, int]:
    """A field table at ``offset`` (its length first) and the offset after it; never raises
    for what a table holds (see the module's docstring)."""
    (size,) = _LENGTH.unpack_from(encoded, offset)
    start, limit = offset + 4, offset + 4 + size
    if depth >= MAX_DEPTH:
        return TOO_DEEP, limit
    result: dict[str, Any] = {}
    offset = start
    try:
        while offset < limit:
            key, offset = pika.data.decode_short_string(encoded, offset)
            value, offset = decode_value(encoded, offset, depth + 1)
            result[key] = value
    except (_UnknownType, struct.error, IndexError) as error:
        _log.warning("an AMQP header table could not be read past %d of its %d bytes: %s", offset - start, size, error)
        result[UNKNOWN_TYPE] = f"(the rest of this table, from byte {offset - start}, is not read: {error})"
    return result, limit


def decode_value(encoded: bytes, offset: int, depth: int = 0) -> tuple[Any, int]:
    """A typed field value at ``offset`` (its type code first) and the offset after it."""
    kind = encoded[offset : offset + 1]
    if kind == b"F":
        return decode_table(encoded, offset + 1, depth)
    if kind == b"A":
        (size,) = _LENGTH.unpack_from(encoded, offset + 1)
        start, limit = offset + 5, offset + 5 + size
        if depth >= MAX_DEPTH:
            return TOO_DEEP, limit
        values: list[Any] = []
        offset = start
        try:
            while offset < limit:
                value, offset = decode_value(encoded, offset, depth + 1)
                values.append(value)
        except (_UnknownType, struct.error, IndexError) as error:
            values.append(f"(the rest of this array, from byte {offset - start}, is not read: {error})")
        return values, limit
    if kind in (b"S", b"x"):
        (size,) = _LENGTH.unpack_from(encoded, offset + 1)
        after = offset + 5 + size
    elif kind in _SIZES:
        after = offset + 1 + _SIZES[kind]
    else:
        raise _UnknownType(f"field type {kind!r} is not AMQP's")
    scalar = _pika_decode_value or pika.data.decode_value  # pika's own, for what it reads well
    try:
        value, end = scalar(encoded, offset)
    except Exception as error:  # pika's reading of this one value: the table goes on after it
        _log.warning("an AMQP header value of type %r cannot be read: %s", kind, error)
        return UNREADABLE.format(kind=kind.decode("latin-1"), error=error), after
    return value, end
