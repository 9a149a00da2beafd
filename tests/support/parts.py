"""Sequences of an exact number of parts, and parts that conflict with them, for the tests of
what becomes of every part (the sequencer, a receiver holding parts, the inline broker)."""

from __future__ import annotations

import copy
import uuid
from typing import Any

import orjson

from rdss.sequences import split
from rdss.workload import Workload


def parts_of(seed: int, count: int) -> list[dict[str, Any]]:
    """The ``count`` parts of a large message (the limit found that splits it so)."""
    whole = Workload(seed).large(30_000)
    size = len(orjson.dumps(whole))
    for limit in range(size // count + 500, size, 500):
        parts = split(whole, limit)
        if len(parts) == count:
            return parts
    raise AssertionError(f"no limit splits {size} bytes into {count} parts")


def other_fragment(part: dict[str, Any], *, same_id: bool = False) -> dict[str, Any]:
    """The part with another fragment of the same length and, unless ``same_id``, a messageId of
    its own: what a producer that split two versions of a message under one sequence sends."""
    other = copy.deepcopy(part)
    other["messageBody"] = part["messageBody"][::-1]
    assert other["messageBody"] != part["messageBody"]
    if not same_id:
        other["messageHeader"]["messageId"] = str(uuid.uuid4())
    return other
