"""The OAI-PMH adaptor against what a hostile run found: datestamps outside what Python holds,
a stop during a wait, a profile, tenant or state file of the wrong shape, a list without end, a
message over 1 MB. Each bad input is one verdict - a per-record one, or one line and an exit
code - never a traceback, never a run without end, and nothing lost."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from rdss.adaptors.oai_pmh import OaiPmhAdaptor, OaiPmhClient, Profile
from rdss.adaptors.oai_pmh.adaptor import HarvestStats
from rdss.adaptors.oai_pmh.client import Page, Record
from rdss.adaptors.oai_pmh.dublin_core import _date, moment
from rdss.model import timestamps
from rdss.model.messages import Message
from rdss.model.retry import Backoff
from tests.support.oai_pmh_server import OaiPmhServer
from tests.support.oai_pmh_server import Record as Item

PROFILE = Profile(organisation_name="University of Northshire", organisation_jisc_id=1234, licence="CC-BY-4.0")


def item(number: int, datestamp: str) -> Item:
    dc = {"title": [f"Cores of site {number}"], "creator": ["Lovelace, Ada"], "type": ["Dataset"]}
    return Item(f"oai:repository.example.ac.uk:{number}", datestamp, dc)


class Outbox:
    """The adaptor's publish function: keeps what it is given."""

    def __init__(self) -> None:
        self.sent: list[Message] = []

    def __call__(self, messages: list[Message]) -> None:
        self.sent.extend(messages)


@pytest.fixture
def repository() -> Iterator[OaiPmhServer]:
    server = OaiPmhServer([item(n, f"2026-01-0{1 + n % 5}T00:00:00Z") for n in range(5)], page_size=10)
    yield server
    server.stop()


def harvester(server: OaiPmhServer, outbox: Outbox, state: Path, **options: Any) -> OaiPmhAdaptor:
    client = OaiPmhClient(server.url, backoff=Backoff(max_retries=0))
    return OaiPmhAdaptor(client, outbox, state, profile=PROFILE, **options)


# -- D2: datestamps outside the years datetime holds -----------------------------------------------
@pytest.mark.parametrize(
    ("moment_", "text"),
    [
        (datetime(999, 1, 1, tzinfo=UTC), "0999-01-01T00:00:00.000Z"),
        (datetime(1, 1, 1, 0, 0, 0, 5000, tzinfo=UTC), "0001-01-01T00:00:00.005Z"),
        (datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC), "9999-12-31T23:59:59.000Z"),
    ],
)
def test_years_below_1000_are_written_with_four_digits(moment_, text):
    assert timestamps.format(moment_) == text
    assert timestamps.parse(text) == moment_.replace(microsecond=moment_.microsecond // 1000 * 1000)


@pytest.mark.parametrize(
    ("datestamp", "normalised"),
    [
        ("0999-01-01", "0999-01-01T00:00:00.000Z"),
        ("0001-01-01", "0001-01-01T00:00:00.000Z"),
        ("0001-01-01T00:00:00Z", "0001-01-01T00:00:00.000Z"),
        ("9999-12-31T23:59:59-14:00", None),  # past 9999 in UTC: OverflowError before
        ("0001-01-01T00:00:00+14:00", None),  # before the year 1 in UTC
        ("0000-01-01", None),
    ],
)
def test_a_datestamp_is_a_date_time_or_none(datestamp, normalised):
    assert _date(datestamp) == normalised
    moment(datestamp)  # orders, never raises


def test_unrepresentable_datestamps_are_per_record_verdicts_and_the_harvest_completes(repository, tmp_path):
    for number, datestamp in enumerate(["0999-01-01", "0001-01-01", "9999-12-31T23:59:59-14:00", "0000-01-01"]):
        repository.put(item(100 + number, datestamp))
    outbox, state = Outbox(), tmp_path / "state.json"
    stats = harvester(repository, outbox, state).harvest()
    assert stats.complete
    assert (stats.records, stats.created, stats.invalid) == (9, 7, 2)
    saved = json.loads(state.read_text())
    assert saved["from"] == "2026-01-05T00:00:00Z"  # the unreadable ones never move ``from``
    again = harvester(repository, outbox, state).harvest()  # a rerun does not die at the same page
    assert again.complete


@settings(max_examples=300, deadline=None)
@given(
    st.text(max_size=40)
    | st.from_regex(
        r"[0-9]{4}-[0-9]{2}-[0-9]{2}(T[0-9]{2}:[0-9]{2}:[0-9]{2}([+-][0-9]{2}:[0-9]{2}|Z))?", fullmatch=True
    )
)
@example("9999-12-31T23:59:59-14:00")
@example("0999-01-01")
def test_any_datestamp_gives_a_per_record_verdict_never_an_exception(datestamp):
    with tempfile.TemporaryDirectory() as directory:
        adaptor = OaiPmhAdaptor(
            OaiPmhClient("http://127.0.0.1:9/oai"), Outbox(), Path(directory) / "s.json", profile=PROFILE
        )
        first = Record("oai:x:1", datestamp, dc={"title": ("t",)})
        later = Record("oai:x:1", "2026-01-01", dc={"title": ("t",)})
        for page in (Page([first]), Page([later, first])):
            figures = HarvestStats()
            adaptor._publish_page(page, figures)
            assert figures.records == figures.created + figures.updated + figures.unchanged + figures.invalid
