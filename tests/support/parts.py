"""Sequences of an exact number of parts, parts that conflict with them, and the arrivals of a
property: what becomes of every part (the sequencer, a receiver holding parts, the inline broker)."""

from __future__ import annotations

import copy
import functools
import json
import uuid
from typing import Any

import orjson
from hypothesis import strategies as st

from rdss.model.sequences import split
from rdss.model.workload import Workload

#: Totals from a real one to ones no sequence can have.
TOTALS = st.one_of(st.integers(1, 6), st.sampled_from([10_000, 10_001, 2**31, 2**63, 10**30]))

_IDS = uuid.UUID("3f6c2a8e-5b1d-4c7e-9a0f-1e2d3c4b5a69")


@functools.cache
def sized(seed: int, count: int) -> tuple[dict[str, Any], int]:
    """A large message and the limit that splits it into ``count`` parts."""
    whole = Workload(seed).large(30_000)
    size = len(orjson.dumps(whole))
    for limit in range(size // count + 500, size, 500):
        if len(split(whole, limit)) == count:
            return whole, limit
    raise AssertionError(f"no limit splits {size} bytes into {count} parts")


def parts_of(seed: int, count: int) -> list[dict[str, Any]]:
    """The ``count`` parts of a large message."""
    whole, limit = sized(seed, count)
    return split(whole, limit)


def other_fragment(part: dict[str, Any], *, same_id: bool = False) -> dict[str, Any]:
    """The part with another fragment of the same length and, unless ``same_id``, a messageId of
    its own: what a producer that split two versions of a message under one sequence sends."""
    other = copy.deepcopy(part)
    other["messageBody"] = part["messageBody"][::-1]
    assert other["messageBody"] != part["messageBody"]
    if not same_id:
        other["messageHeader"]["messageId"] = str(uuid.uuid4())
    return other


_KINDS = ["none", "none", "again", "reformatted", "fragment", "same-id", "same-fragment", "total", "position"]


@st.composite
def arrivals(draw: st.DrawFn, shapes: tuple[tuple[int, int], ...], base: uuid.UUID = _IDS) -> list[bytes]:
    """Parts of one or two sequences (of ``shapes``: (seed, parts)), in any order: some never
    come, some come twice (the same bytes, or written otherwise), some conflict - another
    fragment under another messageId or under the same, the same fragment under another
    messageId, another total (1 to 10^30), a position of its own. Every messageId is a name-based
    UUID under ``base``: a test that keeps one deployment across examples gives each its own."""

    def new_id() -> str:
        return str(uuid.uuid5(base, str(draw(st.integers(0, 2**32)))))

    payloads: list[bytes] = []
    for seed, count in draw(st.lists(st.sampled_from(shapes), min_size=1, max_size=2, unique=True)):
        whole, limit = sized(seed, count)
        whole = copy.deepcopy(whole)
        whole["messageHeader"]["messageId"] = new_id()
        parts = split(whole, limit)
        for part in parts:
            if draw(st.integers(0, 5)) > 0:  # now and then a part never comes
                payloads.append(orjson.dumps(part))
            kind = draw(st.sampled_from(_KINDS))
            if kind == "none":
                continue
            copied = copy.deepcopy(part)
            header = copied["messageHeader"]
            if kind not in ("again", "reformatted", "same-id"):
                header["messageId"] = new_id()
            if kind in ("fragment", "same-id"):
                copied["messageBody"] = draw(st.text(min_size=1, max_size=30))
            elif kind == "total":
                header["messageSequence"]["total"] = draw(TOTALS)
                header["messageSequence"]["position"] = min(header["messageSequence"]["position"], 3)
            elif kind == "position":
                header["messageSequence"]["position"] = draw(st.integers(1, len(parts) + 1))
            # json writes integers beyond 64 bits, and other bytes than orjson's for the same part
            payloads.append(orjson.dumps(copied) if kind == "again" else json.dumps(copied).encode())
    return draw(st.permutations(payloads))
