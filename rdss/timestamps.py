"""RFC 3339 timestamps, as the spec requires them: date, time and zone, always."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

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


def format(moment: datetime) -> str:  # noqa: A001 - the module's verb, used as timestamps.format
    """Format an aware datetime as RFC 3339 in UTC with milliseconds: ``2017-03-01T13:14:15.000Z``."""
    if moment.tzinfo is None:
        raise ValueError("timestamps must carry a zone: pass an aware datetime")
    utc = moment.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def now() -> datetime:
    """The current time, aware, in UTC."""
    return datetime.now(UTC)
