"""The OAI-PMH adaptor against what a hostile run found: datestamps outside what Python holds,
a stop during a wait, a profile, tenant or state file of the wrong shape, a list without end, a
message over 1 MB. Each bad input is one verdict - a per-record one, or one line and an exit
code - never a traceback, never a run without end, and nothing lost."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from rdss.adaptors.oai_pmh import (
    MAX_BARREN_PAGES,
    HarvestState,
    ListWithoutEnd,
    OaiPmhAdaptor,
    OaiPmhClient,
    Profile,
    interruptible,
)
from rdss.adaptors.oai_pmh.adaptor import HarvestStats
from rdss.adaptors.oai_pmh.client import Page, Record
from rdss.adaptors.oai_pmh.dublin_core import _date, moment
from rdss.gateway import Gateway
from rdss.model import timestamps
from rdss.model.messages import Message
from rdss.model.retry import Backoff
from tests.support.oai_pmh_server import OaiPmhServer, drip
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


# -- D1: a stop during a wait ------------------------------------------------------------------------
def stop_after(seconds: float) -> threading.Event:
    stop = threading.Event()
    timer = threading.Timer(seconds, stop.set)
    timer.daemon = True
    timer.start()
    return stop


def test_a_stop_during_a_retry_after_of_300_s_ends_the_harvest_within_a_second(tmp_path):
    server = OaiPmhServer([item(n, f"2026-01-0{1 + n}T00:00:00Z") for n in range(5)], page_size=2)
    try:
        stop, outbox, state = stop_after(1.0), Outbox(), tmp_path / "state.json"
        client = OaiPmhClient(server.url, backoff=Backoff(max_retries=3), sleep=interruptible(stop))

        def publish(messages: list[Message]) -> None:
            outbox(messages)
            server.busy(10, retry_after="300")  # the next page: come back in five minutes

        adaptor = OaiPmhAdaptor(client, publish, state, profile=PROFILE)
        started = time.monotonic()
        stats = adaptor.harvest(stop)
        assert time.monotonic() - started < 3
        assert (stats.pages, stats.created, stats.complete) == (1, 2, False)
        assert json.loads(state.read_text())["token"]  # the position after the page published
        server.busy(0)
        again = harvester(server, outbox, state).harvest()
        assert again.complete
        assert len({m["messageHeader"]["messageId"] for m in outbox.sent}) == 5  # nothing lost
    finally:
        server.stop()


class KinesisDown:
    """A put_records every entry of which is throttled: the batcher backs off, up to a minute."""

    def put_records(self, StreamName: str, Records: list[dict[str, Any]]) -> dict[str, Any]:
        failed = {"ErrorCode": "ProvisionedThroughputExceededException", "ErrorMessage": "slow down"}
        return {"FailedRecordCount": len(Records), "Records": [failed for _ in Records]}


def test_a_stop_during_the_gateways_putrecords_backoff_ends_the_harvest_and_loses_nothing(repository, tmp_path):
    stop, state = stop_after(1.0), tmp_path / "state.json"
    gateway = Gateway(f"memory://oai-{uuid.uuid4().hex[:8]}", application="oai-pmh-adaptor")
    with gateway:
        batcher = gateway.transport.batcher  # type: ignore[attr-defined]
        batcher.client, batcher.sleep = KinesisDown(), interruptible(stop)
        client = OaiPmhClient(repository.url, backoff=Backoff(max_retries=0))
        adaptor = OaiPmhAdaptor(client, lambda m: gateway.send_all(m, channel="input"), state, profile=PROFILE)
        started = time.monotonic()
        stats = adaptor.harvest(stop)
        assert time.monotonic() - started < 3
    assert not stats.complete
    assert not state.exists()  # the page was not published: nothing saved past it
    outbox = Outbox()
    assert harvester(repository, outbox, state).harvest().created == 5


def test_the_command_stops_within_a_second_of_sigterm_during_a_retry_after(tmp_path):
    server = OaiPmhServer([item(1, "2026-01-01T00:00:00Z")])
    server.busy(100, retry_after="300")
    try:
        command = [sys.executable, "-m", "rdss", "adaptor", "oai-pmh", server.url, "--to", "input"]
        command += ["--url", "memory://sigterm", "--state", str(tmp_path / "state.json"), "--once"]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 30
        while not server.requests and time.monotonic() < deadline:  # waiting for its Retry-After
            time.sleep(0.05)
        time.sleep(0.3)
        sent = time.monotonic()
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=20)
        assert time.monotonic() - sent < 2
        assert process.returncode == 0, err
        assert "(stopped; resumes from here)" in out
        assert "Traceback" not in err
    finally:
        server.stop()


# -- D3, D8: a profile or tenant that would make every record invalid is refused before harvesting -------
def rdss(*arguments: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rdss", *arguments], capture_output=True, text=True, timeout=timeout, check=False
    )


def run_adaptor(
    url: str, state: Path, *options: str, to: str = "input", timeout: float = 30
) -> subprocess.CompletedProcess[str]:
    """``rdss adaptor oai-pmh URL`` to a memory bus, keeping its state in ``state``."""
    return rdss(
        "adaptor", "oai-pmh", url, "--to", to, "--url", "memory://h", "--state", str(state), *options, timeout=timeout
    )


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("values", "said"),
    [
        (
            {"organisation_type": "higherEducation"},
            "organisation_type: expected a code of organisationType, a whole number 1..15 "
            "(write 8 for higherEducation)",
        ),
        ({"organisation_type": 16}, "organisation_type"),
        ({"organisation_type": True}, "organisation_type"),
        ({"access_type": "open"}, "access_type: expected a code of accessType, a whole number 1..5 (write 1 for open)"),
        ({"access_type": 1.0}, "access_type"),
        ({"person_identifier_type": 0}, "person_identifier_type"),
        ({"organisation_jisc_id": -1}, "organisation_jisc_id"),
        ({"organisation_jisc_id": 10**23}, "organisation_jisc_id"),
        ({"organisation_jisc_id": "1234"}, "organisation_jisc_id"),
        ({"organisation_name": 5}, "organisation_name: expected a non-empty string"),
        ({"licence": ""}, "licence"),
        ({"unit_name": None}, "unit_name"),
        ({"generator": ["x"]}, "generator"),
    ],
)
def test_a_profile_field_of_the_wrong_type_or_code_is_refused(tmp_path, values, said):
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(values))
    with pytest.raises(ValueError, match=re.escape(said)):
        Profile.from_file(path)


@pytest.mark.parametrize("text", ["[" * 100_000, "\xff", "not json"])
def test_a_profile_that_is_not_json_is_a_value_error(tmp_path, text):
    path = tmp_path / "profile.json"
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(ValueError, match="not JSON"):
        Profile.from_file(path)


def test_the_command_refuses_a_bad_profile_in_one_line_before_harvesting(repository, tmp_path):
    profile = tmp_path / "profile.json"
    profile.write_text('{"organisation_type": "higherEducation"}')
    state = tmp_path / "state.json"
    result = run_adaptor(repository.url, state, "--profile", str(profile), "--once")
    assert result.returncode == 2
    assert "organisation_type" in one_line(result)
    assert not repository.requests
    assert not state.exists()


@pytest.mark.parametrize("tenant", ["-1", str(10**23)])
def test_the_command_refuses_a_tenant_that_is_no_jisc_id(repository, tmp_path, tenant):
    state = tmp_path / "state.json"
    result = run_adaptor(repository.url, state, "--version", "4.0.0", "--tenant-jisc-id", tenant, "--once")
    assert result.returncode == 2
    assert "--tenant-jisc-id" in one_line(result)
    assert not repository.requests
    assert not state.exists()


def test_a_tenant_that_is_no_jisc_id_is_refused_by_the_adaptor(repository, tmp_path):
    with pytest.raises(ValueError, match="tenant_jisc_id"):
        harvester(repository, Outbox(), tmp_path / "s.json", version="4.0.0", tenant_jisc_id=10**23)


def test_the_command_refuses_a_profile_that_is_a_fifo_at_once(repository, tmp_path):
    fifo = tmp_path / "profile.fifo"
    os.mkfifo(fifo)
    started = time.monotonic()
    result = run_adaptor(repository.url, tmp_path / "s.json", "--profile", str(fifo), "--once", timeout=20)
    assert time.monotonic() - started < 15
    assert result.returncode == 2
    assert "not a regular file" in one_line(result)


# -- D7: a forged state file is refused naming the field ----------------------------------------------------
BASE = "http://127.0.0.1:9/oai"
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=10,
)
FIELDS = ["base_url", "metadata_prefix", "set_spec", "from", "token", "high_water", "harvests", "objects"]


def well_formed() -> dict[str, Any]:
    return {
        "base_url": BASE,
        "metadata_prefix": "oai_dc",
        "set_spec": None,
        "from": "2026-01-01T00:00:00Z",
        "token": "t",
        "high_water": None,
        "harvests": 1,
        "objects": {"oai:x:1": [str(uuid.uuid4()), "2026-01-01", False]},
    }


def load(text: str) -> HarvestState:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "state.json"
        path.write_text(text)
        return HarvestState.load(path, BASE, "oai_dc", None)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(FIELDS), JSON_VALUES | st.just({"oai:x:1": ["u", 5, False]}) | st.just({"k": ["u", "d", 1]}))
def test_a_forged_field_is_a_state_or_a_value_error_naming_it(name, value):
    data = well_formed()
    data[name] = value
    try:
        state = load(json.dumps(data))
    except ValueError as error:
        said = str(error)
    else:
        said = ""
    if said:
        assert name in said or "another endpoint" in said
        return
    assert isinstance(state.harvests, int)
    assert all(isinstance(v, str | None) for v in (state.from_, state.token, state.high_water, state.set_spec))
    assert all(isinstance(k.object_uuid, str) and isinstance(k.deleted, bool) for k in state.objects.values())


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('{"base_url":"' + BASE + '","metadata_prefix":"oai_dc","harvests":1e400}', "harvests"),
        ('{"base_url":"' + BASE + '","metadata_prefix":"oai_dc","token":7}', "token"),
        ('{"base_url":"' + BASE + '","metadata_prefix":"oai_dc","objects":{"a":["u",5,false]}}', "objects"),
        ('{"base_url":"' + BASE + '","metadata_prefix":"oai_dc","objects":["u",5,false]}', "objects"),
        ('{"base_url":"' + BASE + '","metadata_prefix":"oai_dc","high_water":[1]}', "high_water"),
        ('{"metadata_prefix":"oai_dc"}', "base_url"),
        ("[" * 100_000 + "]" * 100_000, "not JSON"),
        ("[1]", "expected a JSON object"),
    ],
)
def test_the_forged_state_files_of_the_hostile_run_are_value_errors(text, said):
    with pytest.raises(ValueError, match=re.escape(said)):
        load(text)


def test_the_command_refuses_a_forged_state_file_in_one_line(repository, tmp_path):
    state = tmp_path / "state.json"
    state.write_text(json.dumps({**well_formed(), "base_url": repository.url, "token": 7}))
    result = run_adaptor(repository.url, state)
    assert result.returncode == 2
    assert 'field "token": expected a string or null, found a number 7' in one_line(result)
    assert not repository.requests


# -- D4: a list without end ----------------------------------------------------------------------------------
@pytest.mark.parametrize("repeat", [True, False], ids=["the-same-record-again", "no-records"])
def test_fresh_tokens_that_list_nothing_new_stop_the_harvest_after_max_barren_pages(tmp_path, repeat):
    server = OaiPmhServer([item(n, f"2026-01-0{1 + n}T00:00:00Z") for n in range(5)], page_size=2)
    server.unending(repeat)
    try:
        outbox, state = Outbox(), tmp_path / "state.json"
        adaptor = harvester(server, outbox, state)
        started = time.monotonic()
        with pytest.raises(ListWithoutEnd, match="listWithoutEnd: 100 pages in a row"):
            adaptor.harvest()
        assert time.monotonic() - started < 30
        assert len(server.requests) == 1 + MAX_BARREN_PAGES
        assert len(outbox.sent) == 2  # the first page's records, published
        saved = json.loads(state.read_text())
        assert saved["token"]  # the position of the last page published: nothing lost
        assert len(saved["objects"]) == 2
        server.unending(None)
        server.expire_tokens()  # the mended server's list starts again from ``from``
        assert harvester(server, outbox, state).harvest().complete
        assert len({m["messageHeader"]["messageId"] for m in outbox.sent}) == 5
    finally:
        server.stop()


def test_a_long_list_of_new_records_is_not_taken_for_one_without_end(tmp_path):
    server = OaiPmhServer([item(n, f"2026-01-01T00:00:{n % 60:02d}Z") for n in range(150)], page_size=1)
    try:
        stats = harvester(server, Outbox(), tmp_path / "state.json").harvest()
        assert (stats.complete, stats.created) == (True, 150)
    finally:
        server.stop()


def test_the_command_ends_a_list_without_end_in_one_line_exit_1(tmp_path):
    server = OaiPmhServer([item(n, f"2026-01-0{1 + n}T00:00:00Z") for n in range(3)], page_size=1)
    server.unending(False)
    try:
        state = tmp_path / "state.json"
        result = run_adaptor(server.url, state, "--once", timeout=60)
        assert result.returncode == 1
        assert "listWithoutEnd" in one_line(result)
        assert json.loads(state.read_text())["token"]
    finally:
        server.stop()


# -- D5: a message over 1 MB ---------------------------------------------------------------------------------
def test_a_record_whose_message_is_over_1_mb_is_published_as_a_sequence(tmp_path):
    big = item(1, "2026-01-01T00:00:00Z")
    big.dc["description"] = ["isotope ratios " * 100_000]  # 1.5 MB of description
    server = OaiPmhServer([big, item(2, "2026-01-02T00:00:00Z")])
    gateway = Gateway(f"memory://big-{uuid.uuid4().hex[:8]}", application="oai-pmh-adaptor")
    try:
        with gateway:
            sent: list[Any] = []

            def publish(messages: list[Message]) -> None:
                sent.extend(gateway.send_all(messages, channel="input"))

            client = OaiPmhClient(server.url, backoff=Backoff(max_retries=0))
            stats = OaiPmhAdaptor(client, publish, tmp_path / "state.json", profile=PROFILE).harvest()
    finally:
        server.stop()
    assert (stats.complete, stats.created, stats.invalid) == (True, 2, 0)
    assert sorted(len(receipt.parts) for receipt in sent) == [1, 2]  # the large one as a sequence of two


# -- D12: --to an error channel ------------------------------------------------------------------------------
@pytest.mark.parametrize("channel", ["invalid", "error"])
def test_the_command_refuses_to_publish_to_an_error_channel(repository, tmp_path, channel):
    state = tmp_path / "state.json"
    result = run_adaptor(repository.url, state, "--once", to=channel)
    assert result.returncode == 2
    assert f"--to {channel}" in one_line(result)
    assert not repository.requests
    assert not state.exists()


def test_a_stop_during_a_request_that_drips_ends_it_within_a_second(tmp_path):
    server = OaiPmhServer([item(1, "2026-01-01T00:00:00Z")])
    server.hostile(drip(0.2))  # no read ever times out; the deadline is two minutes
    try:
        stop, state = stop_after(1.0), tmp_path / "state.json"
        client = OaiPmhClient(server.url, backoff=Backoff(max_retries=3), sleep=interruptible(stop), stop=stop)
        started = time.monotonic()
        stats = OaiPmhAdaptor(client, Outbox(), state, profile=PROFILE).harvest(stop)
        assert time.monotonic() - started < 3
        assert (stats.complete, stats.records) == (False, 0)
        assert not state.exists()
    finally:
        server.stop()
