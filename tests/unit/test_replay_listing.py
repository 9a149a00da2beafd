"""The archive listing replay (and trace) read: a window is walked through the hour partitions that
exist, not counted out hour by hour. For any window - the year 1 to 9999 included - it lists
exactly the objects a brute-force filter of every key finds, in the order listing each hour did;
a window of years over an archive of one day costs a handful of ListObjectsV2 calls; a stop
request is heard between two calls."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from moto import mock_aws

from rdss.archive import entries as archive
from rdss.archive.listing import ArchiveListing, Stopped, hour_prefixes

BUCKETS = {"audit": "audit-bucket", "errors": "errors-bucket"}
BASES = {"audit": ["audit/"], "errors": ["errors/invalid/", "errors/error/"]}
FIRST = datetime(1, 1, 1, tzinfo=UTC)
LAST = datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)


class S3:
    """ListObjectsV2 as S3 answers it (Prefix, Delimiter, StartAfter, pages of ``page`` keys and
    common prefixes), over keys in memory, counting the calls."""

    def __init__(self, keys: dict[str, list[str]], page: int = 3, limit: int = 1_000) -> None:
        self.keys = {bucket: sorted(set(listed)) for bucket, listed in keys.items()}
        self.page = page
        self.limit = limit
        self.calls = 0

    def get_paginator(self, name: str) -> Any:
        assert name == "list_objects_v2"
        return self

    def paginate(self, **request: Any) -> Iterator[dict[str, Any]]:
        token = None
        while True:
            page = self.list_objects_v2(**request, **({"ContinuationToken": token} if token else {}))
            yield page
            token = page.get("NextContinuationToken")
            if not token:
                return

    def list_objects_v2(
        self,
        Bucket: str,  # boto3's names
        Prefix: str = "",
        Delimiter: str | None = None,
        StartAfter: str = "",
        ContinuationToken: str | None = None,
    ) -> dict[str, Any]:
        self.calls += 1
        if self.calls > self.limit:
            raise AssertionError(f"more than {self.limit} ListObjectsV2 calls")
        found: dict[str, bool] = {}  # key or common prefix -> is a common prefix
        for key in self.keys.get(Bucket, []):
            if not key.startswith(Prefix) or key <= StartAfter:
                continue
            rest = key[len(Prefix) :]
            if Delimiter and Delimiter in rest:
                found[Prefix + rest[: rest.index(Delimiter) + 1]] = True
            else:
                found[key] = False
        ordered = sorted(found)
        start = int(ContinuationToken or 0)
        chunk = ordered[start : start + self.page]
        page: dict[str, Any] = {
            "Contents": [{"Key": k, "LastModified": datetime(2026, 1, 1, tzinfo=UTC)} for k in chunk if not found[k]],
            "CommonPrefixes": [{"Prefix": k} for k in chunk if found[k]],
        }
        if start + self.page < len(ordered):
            page["NextContinuationToken"] = str(start + self.page)
        return page


def brute_force(keys: dict[str, list[str]], kind: str, start: datetime, end: datetime) -> list[str]:
    """Every key of ``kind``'s bucket under an hour prefix of [start's hour, end], as listing each
    hour of the window would give them: by hour, the errors archive's invalid before its error,
    then in key order."""
    first = start.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    chosen = []
    for key in keys[BUCKETS[kind]]:
        for order, base in enumerate(BASES[kind]):
            try:
                hour = archive.archived_at(key) if key.startswith(base) else None
            except ValueError:  # month=02/day=30: no hour
                continue
            if hour is not None and key.startswith(archive.hour_prefix(base, hour)) and first <= hour <= end:
                chosen.append((hour, order, key))
    return [key for _, _, key in sorted(set(chosen))]


def listed(s3: Any, kind: str, start: datetime, end: datetime) -> list[str]:
    return [key for _, _, key, _ in ArchiveListing(s3, BUCKETS).objects((start, end), (kind,))]


moments = st.datetimes(
    min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59), timezones=st.just(UTC)
).map(lambda moment: moment.astimezone(UTC))
# hours the archive holds: most near each other (the windows meet them), a few anywhere
near = st.datetimes(min_value=datetime(2025, 12, 30), max_value=datetime(2026, 1, 2), timezones=st.just(UTC))
hours = st.one_of(near, near, near, moments)
#: keys no hour prefix names: a listing of the window must pass them over
JUNK = [
    "audit/year=2026/month=1/day=01/hour=00/short-month.gz",
    "audit/year=02026/month=01/day=01/hour=00/long-year.gz",
    "audit/year=2026/month=01/day=01/hour=0/short-hour.gz",
    "audit/year=2026/month=01/day=01/hour=00x/odd.gz",
    "audit/year=2026/month=02/day=30/hour=00/no-such-day.gz",
    "audit/year=2026/month=01/day=01/hour=24/no-such-hour.gz",
    "audit/year=2026/month=01/day=01/hour=05",
    "audit/year=2026/month=01/day=01/notes.txt",
    "audit/year=2026/readme",
    "audit/elsewhere/x.gz",
    "errors/year=2026/month=01/day=01/hour=00/no-channel.gz",
    "errors/invalid/year=2026/month=01/day=01/hour=00/",
]


def archive_of(moments_held: list[datetime], names: list[str]) -> dict[str, list[str]]:
    keys: dict[str, list[str]] = {bucket: [] for bucket in BUCKETS.values()}
    for index, moment in enumerate(moments_held):
        name = names[index % len(names)]
        for kind, bases in BASES.items():
            for base in bases:
                keys[BUCKETS[kind]].append(archive.hour_prefix(base, moment) + name)
                keys[BUCKETS[kind]].append(archive.hour_prefix(base, moment) + "deeper/" + name)
    keys[BUCKETS["audit"]].extend(k for k in JUNK if k.startswith("audit/"))
    keys[BUCKETS["errors"]].extend(k for k in JUNK if k.startswith("errors/"))
    return keys


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    held=st.lists(hours, max_size=25),
    names=st.lists(st.sampled_from(["a.gz", "b.gz", "z.gz", "0.gz", "A.gz"]), min_size=1, max_size=3),
    ends=st.tuples(st.one_of(moments, near), st.one_of(moments, near)),
    kind=st.sampled_from(["audit", "errors"]),
)
def test_any_window_lists_exactly_the_keys_a_brute_force_filter_finds(
    held: list[datetime], names: list[str], ends: tuple[datetime, datetime], kind: str
):
    keys = archive_of(held, names)
    start, end = min(ends), max(ends)
    s3 = S3(keys)
    assert listed(s3, kind, start, end) == brute_force(keys, kind, start, end)


@pytest.mark.parametrize(
    ("start", "end"),
    [
        (FIRST, LAST),
        (FIRST, datetime(2026, 1, 1, 0, 30, tzinfo=UTC)),
        (datetime(2026, 1, 1, 0, 59, 59, tzinfo=UTC), LAST),
        (datetime(2025, 12, 31, 23, 0, tzinfo=UTC), datetime(2026, 1, 1, 1, 0, tzinfo=UTC)),
        (datetime(2026, 1, 1, 5, 0, tzinfo=UTC), datetime(2026, 1, 1, 5, 0, tzinfo=UTC)),
        (datetime(2026, 1, 1, 6, tzinfo=UTC), datetime(2026, 1, 1, 5, tzinfo=UTC)),  # no window: nothing
    ],
)
def test_the_edges_of_the_calendar_and_of_a_day(start: datetime, end: datetime):
    held = [FIRST, LAST, datetime(2025, 12, 31, 23, tzinfo=UTC), *(datetime(2026, 1, 1, h, tzinfo=UTC) for h in (0, 5))]
    keys = archive_of(held, ["x.gz"])
    for kind in ("audit", "errors"):
        assert listed(S3(keys), kind, start, end) == brute_force(keys, kind, start, end)
    assert listed(S3(keys), "audit", FIRST, LAST)[0] == "audit/year=0001/month=01/day=01/hour=00/deeper/x.gz"


def old_listing(s3: Any, kind: str, start: datetime, end: datetime) -> list[str]:
    """What was listed before: each hour prefix of the window, one listing each."""
    listing = ArchiveListing(s3, BUCKETS)
    base = "audit/" if kind == "audit" else "errors/"
    return [
        key
        for prefix in hour_prefixes(base, start, end, errors=kind == "errors")
        for key, _ in listing.keys(BUCKETS[kind], prefix)
    ]


@settings(max_examples=60, deadline=None)
@given(
    held=st.lists(near, max_size=40),
    start=near,
    span=st.integers(min_value=0, max_value=72 * 60),
    kind=st.sampled_from(["audit", "errors"]),
)
def test_a_window_of_hours_or_days_lists_what_listing_each_hour_did(
    held: list[datetime], start: datetime, span: int, kind: str
):
    keys = archive_of(held, ["a.gz", "b.gz"])
    end = start + timedelta(minutes=span)
    assert listed(S3(keys), kind, start, end) == old_listing(S3(keys), kind, start, end)


@pytest.fixture
def moto_s3() -> Iterator[Any]:
    with mock_aws():
        s3 = boto3.client("s3", region_name="eu-west-2")
        for bucket in BUCKETS.values():
            s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": "eu-west-2"})
        yield s3


def count_calls(s3: Any, limit: int) -> list[str]:
    """The S3 calls ``s3`` makes from now on; the one past ``limit`` fails the test (as the
    listing of every hour of a window of centuries would, long before it ended)."""
    calls: list[str] = []

    def counted(model: Any, **_: Any) -> None:
        calls.append(model.name)
        assert len(calls) <= limit, f"more than {limit} S3 calls"

    s3.meta.events.register("before-call.s3", counted)
    return calls


def test_a_window_of_years_over_an_archive_of_one_day_is_a_handful_of_calls(moto_s3: Any):
    day = datetime(2026, 11, 20, tzinfo=UTC)
    for hour in range(24):
        for name in ("a.gz", "b.gz"):
            key = archive.hour_prefix("audit/", day + timedelta(hours=hour)) + name
            moto_s3.put_object(Bucket=BUCKETS["audit"], Key=key, Body=b"")
    moto_s3.put_object(Bucket=BUCKETS["errors"], Key=archive.hour_prefix("errors/error/", day) + "e.gz", Body=b"")
    calls = count_calls(moto_s3, limit=20)
    # thirty years (listing each hour: 263,000 calls), then every hour a window can name
    for start, end in ((datetime(2000, 1, 1, tzinfo=UTC), datetime(2030, 1, 1, tzinfo=UTC)), (FIRST, LAST)):
        audit = listed(moto_s3, "audit", start, end)
        assert len(audit) == 48
        assert audit == sorted(audit)
        assert calls == ["ListObjectsV2"] * 4  # years, months, days, then the day's objects
        calls.clear()
    assert listed(moto_s3, "errors", FIRST, LAST) == [archive.hour_prefix("errors/error/", day) + "e.gz"]
    # invalid/: nothing at all (one call); error/: years, months, days, the day
    assert len(calls) == 5
    calls.clear()
    # one hour: its own listing, as before
    assert len(listed(moto_s3, "audit", day, day + timedelta(minutes=30))) == 2
    assert len(calls) == 1


def test_a_stop_request_is_heard_between_two_calls():
    keys = archive_of([datetime(2026, 1, 1, h, tzinfo=UTC) for h in range(24)], ["a.gz"])
    s3 = S3(keys, page=1)
    asked = iter([False, False, True])
    listing = ArchiveListing(s3, BUCKETS)
    with pytest.raises(Stopped):
        list(listing.objects((FIRST, LAST), ("audit",), stop=lambda: next(asked)))
    assert s3.calls == 2
