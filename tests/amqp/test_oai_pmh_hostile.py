"""The OAI-PMH adaptor against a hostile repository on loopback: a redirect to another host or
scheme is refused, an answer over the size cap is stopped there, a server that drips its answer
is stopped at the deadline - and after each the harvest state is byte for byte what it was, so
the next harvest, from a well-behaved server, resumes and nothing is lost or sent twice."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rdss.adaptors.oai_pmh import HarvestError, OaiPmhAdaptor, OaiPmhClient
from rdss.adaptors.oai_pmh import fetch as oai_fetch
from rdss.cli import adaptor as adaptor_cli
from rdss.model.retry import Backoff
from tests.amqp.conftest import run_rdss
from tests.amqp.test_oai_pmh import PROFILE, Outbox, item, stamp
from tests.support.oai_pmh_server import OaiPmhServer, drip, endless, redirect

pytestmark = pytest.mark.integration

NO_RETRY = Backoff(max_retries=0)


@pytest.fixture
def repository() -> Iterator[OaiPmhServer]:
    server = OaiPmhServer([item(n, stamp(1 + n % 5, n % 24)) for n in range(25)], page_size=10)
    yield server
    server.stop()


@pytest.fixture
def elsewhere() -> Iterator[OaiPmhServer]:
    server = OaiPmhServer([item(100 + n, stamp(1)) for n in range(3)])
    yield server
    server.stop()


def harvester(server: OaiPmhServer, outbox: Outbox, state: Path, **limits: float) -> OaiPmhAdaptor:
    client = OaiPmhClient(server.url, backoff=NO_RETRY, **limits)  # type: ignore[arg-type]
    return OaiPmhAdaptor(client, outbox, state, profile=PROFILE)


def first_page(server: OaiPmhServer, outbox: Outbox, state: Path) -> bytes:
    """Harvest one page and stop: the state file then holds a resumption token and 10 records."""
    stop = threading.Event()
    adaptor = harvester(server, outbox, state)
    original = adaptor.publish
    adaptor.publish = lambda messages: (original(messages), stop.set())  # type: ignore[method-assign]
    stats = adaptor.harvest(stop)
    assert (stats.pages, stats.complete, len(outbox.sent)) == (1, False, 10)
    return state.read_bytes()


def resumes_and_loses_nothing(server: OaiPmhServer, outbox: Outbox, state: Path) -> None:
    server.hostile(None)
    stats = harvester(server, outbox, state).harvest()
    assert stats.complete
    assert (stats.pages, stats.created) == (2, 15)  # pages two and three: the token was kept
    ids = [m["messageHeader"]["messageId"] for m in outbox.sent]
    assert len(ids) == len(set(ids)) == 25


@pytest.mark.parametrize(
    "target",
    [
        pytest.param("http://localhost:{port}/oai", id="another-host"),
        pytest.param("http://127.0.0.1:{port}/oai", id="another-port"),
        pytest.param("ftp://127.0.0.1/oai", id="ftp"),
        pytest.param("file:///etc/passwd", id="file"),
    ],
)
def test_a_redirect_to_another_host_or_scheme_is_refused(repository, elsewhere, tmp_path, target):
    state, outbox = tmp_path / "state.json", Outbox()
    before = first_page(repository, outbox, state)
    location = target.format(port=elsewhere.url.split(":")[2].split("/")[0])
    repository.hostile(redirect(f"{location}?verb=ListRecords&metadataPrefix=oai_dc"))
    with pytest.raises(HarvestError) as refused:
        harvester(repository, outbox, state).harvest()
    assert refused.value.code == "redirectRefused"
    assert "only redirects to http://127.0.0.1:" in str(refused.value)
    assert elsewhere.requests == []  # never asked
    assert state.read_bytes() == before
    assert len(outbox.sent) == 10
    resumes_and_loses_nothing(repository, outbox, state)


def test_a_redirect_on_the_same_host_is_followed(repository, tmp_path):
    state, outbox = tmp_path / "state.json", Outbox()
    first_page(repository, outbox, state)
    repository.hostile(redirect(repository.url + "2?{query}", times=1))  # the same scheme and host, another path
    stats = harvester(repository, outbox, state).harvest()
    assert stats.complete
    redirected, followed = repository.requests[1:3]
    assert redirected["hostile"].startswith("/oai?verb=ListRecords&resumptionToken=")
    assert followed["verb"] == "ListRecords"
    assert redirected["hostile"].endswith(followed["resumptionToken"])
    ids = [m["messageHeader"]["messageId"] for m in outbox.sent]
    assert len(ids) == len(set(ids)) == 25


@pytest.mark.parametrize("declared", [False, True], ids=["undeclared-length", "declared-length"])
def test_an_answer_over_the_cap_is_stopped_there(repository, tmp_path, declared):
    state, outbox = tmp_path / "state.json", Outbox()
    before = first_page(repository, outbox, state)
    repository.hostile(endless(declared=declared))
    started = time.monotonic()
    with pytest.raises(HarvestError) as refused:
        harvester(repository, outbox, state, max_bytes=1024 * 1024).harvest()
    took = time.monotonic() - started
    assert refused.value.code == "tooLarge"
    assert "over the 1,048,576 read (--max-bytes)" in str(refused.value)
    assert len(str(refused.value)) < 1000  # the URL and its token cut, not the whole answer quoted
    assert took < 10, f"{took:.1f} s to stop reading"
    assert state.read_bytes() == before
    resumes_and_loses_nothing(repository, outbox, state)


def test_a_dripping_server_is_stopped_at_the_deadline(repository, tmp_path):
    state, outbox = tmp_path / "state.json", Outbox()
    before = first_page(repository, outbox, state)
    repository.hostile(drip(0.2))  # a byte every 0.2 s: no read ever waits long enough to time out
    started = time.monotonic()
    with pytest.raises(HarvestError) as late:
        harvester(repository, outbox, state, deadline=1.5, timeout=60).harvest()
    took = time.monotonic() - started
    assert "no complete answer within 1.5 s (--deadline)" in str(late.value)
    assert 1.4 < took < 5, f"stopped after {took:.1f} s"
    assert state.read_bytes() == before
    resumes_and_loses_nothing(repository, outbox, state)


def test_a_dripping_server_is_retried_within_bounds(repository, tmp_path):
    """A deadline passed is a timeout: retried, each attempt with its own deadline, then given up."""
    repository.hostile(drip(0.2))
    client = OaiPmhClient(repository.url, backoff=Backoff(max_retries=2, base=0.05), deadline=0.5)
    started = time.monotonic()
    with pytest.raises(HarvestError, match="still failing after 2 retries"):
        client.identify()
    assert len(repository.requests) == 3
    assert time.monotonic() - started < 5


def test_long_tokens_and_identifiers_are_cut_in_errors(repository, tmp_path, caplog):
    """A resumption token is the server's to choose, of any length: an error quoting the URL
    cuts it, and a record's identifier logged is cut likewise."""
    token = "t" * 200_000
    client = OaiPmhClient(repository.url, backoff=NO_RETRY)
    with pytest.raises(HarvestError) as failed:
        client.list_records(token=token)  # the server refuses a request line that long (HTTP 414)
    assert len(str(failed.value)) < 1000
    assert "more characters" in str(failed.value)


def test_the_command_has_the_clients_defaults():
    assert adaptor_cli.DEFAULT_MAX_BYTES == oai_fetch.DEFAULT_MAX_BYTES
    assert adaptor_cli.DEFAULT_DEADLINE == oai_fetch.DEFAULT_DEADLINE


def test_the_command_reports_a_refused_redirect_in_one_line_and_keeps_its_state(repository, elsewhere, tmp_path):
    state = tmp_path / "state.json"
    repository.hostile(redirect(elsewhere.url.replace("127.0.0.1", "localhost") + "?verb=ListRecords"))
    result = run_rdss(
        "adaptor", "oai-pmh", repository.url, "--url", "memory://x", "--state", str(state), "--once", timeout=60
    )
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1].startswith("rdss adaptor: redirectRefused: ")
    assert "Traceback" not in result.stderr
    assert not state.exists()  # nothing harvested, nothing saved
    assert elsewhere.requests == []
