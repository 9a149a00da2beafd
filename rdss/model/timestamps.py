"""RFC 3339 timestamps, as the spec requires them: date, time and zone, always."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:([Zz])|([+-])(\d{2}):(\d{2}))\Z"
)


def parse(text: str) -> datetime:
    """Parse an RFC 3339 date-time into an aware datetime.

    Accepts what RFC 3339 accepts and :func:`datetime.fromisoformat` may not: lower-case ``t`` and
    ``z``, fractions longer than microseconds (truncated) and the leap second ``:60`` (read as
    ``:59.999999``, the last instant Python can represent).

    Raises:
        ValueError: ``text`` is not a complete RFC 3339 date-time.
    """
    match = _RFC3339.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not an RFC 3339 date-time with date, time and zone")
    year, month, day, hour, minute, second = (int(g) for g in match.group(1, 2, 3, 4, 5, 6))
    fraction = match.group(7) or ""
    micro = int((fraction + "000000")[:6])
    leap = second == 60
    if leap:
        second, micro = 59, 999_999
    zone: timezone
    if match.group(8):
        zone = UTC
    else:
        offset = timedelta(hours=int(match.group(10)), minutes=int(match.group(11)))
        zone = timezone(-offset if match.group(9) == "-" else offset)
    return datetime(year, month, day, hour, minute, second, micro, tzinfo=zone)


def epoch_microseconds(text: str) -> int:
    """An RFC 3339 date-time as microseconds since 1970-01-01T00:00:00Z, by arithmetic alone.

    Total over what the schema's ``date-time`` accepts, where :func:`parse` is not: year 0000 (RFC
    3339 allows it; :class:`datetime` starts at year 1), offsets up to +-23:59 that would carry a
    year 1 or 9999 moment past :class:`datetime`'s range, and a leap second (``:60`` counts as one
    second past ``:59``). Fractions beyond microseconds are truncated. For comparing moments (a
    message's expiry against now), never for display.

    Raises:
        ValueError: ``text`` is not shaped as an RFC 3339 date-time with date, time and zone.
    """
    match = _RFC3339.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not an RFC 3339 date-time with date, time and zone")
    year, month, day, hour, minute, second = (int(g) for g in match.group(1, 2, 3, 4, 5, 6))
    micro = int(((match.group(7) or "") + "000000")[:6])
    offset = 0
    if not match.group(8):
        offset = int(match.group(10)) * 3600 + int(match.group(11)) * 60
        if match.group(9) == "-":
            offset = -offset
    seconds = _days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second - offset
    return seconds * 1_000_000 + micro


def microseconds_of(moment: datetime) -> int:
    """An aware datetime as microseconds since the epoch (exact, unlike ``timestamp()``)."""
    if moment.tzinfo is None:
        raise ValueError("timestamps must carry a zone: pass an aware datetime")
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _days_from_civil(year: int, month: int, day: int) -> int:
    """Days from 1970-01-01 to a proleptic Gregorian date, for any year (H. Hinnant's algorithm);
    a day or month out of range is counted on, never refused (the schema judges ranges)."""
    year -= month <= 2
    era = year // 400
    year_of_era = year - era * 400
    day_of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * 146_097 + day_of_era - 719_468


def format(moment: datetime) -> str:  # noqa: A001 - the module's verb, used as timestamps.format
    """Format an aware datetime as RFC 3339 in UTC with milliseconds: ``2017-03-01T13:14:15.000Z``.

    Raises:
        OverflowError: the moment in UTC falls outside :class:`datetime`'s years 1..9999
            (``9999-12-31T23:59:59-14:00``).
    """
    if moment.tzinfo is None:
        raise ValueError("timestamps must carry a zone: pass an aware datetime")
    utc = moment.astimezone(UTC)
    # every field zero-padded by hand: glibc's %Y writes the year 999 as "999", not RFC 3339
    return (
        f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d}T{utc.hour:02d}:{utc.minute:02d}:{utc.second:02d}."
        f"{utc.microsecond // 1000:03d}Z"
    )


def now() -> datetime:
    """The current time, aware, in UTC."""
    return datetime.now(UTC)


def expires_at(header: Mapping[str, Any]) -> float | None:
    """A message header's expirationTimestamp in epoch seconds (None: none, or unreadable),
    year 0000 and leap seconds included."""
    stamp = (header.get("messageTimings") or {}).get("expirationTimestamp")
    if not stamp:
        return None
    try:
        return epoch_microseconds(stamp) / 1e6
    except (TypeError, ValueError):
        return None


def expired(header: Mapping[str, Any], now: datetime) -> bool:
    """Whether a message header's expirationTimestamp had passed at ``now``."""
    moment = expires_at(header)
    return moment is not None and moment <= now.timestamp()
