"""The OAI-PMH adaptor emits 4.0.0 (issue 31): ``version="4.0.0"`` (``--version 4.0.0``) writes
each harvested record's message in 4.0.0 through the canonical model, with the deployment's
tenantJiscID; every message is valid 4.0.0 by the classifier, the objects keep the identities a
3.0.2 harvest gives them, and the command publishes them through RabbitMQ.

4.0.0 names only ORCID and researcherID as personIdentifierType and wants every person
identified: a creator Dublin Core names without an ORCID (3.0.2's reserved code 3, a
repository-scoped identifier) has no form there, so such a record is not published in 4.0.0 -
counted invalid and logged with the translator's description, never published with an invented
identifier type."""

from __future__ import annotations

import subprocess
import sys

import orjson
import pytest

from rdss.adaptors.oai_pmh import OaiPmhAdaptor, OaiPmhClient
from rdss.gateway import Gateway
from rdss.model.messages import serialise
from rdss.model.validation import validate
from tests.amqp.conftest import ROOT, run_rdss
from tests.amqp.test_amqp_backend import collect
from tests.amqp.test_oai_pmh import Outbox, adaptor, item, stamp
from tests.support.oai_pmh_server import OaiPmhServer

pytestmark = pytest.mark.integration

TENANT = 4242

#: Creators with ORCIDs: what 4.0.0 can carry.
IDENTIFIED = ["Ada Lovelace https://orcid.org/0000-0002-1825-0097", "Alan Turing https://orcid.org/0000-0001-5109-3700"]


def orcid_item(number: int, datestamp: str, **dc: list[str]):
    return item(number, datestamp, creator=IDENTIFIED, **dc)


@pytest.fixture
def repository():
    server = OaiPmhServer([orcid_item(n, stamp(1 + n % 5, n % 24)) for n in range(25)], page_size=10)
    yield server
    server.stop()


def test_a_harvest_in_4_0_0_publishes_valid_4_0_0_messages_of_the_same_objects(repository, tmp_path):
    in_4, in_3 = Outbox(), Outbox()
    stats = adaptor(repository, in_4, tmp_path / "4.json", version="4.0.0", tenant_jisc_id=TENANT).harvest()
    adaptor(repository, in_3, tmp_path / "3.json").harvest()
    assert (stats.created, stats.invalid) == (25, 0)
    for message in in_4.sent:
        verdict = validate(serialise(message))
        assert verdict.valid, verdict.error_description
        assert verdict.version == "4.0.0"
        assert message["messageHeader"]["tenantJiscID"] == TENANT
    # the same records, the same objects and messageIds as a 3.0.2 harvest's
    assert [m["messageBody"]["objectUUID"] for m in in_4.sent] == [m["messageBody"]["objectUuid"] for m in in_3.sent]
    assert [m["messageHeader"]["messageId"] for m in in_4.sent] == [m["messageHeader"]["messageId"] for m in in_3.sent]
    assert {m["messageBody"]["objectTitle"] for m in in_4.sent} == {m["messageBody"]["objectTitle"] for m in in_3.sent}


def test_updates_and_deletions_in_4_0_0(repository, tmp_path):
    outbox = Outbox()
    harvester = adaptor(repository, outbox, tmp_path / "state.json", version="4.0.0", tenant_jisc_id=TENANT)
    harvester.harvest()
    first = {m["messageBody"]["objectUUID"] for m in outbox.sent}
    repository.put(orcid_item(3, stamp(20), title=["Sediment cores of site 3, corrected"]))
    repository.delete("oai:repository.example.ac.uk:5", stamp(21))
    before = len(outbox.sent)
    again = adaptor(repository, outbox, tmp_path / "state.json", version="4.0.0", tenant_jisc_id=TENANT)
    stats = again.harvest()
    assert (stats.updated, stats.deleted, stats.invalid) == (1, 1, 0)
    later = outbox.sent[before:]
    assert all(validate(serialise(m)).version == "4.0.0" and validate(serialise(m)).valid for m in later)
    [delete] = [m for m in later if m["messageHeader"]["messageType"] == "MetadataDelete"]
    assert set(delete["messageBody"]) == {"objectUUID"}
    assert delete["messageBody"]["objectUUID"] in first  # the object the first harvest published


def test_a_creator_without_an_orcid_has_no_form_in_4_0_0_and_the_record_is_not_published(tmp_path, caplog):
    server = OaiPmhServer([orcid_item(1, stamp(1)), item(2, stamp(2))], page_size=10)  # item 2: Lovelace, Ada
    try:
        outbox = Outbox()
        stats = adaptor(server, outbox, tmp_path / "state.json", version="4.0.0", tenant_jisc_id=TENANT).harvest()
    finally:
        server.stop()
    assert (stats.records, stats.created, stats.invalid) == (2, 1, 1)
    assert [m["messageHeader"]["version"] for m in outbox.sent] == ["4.0.0"]
    assert "oai:repository.example.ac.uk:2" in caplog.text
    assert "GENERR001 personIdentifierType 3 is a code 3.0.2 reserves without a name: no form in 4.0.0" in caplog.text


def test_4_0_0_without_a_tenant_or_an_unknown_version_is_refused(tmp_path):
    client = OaiPmhClient("https://repository.example.ac.uk/oai")
    with pytest.raises(ValueError, match="tenantJiscID"):
        OaiPmhAdaptor(client, Outbox(), tmp_path / "s.json", version="4.0.0")
    with pytest.raises(ValueError, match="version"):
        OaiPmhAdaptor(client, Outbox(), tmp_path / "s.json", version="5.0.0", tenant_jisc_id=TENANT)
    result = run_rdss(
        "adaptor", "oai-pmh", "https://repository.example.ac.uk/oai", "--url", "memory://x", "--version", "4.0.0"
    )
    assert result.returncode == 2
    assert "--tenant-jisc-id" in result.stderr.splitlines()[-1]
    assert "Traceback" not in result.stderr


def test_the_command_publishes_4_0_0_through_rabbitmq(repository: OaiPmhServer, url, tmp_path):
    command = [sys.executable, "-m", "rdss", "adaptor", "oai-pmh", repository.url, "--to", "input", "--url", url]
    command += ["--state", str(tmp_path / "state.json"), "--once", "--json", "--version", "4.0.0"]
    command += ["--tenant-jisc-id", str(TENANT)]
    with Gateway(url, application="preservation", reads="4.0.0", tenant_jisc_id=TENANT) as reader:
        reader.transport.declare("metadata", "preservation")  # type: ignore[attr-defined]
        run = subprocess.run(command, cwd=ROOT, capture_output=True, timeout=120, check=False)
        assert run.returncode == 0, run.stderr
        assert orjson.loads(run.stdout)["created"] == 25
        with reader.receiver("metadata") as inbox:
            got = collect(inbox, 25)
            assert inbox.receive(timeout=0.5) is None
            assert inbox.stats.untranslatable == 0
    assert {(r.message_type, r.header["version"], r.header["tenantJiscID"]) for r in got} == {
        ("MetadataCreate", "4.0.0", TENANT)
    }
    assert all(validate(r.payload).valid for r in got)
