"""Comparing messages that gained messageHistory hops on the way with what was sent."""

from __future__ import annotations

import copy
from typing import Any

import orjson


def unhopped(message: dict[str, Any] | bytes) -> tuple[dict[str, Any], list[str]]:
    """The message without its messageHistory, and the machineIds of the hops it had."""
    parsed = orjson.loads(message) if isinstance(message, bytes) else copy.deepcopy(message)
    hops = parsed["messageHeader"].pop("messageHistory", [])
    return parsed, [hop["machineId"] for hop in hops]
