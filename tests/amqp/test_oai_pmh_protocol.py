"""The OAI-PMH adaptor against a repository on loopback that behaves as real ones do: resumption
tokens that come back (a list that loops), garbage in ``completeListSize``, ``cursor`` and
``Retry-After``, OAI-PMH errors answered with a 4xx (or a 5xx) instead of a 200, statuses whose
body is not OAI-PMH at all, and a record with 100,000 subjects.

Each case ends with every record accounted for: published (once), or the failure reported in one
line with the state as it was - and the next harvest, from a mended server, lists the rest.
"""

from __future__ import annotations

import contextlib
import json
import math
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from rdss.adaptors.oai_pmh import HarvestError, OaiPmhAdaptor, OaiPmhClient, ResumptionTokenLoop
from rdss.adaptors.oai_pmh.client import MAX_RETRY_AFTER
from rdss.model.messages import Message
from rdss.model.retry import Backoff
from tests.amqp.conftest import run_rdss
from tests.amqp.test_oai_pmh import PROFILE, Outbox, item
from tests.amqp.test_oai_pmh_hostile import NO_RETRY, first_page, harvester, resumes_and_loses_nothing
from tests.support.oai_pmh_server import OaiPmhServer, redirect, status

pytestmark = pytest.mark.integration

#: The errors OAI-PMH 2.0 defines.
PROTOCOL_ERRORS = [
    "badArgument",
    "badResumptionToken",
    "badVerb",
    "cannotDisseminateFormat",
    "idDoesNotExist",
    "noMetadataFormats",
    "noRecordsMatch",
    "noSetHierarchy",
]


def moment(n: int) -> str:
    """Record ``n``'s datestamp: one a second, so the server lists records in number order."""
    return (datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=n)).strftime("%Y-%m-%dT%H:%M:%SZ")


@contextlib.contextmanager
def served(records: int = 25, page_size: int = 10) -> Iterator[OaiPmhServer]:
    server = OaiPmhServer([item(n, moment(n)) for n in range(records)], page_size=page_size)
    try:
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def state_file() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as directory:
        yield Path(directory) / "state.json"


def sources(sent: list[Message]) -> list[str]:
    """The OAI identifiers of the records ``sent`` messages publish."""
    return [
        next(i["identifierValue"] for i in m["messageBody"]["objectIdentifier"] if i["identifierType"] == 16)
        for m in sent
    ]


def listed(server: OaiPmhServer) -> list[str]:
    """The server's identifiers in the order it lists them."""
    return [r.identifier for r in sorted(server.records.values(), key=lambda r: (r.datestamp, r.identifier))]


def everything_once(server: OaiPmhServer, outbox: Outbox, state: Path) -> None:
    """The next harvest completes, and each record was published exactly once."""
    stats = harvester(server, outbox, state).harvest()
    assert stats.complete
    assert sorted(sources(outbox.sent)) == sorted(listed(server))
    ids = [m["messageHeader"]["messageId"] for m in outbox.sent]
    assert len(ids) == len(set(ids))


def one_line(error: BaseException) -> str:
    text = str(error)
    assert "\n" not in text
    assert "\r" not in text
    assert len(text) < 1200
    return text


# -- resumption tokens that come back ------------------------------------------------------------
def loops_and_keeps_its_position(server: OaiPmhServer, first: int, length: int, page_size: int) -> None:
    with state_file() as state:
        outbox = Outbox()
        with pytest.raises(ResumptionTokenLoop) as looped:
            harvester(server, outbox, state).harvest()
        reached = listed(server)[: page_size * (first + length)]  # pages 0 .. first + length - 1
        assert sources(outbox.sent) == reached  # each page listed once published once
        assert len(server.requests) == first + length  # stopped on the first repeat
        assert f"page-{first}" in one_line(looped.value)
        saved = json.loads(state.read_text())
        # the position saved when page first - 1 handed out the token that came back
        assert saved["token"] == f"page-{first}"
        assert saved["high_water"] == moment(first * page_size - 1)
        assert (saved["from"], saved["harvests"]) == (None, 0)
        assert sorted(saved["objects"]) == sorted(reached)  # what went out is known to have
        before = state.read_bytes()

        requested = len(server.requests)
        with pytest.raises(ResumptionTokenLoop):  # the next harvest resumes there and stops likewise
            harvester(server, outbox, state).harvest()
        assert len(server.requests) - requested == length  # one turn of the loop
        assert len(outbox.sent) == len(reached)  # nothing sent again
        assert state.read_bytes() == before

        server.cycle(None)  # mended: the harvest resumes at the token and lists the rest
        everything_once(server, outbox, state)


def test_a_token_that_names_its_own_page_stops_the_harvest():
    """The very token the request carried, handed out again: today's endless --once."""
    with served(records=25, page_size=10) as server:
        server.cycle(1, 1)
        loops_and_keeps_its_position(server, 1, 1, 10)


@settings(max_examples=30)
@given(first=st.integers(1, 4), length=st.integers(1, 8))
@example(first=1, length=2)
def test_a_token_that_comes_back_after_any_number_of_pages_stops_the_harvest(first, length):
    with served(records=2 * (first + length + 2), page_size=2) as server:
        server.cycle(first, length)
        loops_and_keeps_its_position(server, first, length, 2)


def test_the_command_reports_a_looping_list_in_one_line_each_time(tmp_path):
    state = tmp_path / "state.json"
    with served(records=25, page_size=10) as server:
        server.cycle(1, 2)
        for _ in range(2):
            result = run_rdss(
                "adaptor", "oai-pmh", server.url, "--url", "memory://x", "--state", str(state), "--once", timeout=60
            )
            assert result.returncode == 1, result.stderr
            assert "Traceback" not in result.stderr
            assert result.stderr.strip().splitlines()[-1].startswith("rdss adaptor: resumptionTokenLoop: ")
            assert json.loads(state.read_text())["token"] == "page-1"
        assert len(server.requests) == 3 + 2  # a turn of the loop each time, not for ever


# -- garbage the harvester can do without -----------------------------------------------------------
#: Text an XML attribute or element can hold (the document stays well-formed; its values do not).
XML_TEXT = st.text(
    st.characters(
        blacklist_categories=("Cs",),
        blacklist_characters=[chr(c) for c in range(32) if chr(c) not in "\t\n\r"] + ["\ufffe", "\uffff"],
    )
)
NUMBERS = st.builds(str, st.integers() | st.integers(-(10**40), 10**40) | st.floats())
ODD = st.sampled_from(["10" + "0" * 29, "9" * 5000, "-5", "-0", "1.5", "1e30", " 12 ", "²", "٣", "１２", "12abc", ""])


def as_count(value: str) -> int | None:
    text = value.strip()
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 18 else None


@settings(max_examples=40)
@given(size=XML_TEXT | NUMBERS | ODD, cursor=XML_TEXT | NUMBERS | ODD)
@example(size="²", cursor="0")  # a digit to str.isdigit, not to int: today's traceback
@example(size="9" * 5000, cursor="-1")  # past int's limit on digits
def test_garbage_in_complete_list_size_and_cursor_is_ignored(size, cursor):
    with served() as server, state_file() as state:
        server.resumption_attributes = {"completeListSize": size, "cursor": cursor}
        page = OaiPmhClient(server.url, backoff=NO_RETRY).list_records()
        assert (page.complete_list_size, page.cursor) == (as_count(size), as_count(cursor))
        assert page.token is not None
        everything_once(server, Outbox(), state)


#: Header text: anything but the line breaks that would end the header (sent as UTF-8 bytes).
HEADER_TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"))
NOW = datetime.now(UTC)
HTTP_DATES = st.builds(
    lambda seconds: format_datetime(NOW + timedelta(seconds=seconds), usegmt=True), st.integers(-(10**9), 10**9)
)


@settings(max_examples=40)
@given(value=HEADER_TEXT | NUMBERS | ODD | HTTP_DATES)
@example(value=str(10**30))
@example(value="²")
@example(value="-30")
@example(value="Mon, 01 Jan 99999 00:00:00 GMT")
def test_any_retry_after_is_a_bounded_wait_or_ignored(value):
    waits: list[float] = []
    backoff = Backoff(max_retries=3, base=0.01)
    with served() as server, state_file() as state:
        server.busy(2, value)
        client = OaiPmhClient(server.url, backoff=backoff, sleep=waits.append)
        outbox = Outbox()
        stats = OaiPmhAdaptor(client, outbox, state, profile=PROFILE).harvest()
        assert stats.complete
        assert sorted(sources(outbox.sent)) == sorted(listed(server))
    assert len(waits) == 2
    assert all(math.isfinite(w) and 0 <= w <= MAX_RETRY_AFTER for w in waits)
    text = value.strip()
    if text.isascii() and text.isdigit():
        assert waits == [min(MAX_RETRY_AFTER, float(text))] * 2


# -- OAI-PMH errors, whatever the status -------------------------------------------------------------
def named(code: str) -> str:
    """The code an error is reported with: its whitespace collapsed, cut, or ``unknown``."""
    return " ".join(code.split())[:60] or "unknown"


def an_error_answered(server: OaiPmhServer, state: Path, outbox: Outbox, code: str, resuming: bool) -> None:
    """Harvest while the server answers ``code``; check what became of every record."""
    before = state.read_bytes() if resuming else None
    adaptor = harvester(server, outbox, state)
    sent = len(outbox.sent)
    reported = None
    try:
        stats = adaptor.harvest()
    except HarvestError as error:
        reported = error
    expected = named(code)
    if expected == "noRecordsMatch":  # an empty list: the harvest ends, `from` stays where it was
        assert reported is None
        assert stats.complete
        assert len(outbox.sent) == sent
        saved = json.loads(state.read_text())
        assert (saved["from"], saved["token"], saved["high_water"], saved["harvests"]) == (None, None, None, 1)
    elif expected == "badResumptionToken" and resuming:  # expired: harvested again from `from`
        assert reported is None
        assert stats.complete
        assert sorted(sources(outbox.sent)) == sorted(listed(server))
        return
    else:
        assert reported is not None
        assert reported.code.startswith(expected)
        assert one_line(reported).startswith(f"{reported.code}: ")
        assert (state.read_bytes() if resuming else None) == before  # as it was: nothing lost
        assert not state.exists() or resuming
    everything_once(server, outbox, state)  # the next harvest lists what was not


@settings(max_examples=60)
@given(
    code=st.sampled_from(PROTOCOL_ERRORS) | XML_TEXT,
    answered_with=st.just(200) | st.integers(400, 499) | st.sampled_from([500, 501, 502, 504, 505]),
    message=XML_TEXT,
    resuming=st.booleans(),
)
@example(code="noRecordsMatch", answered_with=404, message="none", resuming=True)
@example(code="badResumptionToken", answered_with=400, message="expired", resuming=True)
@example(code="badArgument", answered_with=422, message="no", resuming=False)
@example(code="bad\nArgument", answered_with=200, message="a\nb", resuming=False)
def test_any_oai_error_is_read_from_the_body_whatever_the_status(code, answered_with, message, resuming):
    with served() as server, state_file() as state:
        outbox = Outbox()
        if resuming:
            first_page(server, outbox, state)
        server.error_status = answered_with
        server.fail(code, message)
        an_error_answered(server, state, outbox, code, resuming)


def test_no_records_match_with_a_404_is_an_empty_harvest():
    with served() as server, state_file() as state:
        server.error_status = 404
        client = OaiPmhClient(server.url, backoff=NO_RETRY)
        stats = OaiPmhAdaptor(client, Outbox(), state, profile=PROFILE, start_from="2030-01-01").harvest()
        assert (stats.complete, stats.records) == (True, 0)
        saved = json.loads(state.read_text())
        assert (saved["from"], saved["harvests"]) == ("2030-01-01", 1)


def test_an_expired_token_answered_with_a_404_harvests_again_from_from():
    with served() as server, state_file() as state:
        outbox = Outbox()
        first_page(server, outbox, state)
        server.expire_tokens()
        server.error_status = 404
        stats = harvester(server, outbox, state).harvest()
        assert (stats.complete, stats.unchanged) == (True, 10)
        assert sorted(sources(outbox.sent)) == sorted(listed(server))


def test_no_records_match_to_a_token_ends_the_list_without_moving_from():
    """A server that says noRecordsMatch of a token it no longer knows: what it did not list may
    be older than what it did, so the next harvest starts from the same place."""
    with served() as server, state_file() as state:
        outbox = Outbox()
        first_page(server, outbox, state)
        server.error_status = 404
        server.fail("noRecordsMatch", "the token's list is gone")
        stats = harvester(server, outbox, state).harvest()
        assert (stats.complete, len(outbox.sent)) == (True, 10)
        assert json.loads(state.read_text())["from"] is None
        everything_once(server, outbox, state)


def test_the_command_names_an_oai_error_answered_with_a_400(tmp_path):
    state = tmp_path / "state.json"
    with served() as server:
        server.error_status = 400
        server.fail("badArgument", "the argument\nset is not known")
        result = run_rdss(
            "adaptor", "oai-pmh", server.url, "--url", "memory://x", "--state", str(state), "--once", timeout=60
        )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == "rdss adaptor: badArgument: the argument set is not known"
    assert not state.exists()


# -- statuses whose body is not OAI-PMH --------------------------------------------------------------
OAI = "http://www.openarchives.org/OAI/2.0/"
NOT_OAI = st.sampled_from(
    [
        b"",
        b"<html><head><title>404 Not Found</title></head><body>nginx</body></html>",
        b'{"error": "rate limited"}',
        b"<error code='badArgument'>an error outside an OAI-PMH answer</error>",
        f'<OAI-PMH xmlns="{OAI}"><ListRecords/></OAI-PMH>'.encode(),  # OAI-PMH, but no error
        f'<OAI-PMH xmlns="{OAI}"><error code="badArgument">cut'.encode(),  # cut short
        b"\x00\xff\xfe binary\n\r\x1b[31m",
    ]
) | st.binary(max_size=2000)


@settings(max_examples=40)
@given(
    answered_with=st.integers(400, 599).filter(lambda s: s != 503),
    body=NOT_OAI,
    content_type=st.none() | st.sampled_from(["text/html", "application/json", "text/xml", "text/html\x1b[2J"]),
)
@example(answered_with=404, body=b"<html>Not Found</html>", content_type="text/html")
@example(answered_with=500, body=b"Internal Server Error", content_type="text/plain")
def test_a_status_whose_body_is_not_oai_pmh_fails_in_one_line(answered_with, body, content_type):
    with served() as server, state_file() as state:
        outbox = Outbox()
        before = first_page(server, outbox, state)
        server.hostile(status(answered_with, body, content_type))
        with pytest.raises(HarvestError) as failed:
            harvester(server, outbox, state).harvest()
        text = one_line(failed.value)
        assert f"HTTP {answered_with}" in text
        retried = answered_with in (500, 502, 504)  # worth another attempt: none left (NO_RETRY)
        assert failed.value.code == ("unreachable" if retried else "httpError")
        assert state.read_bytes() == before
        resumes_and_loses_nothing(server, outbox, state)


def test_a_redirect_loop_on_the_same_host_fails_in_one_line():
    """urllib gives up on a redirect that comes back with a reason phrase of several lines."""
    with served() as server, state_file() as state:
        outbox = Outbox()
        before = first_page(server, outbox, state)
        server.hostile(redirect(server.url + "?{query}"))
        with pytest.raises(HarvestError) as failed:
            harvester(server, outbox, state).harvest()
        assert one_line(failed.value).startswith("httpError: HTTP 302 The HTTP server returned a redirect error")
        assert state.read_bytes() == before
        resumes_and_loses_nothing(server, outbox, state)


def test_the_command_says_a_404_page_is_not_oai_pmh_in_one_line(tmp_path):
    state = tmp_path / "state.json"
    with served() as server:
        server.hostile(status(404, b"<html><title>Not Found</title></html>", "text/html"))
        result = run_rdss(
            "adaptor", "oai-pmh", server.url, "--url", "memory://x", "--state", str(state), "--once", timeout=60
        )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("rdss adaptor: httpError: HTTP 404 Not Found from http://127.0.0.1:")
    assert last.endswith("not an OAI-PMH error: 37 bytes of text/html")


# -- many subjects -------------------------------------------------------------------------------
def test_a_record_with_a_hundred_thousand_subjects_is_published_with_each_once():
    subjects = [f"subject {n % 1000}" for n in range(100_000)]
    with served(records=0) as server, state_file() as state:
        server.put(item(1, moment(1), subject=subjects))
        outbox = Outbox()
        stats = harvester(server, outbox, state).harvest()
        assert (stats.complete, stats.created, stats.invalid) == (True, 1, 0)
    assert outbox.sent[0]["messageBody"]["objectKeywords"] == list(dict.fromkeys(subjects))


def test_a_record_with_a_hundred_thousand_distinct_subjects_is_published_as_a_sequence():
    """Its message is over the 1 MB limit of one message: the gateway sends it as a multi-message
    sequence, so it is published (counted created), never refused with GENERR006 and lost."""
    with served(records=0) as server, state_file() as state:
        server.put(item(1, moment(1), subject=[f"subject {n}" for n in range(100_000)]))
        server.put(item(2, moment(2)))
        outbox = Outbox()
        stats = harvester(server, outbox, state).harvest()
    assert (stats.complete, stats.records, stats.created, stats.invalid) == (True, 2, 2, 0)
    assert sources(outbox.sent) == ["oai:repository.example.ac.uk:1", "oai:repository.example.ac.uk:2"]


ONE_RECORD = (
    f'<?xml version="1.0"?><OAI-PMH xmlns="{OAI}"><ListRecords><record><header>'
    "<identifier>oai:r:1</identifier><datestamp>2026-01-01</datestamp></header></record></ListRecords></OAI-PMH>"
).encode()


@settings(max_examples=40)
@given(length=HEADER_TEXT | NUMBERS | ODD)
@example(length="²")  # a digit to str.isdigit, not to int: today's traceback
@example(length="9" * 5000)
@example(length=str(len(ONE_RECORD)))
def test_any_content_length_is_a_page_or_a_failure_in_one_line(length):
    with served(records=0) as server:
        server.hostile(status(200, ONE_RECORD, "text/xml", length=length))
        client = OaiPmhClient(server.url, backoff=NO_RETRY)
        failure: HarvestError | None = None
        try:
            page = client.list_records()
        except HarvestError as error:  # cut short, or waiting for bytes that never come
            failure = error
        if failure is None:
            assert [r.identifier for r in page.records] == ["oai:r:1"]
        else:
            assert failure.code in ("badXML", "unreachable", "tooLarge"), failure
            one_line(failure)
