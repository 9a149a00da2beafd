"""What the OAI-PMH adaptor makes of a repository's odd values, as properties of the pure parts:
a resumption token that comes back after any number of pages is caught in bounded memory, any
``Retry-After``, ``completeListSize`` or ``cursor`` gets a bounded answer or is ignored (never an
exception), and repeated subjects and people are dropped in one pass (counted comparisons, not
a clock). The same cases against a repository on loopback: tests/amqp/test_oai_pmh_protocol.py."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from rdss.adaptors.oai_pmh import Profile, Record, TokenTrail, research_object
from rdss.adaptors.oai_pmh.client import MAX_RETRY_AFTER, _count, _retry_after
from rdss.adaptors.oai_pmh.dublin_core import _unique
from rdss.adaptors.oai_pmh.tokens import WINDOW, Mark

BASE = "https://repository.example.ac.uk/oai"
_PROFILE = Profile()


# -- resumption tokens that loop -----------------------------------------------------------------
def run_trail(tokens: list[str], window: int, resumed: bool) -> tuple[int | None, TokenTrail]:
    """Feed ``tokens`` as the harvest would (the first as the token resumed with, when
    ``resumed``): the page on which one came back, or None."""
    trail = TokenTrail(window)
    rest = tokens
    if resumed:
        trail.resumed_with(tokens[0], "w0")
        rest = tokens[1:]
    for token in rest:
        if trail.seen(token) is not None:
            return trail.pages + 1, trail
        trail.handed_out(token, f"w{trail.pages + 1}")
    return None, trail


@given(
    tail=st.integers(0, 40),
    length=st.integers(1, 60),
    window=st.integers(1, 8) | st.just(WINDOW),
    resumed=st.booleans(),
)
@example(tail=0, length=1, window=WINDOW, resumed=True)  # the very token the request carried
@example(tail=1, length=1, window=WINDOW, resumed=False)
@example(tail=16, length=2, window=1, resumed=False)  # entered just past page 16: caught at page 32
def test_a_cycle_of_any_length_is_caught_in_bounded_memory(tail, length, window, resumed):
    pages_before = tail if resumed else tail + 1  # the page number of the cycle's first token
    bound = 2 * max(pages_before, 1) + length
    # the tokens as handed out: `tail` of them, then a cycle of `length` repeating past the bound
    # (a cycle entered after a milestone page is caught at the next one: enough turns to get there)
    turns = bound // length + 2
    tokens = [f"tail-{n}" for n in range(tail)] + [f"cycle-{n}" for n in range(length)] * turns
    again, trail = run_trail(tokens, window, resumed)
    assert again is not None
    assert again <= bound
    if length <= window:  # within the window: caught the first time it comes back
        assert again == pages_before + length
    assert len(trail) <= window + again.bit_length() + 1


@given(st.lists(st.text(max_size=8), max_size=300, unique=True), st.integers(1, 8))
def test_tokens_that_never_come_back_are_never_a_loop(tokens, window):
    again, trail = run_trail(tokens, window, resumed=False)
    assert again is None
    assert len(trail) <= window + len(tokens).bit_length() + 1


def test_the_mark_is_the_position_saved_with_the_token():
    trail = TokenTrail()
    trail.resumed_with("a", "2026-01-01")
    trail.handed_out("b", "2026-01-02")
    assert trail.seen("a") == Mark(0, "2026-01-01")
    assert trail.seen("b") == Mark(1, "2026-01-02")
    assert trail.seen("c") is None


# -- Retry-After, completeListSize, cursor: any value --------------------------------------------
NOW = datetime.now(UTC)
HTTP_DATES = st.builds(
    lambda seconds: format_datetime(NOW + timedelta(seconds=seconds), usegmt=True), st.integers(-(10**9), 10**9)
)
NUMBERS = st.builds(str, st.integers() | st.integers(-(10**40), 10**40) | st.floats(allow_nan=True))
ODD = st.sampled_from(
    [
        *("10" + "0" * 29, "9" * 5000, "-5", "-0", "1.5", "1e30", " 12 ", "²", "٣", "１２", "12abc", "", "  ", "inf"),
        *("Mon, 01 Jan 99999 00:00:00 GMT", "Wed, 31 Feb 2024 00:00:00 GMT", "Mon, 01 Jan 2000 00:00:00 -0000"),
        *("Fri, 31 Dec 9999 23:59:59 +2359", "Mon, 01 Jan 0001 00:00:00 -2359", "Thu, 01 Jan 1970 00:00:00"),
    ]
)
VALUES = st.text() | NUMBERS | HTTP_DATES | ODD


@given(VALUES)
def test_any_retry_after_is_a_bounded_wait_or_ignored(value):
    wait = _retry_after(value)
    if wait is not None:
        assert math.isfinite(wait)
        assert 0 <= wait <= MAX_RETRY_AFTER
    text = value.strip()
    if text.isascii() and text.isdigit():  # delay-seconds
        assert wait == min(MAX_RETRY_AFTER, float(text))


def test_retry_after_as_seconds_or_an_http_date():
    assert _retry_after("7") == 7.0
    assert _retry_after(str(10**30)) == MAX_RETRY_AFTER
    assert _retry_after("-5") is None
    assert _retry_after("²") is None
    later = _retry_after(format_datetime(datetime.now(UTC) + timedelta(seconds=60), usegmt=True))
    assert later is not None
    assert 55 <= later <= 60
    assert _retry_after("Mon, 01 Jan 2000 00:00:00 -0000") == 0.0  # a date passed, in UTC


@given(VALUES)
def test_any_count_is_a_whole_number_or_ignored(value):
    count = _count(value)
    text = value.strip()
    if text.isascii() and text.isdigit() and len(text) <= 18:
        assert count == int(text)
    else:
        assert count is None


# -- repeats dropped in one pass -----------------------------------------------------------------
class Counted(str):
    """A subject that counts the comparisons made of it (hashes and equality tests)."""

    operations = 0

    def __hash__(self) -> int:
        Counted.operations += 1
        return str.__hash__(self)

    def __eq__(self, other: object) -> bool:
        Counted.operations += 1
        return str.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        Counted.operations += 1
        return str.__ne__(self, other)


def keywords(subjects: list[str]) -> tuple[list[str], int]:
    record = Record("oai:r:1", "2026-01-02", dc={"subject": tuple(subjects)})
    Counted.operations = 0
    body = research_object(record, "00000000-0000-4000-8000-000000000000", base_url=BASE, profile=_PROFILE)
    return body.get("objectKeywords", []), Counted.operations


@settings(max_examples=60)
@given(
    distinct=st.integers(1, 400),
    picks=st.lists(st.integers(0, 10**6), min_size=1, max_size=3000),
)
def test_subjects_with_many_repeats_are_made_unique_in_one_pass(distinct, picks):
    pool = [Counted(f"subject {n}") for n in range(distinct)]
    subjects = [pool[p % distinct] for p in picks]
    unique, operations = keywords(subjects)
    assert unique == list(dict.fromkeys(str(s) for s in subjects))  # first-seen order
    assert operations <= 3 * len(subjects)  # linear: a few per subject, whatever the repeats


def test_a_hundred_thousand_subjects_take_a_few_operations_each():
    pool = [Counted(f"subject {n}") for n in range(1000)]
    small, small_operations = keywords([pool[n % 1000] for n in range(10_000)])
    large, large_operations = keywords([pool[n % 1000] for n in range(100_000)])
    assert small == large == pool
    assert large_operations <= 3 * 100_000
    assert large_operations / small_operations < 11  # ten times the subjects, ten times the work


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner, max_size=3),
    max_leaves=8,
)


@given(st.lists(JSON, max_size=40))
def test_unique_keeps_the_first_of_equal_json_values_in_order(items):
    expected: list[Any] = []
    for item in items:  # the plain definition: compare with every one kept
        if item not in expected:
            expected.append(item)
    assert _unique(items) == expected


def test_equal_people_are_one_person_whatever_their_number():
    record = Record("oai:r:1", "2026-01-02", dc={"creator": ("Lovelace, Ada",) * 50_000 + ("Turing, Alan",)})
    body = research_object(record, "00000000-0000-4000-8000-000000000000", base_url=BASE, profile=_PROFILE)
    names = [role["person"]["personFamilyNames"] for role in body["objectPersonRole"]]
    assert names == ["Lovelace", "Turing"]
