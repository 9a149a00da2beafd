"""Reading AMQP field tables (headers) that any publisher may write: no depth, no value can make
the reader raise - pika's raised RecursionError past ~1,000 levels, or OverflowError on a
timestamp past year 9999, inside its connection's I/O loop, and the consumer group stalled on it."""

from __future__ import annotations

import struct
from typing import Any

import pika.data
from hypothesis import given, settings
from hypothesis import strategies as st

from rdss.gateway.amqp import fieldtables

fieldtables.install()


def length(data: bytes) -> bytes:
    return struct.pack(">I", len(data))


def table(**members: bytes) -> bytes:
    """A field table of raw typed values (each with its type code)."""
    body = b"".join(bytes([len(k)]) + k.encode() + v for k, v in members.items())
    return length(body) + body


def nested(kinds: list[str], leaf: bytes = b"S" + length(b"x") + b"x") -> bytes:
    """A typed value: tables ("F") and arrays ("A") nested as ``kinds`` says, outermost first;
    built from the inside out, without recursion, however deep."""
    value = leaf
    for kind in reversed(kinds):
        if kind == "F":
            inner = b"\x01a" + value
            value = b"F" + length(inner) + inner
        else:
            value = b"A" + length(value) + value
    return value


@settings(max_examples=200, deadline=None)
@given(
    depth=st.one_of(st.integers(0, 130), st.integers(1000, 20_000)),
    kinds=st.lists(st.sampled_from("FA"), min_size=1, max_size=8),
)
def test_any_nesting_reads_down_to_the_limit_and_no_further(depth: int, kinds: list[str]) -> None:
    levels = [kinds[i % len(kinds)] for i in range(depth)]
    headers, _ = fieldtables.decode_table(table(h=nested(levels), after=b"t\x01"), 0)
    assert isinstance(headers, dict)
    assert headers["after"] is True  # what follows the deep member is read
    value = headers["h"]
    for level, kind in enumerate(levels, start=1):  # the top table is level 0, its members level 1
        if level >= fieldtables.MAX_DEPTH:
            assert value == fieldtables.TOO_DEEP
            return
        value = value["a"] if kind == "F" else value[0]
    assert value == "x"


@settings(max_examples=500, deadline=None)
@given(body=st.binary(max_size=200))
def test_any_bytes_in_a_table_read_without_raising(body: bytes) -> None:
    """Unknown type codes, lengths past the end, timestamps no datetime holds: the table is read
    as far as it can be and ends where its length says."""
    headers, end = fieldtables.decode_table(length(body) + body, 0)
    assert isinstance(headers, dict)
    assert end == 4 + len(body)


def test_a_timestamp_past_year_9999_reads_as_text_and_the_table_goes_on() -> None:
    headers, _ = fieldtables.decode_table(table(when=b"T" + struct.pack(">Q", 2**64 - 1), after=b"t\x01"), 0)
    assert headers["when"].startswith("(an AMQP value of type 'T' that cannot be read")
    assert headers["after"] is True


def test_an_unknown_type_ends_its_table_and_says_so() -> None:
    headers, _ = fieldtables.decode_table(table(first=b"t\x01", odd=b"Z\x00\x00", after=b"t\x01"), 0)
    assert headers["first"] is True
    assert "is not AMQP's" in headers[fieldtables.UNKNOWN_TYPE]
    assert "after" not in headers


_VALUES = st.recursive(
    st.one_of(
        st.text(max_size=20),
        st.booleans(),
        st.integers(-(2**63), 2**63 - 1),
        st.none(),
    ),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(min_size=1, max_size=10), inner, max_size=3),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(headers=st.dictionaries(st.text(min_size=1, max_size=10), _VALUES, max_size=5))
def test_what_pika_reads_it_reads_the_same(headers: dict[str, Any]) -> None:
    pieces: list[bytes] = []
    pika.data.encode_table(pieces, headers)
    encoded = b"".join(pieces)
    assert fieldtables._pika_decode_table is not None
    assert fieldtables.decode_table(encoded, 0) == fieldtables._pika_decode_table(encoded, 0)


def test_pika_reads_headers_through_it() -> None:
    """A delivery's content header (BasicProperties) is read through the installed reader."""
    flags = b"".join(pika.BasicProperties(headers={"a": 1}).encode())[:2]  # then the headers table
    decoded = pika.BasicProperties()
    decoded.decode(flags + table(h=nested(["F"] * 3000)))
    assert set(decoded.headers) == {"h"}
