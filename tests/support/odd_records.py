"""Issue 21's reproduction: one batch of 30 valid messages and odd records at the calendar's
ends, for every backend's test (the emulator's broker, memory:// and amqp:// receivers).

Each odd record has its expected place: delivered like any valid message, or moved, decorated
with its code, to ``invalid`` or ``error``.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import orjson

from rdss.model import decoration
from rdss.model.workload import Workload

#: Where a record belongs: "metadata" (delivered), or (channel, code) once moved.
Place = str | tuple[str, str]


@dataclass(frozen=True)
class Odd:
    name: str
    payload: bytes
    place: Place
    #: The messageId it is found by (for a record whose id is ambiguous: the one it was built from).
    message_id: str


def _message(seed: int) -> dict[str, Any]:
    kinds = ("MetadataCreate", "MetadataUpdate", "MetadataDelete")
    return Workload(seed).message(kinds[seed % 3], "Event")


def _timed(seed: int, **timings: str) -> dict[str, Any]:
    message = copy.deepcopy(Workload(seed).message("MetadataCreate", "Event"))
    message["messageHeader"]["messageTimings"].update(timings)
    return message


def odd_records(seed: int = 2100) -> list[Odd]:
    """Records a datetime cannot hold, and two that are malformed in other ways."""
    odd: list[tuple[str, dict[str, Any], Place]] = [
        ("expires in year 0000", _timed(seed + 1, expirationTimestamp="0000-01-01T00:00:00Z"), ("error", "GENERR003")),
        (
            "expires in year 0000, +23:59",
            _timed(seed + 2, expirationTimestamp="0000-01-01T00:00:00+23:59"),
            ("error", "GENERR003"),
        ),
        ("published in year 0000", _timed(seed + 3, publishedTimestamp="0000-01-01T00:00:00Z"), "metadata"),
        (
            "a leap second in year 9999",
            _timed(seed + 4, publishedTimestamp="9999-12-31T23:59:60Z", expirationTimestamp="9999-12-31T23:59:60Z"),
            "metadata",
        ),
        (
            "expires at 9999-12-31T23:59:59-23:59",
            _timed(seed + 5, expirationTimestamp="9999-12-31T23:59:59-23:59"),
            "metadata",
        ),
        ("expires in month 13", _timed(seed + 6, expirationTimestamp="0000-13-01T00:00:00Z"), ("invalid", "GENERR004")),
    ]
    body_date = _timed(seed + 7)
    body_date["messageBody"]["objectDate"][0]["dateValue"] = "0000-01-01T00:00:00Z"
    odd.append(("a body date in year 0000", body_date, "metadata"))
    both = _timed(seed + 8, expirationTimestamp="0000-01-01T00:00:00Z")
    both["messageBody"]["objectDate"][0]["dateValue"] = "0000-02-29T23:59:59+23:59"
    odd.append(("header and body in year 0000", both, ("error", "GENERR003")))
    records = [
        Odd(name, orjson.dumps(message), place, message["messageHeader"]["messageId"]) for name, message, place in odd
    ]
    twice = _timed(seed + 9)
    message_id = twice["messageHeader"]["messageId"]
    payload = orjson.dumps(twice).replace(
        f'"messageId":"{message_id}"'.encode(), f'"messageId":"not-a-uuid","messageId":"{message_id}"'.encode()
    )
    records.append(Odd("messageId written twice", payload, ("invalid", "GENERR007"), message_id))
    return records


def batch(seed: int = 2100) -> tuple[list[bytes], list[dict[str, Any]], list[Odd]]:
    """One batch: 30 valid messages with the odd records among them; the valid messages and the
    odd records, to compare with where they went."""
    valid = [_message(seed + 100 + i) for i in range(30)]
    odd = odd_records(seed)
    payloads = [orjson.dumps(m) for m in valid]
    for index, record in enumerate(odd):
        payloads.insert(3 * index + 1, record.payload)
    return payloads, valid, odd


def original(record: bytes) -> bytes:
    """A moved record's payload as it was before decoration; any other record as it is."""
    try:
        return decoration.original(record)
    except (ValueError, KeyError, TypeError, orjson.JSONDecodeError):
        return record


def message_id(record: bytes) -> str | None:
    """The messageId a routed or moved record carries (orjson keeps a repeated member's last)."""
    header = orjson.loads(original(record)).get("messageHeader") or {}
    found = header.get("messageId")
    return found if isinstance(found, str) else None


def error_code(record: bytes) -> str | None:
    code = orjson.loads(record)["messageHeader"].get("errorCode")
    return code if isinstance(code, str) else None


def placed(channels: dict[str, list[bytes]]) -> dict[str, list[Place]]:
    """messageId -> every place a record carrying it was found: a channel's name for a message
    delivered there, (channel, errorCode) for one moved to invalid or error."""
    found: dict[str, list[Place]] = {}
    for channel, records in channels.items():
        for record in records:
            key = message_id(record) or "?"
            place: Place = (channel, error_code(record) or "?") if channel in ("invalid", "error") else channel
            found.setdefault(key, []).append(place)
    return found


def expected(valid: list[dict[str, Any]], odd: list[Odd]) -> dict[str, list[Place]]:
    """Where each record of :func:`batch` belongs, once."""
    places: dict[str, list[Place]] = {m["messageHeader"]["messageId"]: ["metadata"] for m in valid}
    for record in odd:
        places[record.message_id] = [record.place]
    return places
