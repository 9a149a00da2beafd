"""The OAI-PMH Channel Adaptor against a real OAI-PMH server on loopback: translation, paging,
incremental harvests, deletions, restarts, expired tokens, flow control, and the CLI end to end
through RabbitMQ."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import orjson
import pytest

from rdss.adaptors.oai_pmh import (
    HarvestState,
    Known,
    OaiPmhAdaptor,
    OaiPmhClient,
    Profile,
    Record,
    object_uuid,
    translate,
)
from rdss.gateway import Gateway
from rdss.model.messages import Message, serialise
from rdss.model.retry import Backoff
from rdss.model.validation import validate
from tests.amqp.conftest import ROOT, run_rdss
from tests.amqp.test_amqp_backend import collect
from tests.support.oai_pmh_server import OaiPmhServer
from tests.support.oai_pmh_server import Record as Item

pytestmark = pytest.mark.integration

BASE = "https://repository.example.ac.uk/oai"
PROFILE = Profile(
    organisation_name="University of Northshire",
    organisation_jisc_id=1234,
    organisation_address="1 College Road, Northshire",
    licence="CC-BY-4.0",
)


def item(number: int, datestamp: str, **dc: list[str]) -> Item:
    values = {
        "title": [f"Sediment cores of site {number}"],
        "creator": ["Lovelace, Ada", "Alan Turing https://orcid.org/0000-0002-1825-0097"],
        "description": [f"Cores from site {number}, with isotope ratios."],
        "date": ["2021-06"],
        "type": ["Dataset"],
        "identifier": [f"https://doi.org/10.1234/cores.{number}", "Turing, A. (2021) Cores. Some Journal."],
        "subject": ["geology", "isotopes", "geology"],
        "rights": ["https://creativecommons.org/licenses/by/4.0/"],
        **dc,
    }
    return Item(f"oai:repository.example.ac.uk:{number}", datestamp, values)


def stamp(day: int, hour: int = 0) -> str:
    return f"2026-01-{day:02d}T{hour:02d}:00:00Z"


@pytest.fixture
def repository():
    server = OaiPmhServer([item(n, stamp(1 + n % 5, n % 24)) for n in range(25)], page_size=10)
    yield server
    server.stop()


class Outbox:
    """The adaptor's publish function: a memory gateway, with a record of every message sent."""

    def __init__(self) -> None:
        self.bus = f"memory://oai-{uuid.uuid4().hex[:8]}"
        self.gateway = Gateway(self.bus, application="oai-pmh-adaptor")
        self.sent: list[Message] = []
        self.fail_after: int | None = None

    def __call__(self, messages: list[Message]) -> None:
        self.gateway.send_all(messages, channel="input")
        self.sent.extend(messages)
        if self.fail_after is not None and len(self.sent) >= self.fail_after:
            self.fail_after = None
            raise RuntimeError("crashed after publishing, before saving the position")

    def types(self) -> list[str]:
        return [m["messageHeader"]["messageType"] for m in self.sent]


def adaptor(server: OaiPmhServer, outbox: Outbox, state: Path, **options) -> OaiPmhAdaptor:
    client = OaiPmhClient(server.url, backoff=Backoff(max_retries=3, base=0.01))
    return OaiPmhAdaptor(client, outbox, state, profile=PROFILE, **options)


# -- translation ---------------------------------------------------------------------------------
def test_a_dublin_core_record_becomes_a_valid_metadata_create():
    record = Record(
        "oai:r:1",
        "2026-01-02T03:04:05Z",
        dc={k: tuple(v) for k, v in item(1, "x").dc.items()},
    )
    message = translate(record, None, base_url=BASE, profile=PROFILE)
    assert message is not None
    verdict = validate(serialise(message))
    assert verdict.valid, verdict.error_description
    body = message["messageBody"]
    assert message["messageHeader"]["messageType"] == "MetadataCreate"
    assert body["objectUuid"] == object_uuid(BASE, "oai:r:1", "2026-01-02T03:04:05Z")
    assert body["objectTitle"] == "Sediment cores of site 1"
    assert body["objectResourceType"] == 7  # dataset
    assert body["objectKeywords"] == ["geology", "isotopes"]
    assert {"identifierValue": "10.1234/cores.1", "identifierType": 4} in body["objectIdentifier"]
    assert {"identifierValue": "oai:r:1", "identifierType": 16} in body["objectIdentifier"]
    assert len(body["objectIdentifier"]) == 2  # the citation is not an identifier
    people = [role["person"] for role in body["objectPersonRole"]]
    assert (people[0]["personGivenNames"], people[0]["personFamilyNames"]) == ("Ada", "Lovelace")
    assert people[1]["personIdentifier"] == [
        {"personIdentifierValue": "0000-0002-1825-0097", "personIdentifierType": 1}
    ]
    assert body["objectRights"]["licence"] == [{"licenceIdentifier": "https://creativecommons.org/licenses/by/4.0/"}]
    assert {"dateValue": "2021-06-01T00:00:00.000Z", "dateType": 7} in body["objectDate"]
    assert body["objectOrganisationRole"][0]["organisation"]["organisationName"] == "University of Northshire"


def test_versions_updates_and_deletions():
    first = Record("oai:r:1", "2026-01-02", dc={"title": ("A",)})
    known = Known(object_uuid(BASE, "oai:r:1", "2026-01-02"), "2026-01-02")
    assert translate(first, known, base_url=BASE) is None  # already published
    newer = Record("oai:r:1", "2026-02-01", dc={"title": ("A, revised",)})
    update = translate(newer, known, base_url=BASE)
    assert update is not None
    assert update["messageHeader"]["messageType"] == "MetadataUpdate"
    assert update["messageBody"]["objectUuid"] != known.object_uuid  # a new version, a new uuid
    assert {
        "identifier": {"identifierValue": f"urn:uuid:{known.object_uuid}", "identifierType": 19},
        "relationType": 9,  # isNewVersionOf
    } in update["messageBody"]["objectRelatedIdentifier"]
    assert validate(serialise(update)).valid
    gone = Record("oai:r:1", "2026-03-01", deleted=True)
    delete = translate(gone, known, base_url=BASE)
    assert delete is not None
    assert delete["messageBody"] == {"objectUuid": known.object_uuid}
    assert validate(serialise(delete)).valid
    assert translate(gone, None, base_url=BASE) is None  # never published: nothing to delete
    once, twice = (translate(first, None, base_url=BASE) for _ in range(2))
    assert once is not None
    assert twice is not None
    assert once["messageHeader"]["messageId"] == twice["messageHeader"]["messageId"]  # same record, same message


def test_a_record_with_almost_nothing_still_makes_a_valid_message():
    bare = Record("oai:r:9", "2026-01-02", dc={})
    message = translate(bare, None, base_url=BASE)
    assert message is not None
    assert validate(serialise(message)).valid


# -- harvesting ----------------------------------------------------------------------------------
def test_a_first_harvest_pages_through_everything(repository, tmp_path):
    outbox = Outbox()
    harvester = adaptor(repository, outbox, tmp_path / "state.json")
    stats = harvester.harvest()
    assert (stats.pages, stats.records, stats.created, stats.complete) == (3, 25, 25, True)
    assert [q.get("resumptionToken") is not None for q in repository.requests] == [False, True, True]
    assert len({m["messageHeader"]["messageId"] for m in outbox.sent}) == 25
    assert all(validate(serialise(m)).valid for m in outbox.sent)
    saved = json.loads((tmp_path / "state.json").read_text())
    assert saved["from"] == max(i.datestamp for i in repository.records.values())  # where the next harvest starts
    assert saved["token"] is None
    assert len(saved["objects"]) == 25


def test_incremental_harvests_send_updates_deletes_and_nothing_twice(repository, tmp_path):
    outbox = Outbox()
    adaptor(repository, outbox, tmp_path / "state.json").harvest()
    latest = max(i.datestamp for i in repository.records.values())
    repository.put(item(3, stamp(20), title=["Sediment cores of site 3, corrected"]))
    repository.put(item(4, stamp(20)))
    repository.delete("oai:repository.example.ac.uk:5", stamp(21))
    repository.put(item(99, stamp(21)))
    sent_before = len(outbox.sent)
    stats = adaptor(repository, outbox, tmp_path / "state.json").harvest()  # a new process: state from the file
    assert repository.requests[-1]["from"] == latest
    assert outbox.types()[sent_before:].count("MetadataUpdate") == 2
    assert outbox.types()[sent_before:].count("MetadataDelete") == 1
    assert outbox.types()[sent_before:].count("MetadataCreate") == 1
    assert stats.unchanged >= 1  # the records stamped exactly `from` came again and were recognised
    again = adaptor(repository, outbox, tmp_path / "state.json").harvest()
    assert again.created + again.updated + again.deleted == 0


def test_a_restart_continues_from_the_saved_resumption_token(repository, tmp_path):
    outbox = Outbox()
    stop = threading.Event()
    first = adaptor(repository, outbox, tmp_path / "state.json")
    original = first.publish
    first.publish = lambda messages: (original(messages), stop.set())  # stop after the first page
    stats = first.harvest(stop)
    assert (stats.pages, stats.complete) == (1, False)
    token = json.loads((tmp_path / "state.json").read_text())["token"]
    assert token
    rest = adaptor(repository, outbox, tmp_path / "state.json").harvest()
    assert repository.requests[1] == {"verb": "ListRecords", "resumptionToken": token}
    assert (rest.pages, rest.complete) == (2, True)
    ids = [m["messageHeader"]["messageId"] for m in outbox.sent]
    assert len(ids) == len(set(ids)) == 25


def test_an_expired_token_means_harvesting_again_without_sending_twice(repository, tmp_path):
    outbox = Outbox()
    stop = threading.Event()
    first = adaptor(repository, outbox, tmp_path / "state.json")
    original = first.publish
    first.publish = lambda messages: (original(messages), stop.set())
    first.harvest(stop)
    repository.expire_tokens()
    stats = adaptor(repository, outbox, tmp_path / "state.json").harvest()
    assert stats.complete
    assert stats.unchanged == 10  # the first page again, recognised
    ids = [m["messageHeader"]["messageId"] for m in outbox.sent]
    assert len(ids) == len(set(ids)) == 25


def test_a_crash_between_publishing_and_saving_publishes_again_the_same_messages(repository, tmp_path):
    """At least once: the page comes again with the same messageIds, and a receiver drops them."""
    outbox = Outbox()
    outbox.fail_after = 20  # the second page is published, then the process dies before saving
    with pytest.raises(RuntimeError):
        adaptor(repository, outbox, tmp_path / "state.json").harvest()
    adaptor(repository, outbox, tmp_path / "state.json").harvest()
    ids = [m["messageHeader"]["messageId"] for m in outbox.sent]
    assert len(ids) == 35  # page two went twice...
    assert len(set(ids)) == 25  # ...identically
    with Gateway(outbox.bus, application="repository") as reader, reader.receiver("input") as inbox:
        got = collect(inbox, 25)
        assert inbox.receive(timeout=0.2) is None
    assert len(got) == 25
    assert inbox.stats.duplicates == 10


def test_flow_control_503_retry_after_is_honoured(repository, tmp_path):
    outbox = Outbox()
    waits: list[float] = []
    client = OaiPmhClient(repository.url, backoff=Backoff(max_retries=3, base=0.01), sleep=waits.append)
    repository.busy(2)
    stats = OaiPmhAdaptor(client, outbox, tmp_path / "state.json", profile=PROFILE).harvest()
    assert stats.created == 25
    assert waits == [1.0, 1.0]  # Retry-After: 1, twice


def test_a_state_file_of_another_endpoint_is_refused(repository, tmp_path):
    HarvestState("https://elsewhere.example/oai").save(tmp_path / "state.json")
    with pytest.raises(ValueError, match="another endpoint"):
        adaptor(repository, Outbox(), tmp_path / "state.json")


# -- the command, end to end through RabbitMQ ----------------------------------------------------
def test_the_command_publishes_through_rabbitmq_and_resumes(repository, url, tmp_path):
    state = tmp_path / "state.json"
    command = [sys.executable, "-m", "rdss", "adaptor", "oai-pmh", repository.url, "--to", "input"]
    command += ["--url", url, "--state", str(state), "--once", "--json"]
    with Gateway(url, application="repository") as reader:
        reader.transport.declare("metadata", "repository")  # type: ignore[attr-defined]
        first = subprocess.run(command, cwd=ROOT, capture_output=True, timeout=120, check=False)
        assert first.returncode == 0, first.stderr
        assert orjson.loads(first.stdout)["created"] == 25
        repository.delete("oai:repository.example.ac.uk:7", stamp(28))
        second = subprocess.run(command, cwd=ROOT, capture_output=True, timeout=120, check=False)
        assert second.returncode == 0, second.stderr
        assert orjson.loads(second.stdout)["deleted"] == 1
        with reader.receiver("metadata") as inbox:
            got = collect(inbox, 26)
            assert inbox.receive(timeout=0.5) is None
    types = sorted(r.message_type for r in got)
    assert types.count("MetadataCreate") == 25
    assert types.count("MetadataDelete") == 1


def test_the_command_reports_a_bad_state_file_in_one_line(repository, tmp_path):
    state = tmp_path / "state.json"
    HarvestState("https://elsewhere.example/oai").save(state)
    result = run_rdss("adaptor", "oai-pmh", repository.url, "--url", "memory://x", "--state", str(state))
    assert result.returncode == 2
    assert "another endpoint" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_command_exits_1_when_the_repository_cannot_be_harvested(tmp_path):
    command = ["adaptor", "oai-pmh", "http://127.0.0.1:1/oai", "--url", "memory://x", "--once", "--retries", "1"]
    result = run_rdss(*command, "--state", str(tmp_path / "state.json"), timeout=120)
    assert result.returncode == 1
    assert "unreachable" in result.stderr.splitlines()[-1]
    assert "Traceback" not in result.stderr
