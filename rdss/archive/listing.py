"""The archive in S3 by hour: the objects under each hour prefix of a time window, and their
entries (read by :func:`rdss.archive.entries.read`). ``rdss trace`` and ``rdss replay`` both read
the archive through here: one listing, one reader.

A window is walked, not counted out: the hour partitions (``year=``, ``month=``, ``day=``,
``hour=``) are listed level by level with ``Delimiter="/"`` and only those that exist and meet the
window are entered. A window of years over an archive of one day is then a handful of
ListObjectsV2 calls, not one per hour of the window (millions from the year 1). A level the window
leaves one value to (the year of a window within one year) is not listed at all: a window of a
few hours costs what listing each of its hours did.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, NamedTuple

from botocore.exceptions import ClientError

from rdss.archive import entries as archive_entries

if TYPE_CHECKING:
    from rdss.deployment.topology import Deployment

#: The archives and the prefix each is written under.
ARCHIVES = (("audit", "audit/"), ("errors", "errors/"))
#: The errors archive's channels, each its own tree of hours under the archive's prefix, in the
#: order an hour's objects are listed.
ERROR_CHANNELS = ("invalid", "error")


class Stopped(Exception):
    """The caller asked a listing to stop (a signal, a cancel): what it listed so far stands."""


class _Level(NamedTuple):
    """One hour partition: its name, its digits and the values it can take."""

    name: str
    width: int
    low: int
    high: int

    def segment(self, value: int) -> str:
        """``name=VALUE/``, zero-padded as :func:`rdss.archive.entries.hour_prefix` writes it."""
        return f"{self.name}={value:0{self.width}d}/"


#: The partitions of an hour prefix, outermost first.
HOUR = _Level("hour", 2, 0, 23)
LEVELS = (_Level("year", 4, 1, 9999), _Level("month", 2, 1, 12), _Level("day", 2, 1, 31), HOUR)


@dataclass(frozen=True)
class Archived:
    """One archive entry, and where it lies."""

    #: ``audit`` or ``errors``
    archive: str
    bucket: str
    key: str
    #: When its object was written.
    written: datetime | None
    #: Its place in the object (1: the first entry).
    line: int
    entry: archive_entries.Entry


def _never() -> bool:
    return False


class ArchiveListing:
    """A deployment's archives (``audit`` and ``errors``: their bucket names) read by hour.

    ``stop`` (every method that calls S3 takes one) is asked before each call: once it is true
    the listing raises :class:`Stopped`, so a caller's stop request is heard between two calls,
    not only when the listing is done."""

    def __init__(self, s3: Any, buckets: Mapping[str, str]) -> None:
        self.s3 = s3
        self.buckets = dict(buckets)

    @classmethod
    def of(cls, deployment: Deployment, s3: Any) -> ArchiveListing:
        """``deployment``'s archives, in the buckets it names (``Deployment.bucket``: the names
        CloudFormation gave them where the caller read those, else ``rdss-<env>-audit``...)."""
        return cls(s3, {kind: deployment.bucket(kind) for kind, _ in ARCHIVES})

    def _pages(self, stop: Callable[[], bool], **request: Any) -> Iterator[dict[str, Any]]:
        """ListObjectsV2's pages for ``request``, ``stop`` asked before each."""
        pages = iter(self.s3.get_paginator("list_objects_v2").paginate(**request))
        while True:
            if stop():
                raise Stopped
            page = next(pages, None)
            if page is None:
                return
            yield page

    def keys(self, bucket: str, prefix: str, *, stop: Callable[[], bool] = _never) -> list[tuple[str, datetime | None]]:
        """The objects under one hour prefix, in key order, and when each was written (none when
        S3 refuses the listing).

        Raises:
            Stopped: ``stop`` said so.
        """
        keys: list[tuple[str, datetime | None]] = []
        try:
            for page in self._pages(stop, Bucket=bucket, Prefix=prefix):
                for entry in page.get("Contents", []):
                    written = entry.get("LastModified")
                    keys.append((entry["Key"], written.astimezone(UTC) if isinstance(written, datetime) else None))
        except ClientError:
            return []
        return keys

    def hours(
        self, bucket: str, base: str, start: datetime, end: datetime, *, stop: Callable[[], bool] = _never
    ) -> Iterator[tuple[datetime, list[tuple[str, datetime | None]]]]:
        """(hour, its objects as :meth:`keys` gives them) of each hour under ``base`` from
        ``start``'s to ``end``'s that holds objects in ``bucket``, oldest first.

        Raises:
            Stopped: ``stop`` said so.
        """
        first, last = _fields(start), _fields(end)
        if first is None or last is None or first > last:
            return
        yield from self._walk(bucket, base, (), first, last, stop)

    def _walk(
        self,
        bucket: str,
        prefix: str,
        path: tuple[int, ...],
        first: tuple[int, ...],
        last: tuple[int, ...],
        stop: Callable[[], bool],
    ) -> Iterator[tuple[datetime, list[tuple[str, datetime | None]]]]:
        depth = len(path)
        level = LEVELS[depth]
        # the window's bounds at this level: its own where the path runs along its edge
        low = first[depth] if path == first[:depth] else level.low
        high = last[depth] if path == last[:depth] else level.high
        if level is HOUR:
            yield from self._day(bucket, prefix, path, low, high, stop)
            return
        if low == high:
            values = [low]  # one value can be there: no need to ask which are
        else:
            values = sorted(v for v in self._children(bucket, prefix, level, stop) if low <= v <= high)
        for value in values:
            if level.name == "day" and not _a_date((*path, value)):
                continue  # day=31 under month=02: no hour of any window is there
            yield from self._walk(bucket, prefix + level.segment(value), (*path, value), first, last, stop)

    def _day(
        self, bucket: str, prefix: str, day: tuple[int, ...], low: int, high: int, stop: Callable[[], bool]
    ) -> Iterator[tuple[datetime, list[tuple[str, datetime | None]]]]:
        """The hours ``low`` to ``high`` of one day (``prefix``), each with its objects. One hour
        is listed as itself; more are one listing of the day from the first (StartAfter), cut
        short past the last: its pages, not one call per hour."""
        year, month, date = day
        if low == high:
            keys = self.keys(bucket, prefix + HOUR.segment(low), stop=stop)
            if keys:
                yield datetime(year, month, date, low, tzinfo=UTC), keys
            return
        listed = self._day_objects(bucket, prefix, low, high, stop)
        for hour, found in itertools.groupby(listed, key=lambda item: item[0]):
            yield datetime(year, month, date, hour, tzinfo=UTC), [(key, written) for _, key, written in found]

    def _day_objects(
        self, bucket: str, prefix: str, low: int, high: int, stop: Callable[[], bool]
    ) -> Iterator[tuple[int, str, datetime | None]]:
        """(hour, key, written) of the objects of one day's hours ``low`` to ``high``, in key order."""
        try:
            for page in self._pages(stop, Bucket=bucket, Prefix=prefix, StartAfter=prefix + HOUR.segment(low)[:-1]):
                for entry in page.get("Contents", []):
                    key = str(entry["Key"])
                    hour = _value(HOUR, key[len(prefix) : key.find("/", len(prefix)) + 1])
                    if hour is None or hour < low:
                        continue  # not under a prefix an hour is written as
                    if hour > high:
                        return  # keys come in order: every later hour is past the window too
                    written = entry.get("LastModified")
                    yield hour, key, written.astimezone(UTC) if isinstance(written, datetime) else None
        except ClientError:
            return

    def _children(self, bucket: str, prefix: str, level: _Level, stop: Callable[[], bool]) -> list[int]:
        """The values of ``level`` under ``prefix``: its partitions as written (zero-padded), any
        other name passed over as an hour prefix never names it."""
        values: list[int] = []
        try:
            for page in self._pages(stop, Bucket=bucket, Prefix=prefix, Delimiter="/"):
                for common in page.get("CommonPrefixes", []):
                    value = _value(level, str(common.get("Prefix", ""))[len(prefix) :])
                    if value is not None:
                        values.append(value)
        except ClientError:
            return []
        return values

    def objects(
        self,
        window: tuple[datetime, datetime],
        archives: Sequence[str] = ("audit", "errors"),
        *,
        stop: Callable[[], bool] = _never,
    ) -> Iterator[tuple[str, str, str, datetime | None]]:
        """(archive, bucket, key, written) of every object under the hour prefixes of ``window``:
        hour by hour, an hour's objects in key order (the errors archive's: invalid, then error).

        Raises:
            Stopped: ``stop`` said so.
        """
        for kind, base in ARCHIVES:
            if kind not in archives:
                continue
            bucket = self.buckets[kind]
            bases = [f"{base}{channel}/" for channel in ERROR_CHANNELS] if kind == "errors" else [base]
            walks = [self.hours(bucket, b, *window, stop=stop) for b in bases]
            # each walk is oldest first: merged by hour (stable: invalid before error in an hour)
            for _, keys in heapq.merge(*walks, key=lambda found: found[0]):
                for key, written in keys:
                    yield kind, bucket, key, written

    def read(self, bucket: str, key: str) -> list[archive_entries.Entry]:
        """One object's entries.

        Raises:
            ClientError, OSError, EOFError: it cannot be read.
        """
        return archive_entries.read(self.s3.get_object(Bucket=bucket, Key=key)["Body"].read())

    def entries(
        self,
        window: tuple[datetime, datetime],
        archives: Sequence[str] = ("audit", "errors"),
        *,
        stop: Callable[[], bool] = _never,
    ) -> Iterator[Archived]:
        """Every entry of the archives under the hour prefixes of ``window``; an object that
        cannot be read is passed over (a reader shows what can be read).

        Raises:
            Stopped: ``stop`` said so.
        """
        for kind, bucket, key, written in self.objects(window, archives, stop=stop):
            if stop():
                raise Stopped
            try:
                entries = self.read(bucket, key)
            except (ClientError, OSError, EOFError):
                continue
            for number, entry in enumerate(entries, 1):
                yield Archived(kind, bucket, key, written, number, entry)


def _value(level: _Level, segment: str) -> int | None:
    """The value ``segment`` (``name=VALUE/``) gives ``level``; None unless it is written as an
    hour prefix writes it (``month=3/`` is no month: no hour prefix is under it)."""
    name, _, value = segment[:-1].partition("=")
    if name != level.name or not (value.isascii() and value.isdigit()) or segment != level.segment(int(value)):
        return None
    return int(value)


def _fields(moment: datetime) -> tuple[int, int, int, int] | None:
    """(year, month, day, hour) of ``moment`` in UTC; None when UTC has no such hour (the year 1
    at a positive offset)."""
    try:
        utc = moment.astimezone(UTC)
    except OverflowError:
        return None
    return utc.year, utc.month, utc.day, utc.hour


def _a_date(fields: tuple[int, ...]) -> bool:
    """Whether (year, month, day) is a day of the calendar."""
    year, month, day = fields
    try:
        datetime(year, month, day)
    except ValueError:
        return False
    return True


def hour_prefixes(base: str, start: datetime, end: datetime, *, errors: bool) -> list[str]:
    """Every hour prefix from ``start`` to ``end``, whether it exists or not (for errors: under
    invalid/ and error/): one per hour of the window, so only for a window of hours or days."""
    bases = [f"{base}{channel}/" for channel in ERROR_CHANNELS] if errors else [base]
    hour = start.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    prefixes: list[str] = []
    while hour <= end:
        prefixes.extend(archive_entries.hour_prefix(b, hour) for b in bases)
        hour += timedelta(hours=1)
    return prefixes
