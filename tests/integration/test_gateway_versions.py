"""Each consumer reads the version it speaks, on Kinesis (the emulator, the broker routing by
content whatever the version): a 3.0.2 producer and a 4.0.0 consumer, and the reverse, exchange
create, update, delete and a read request/reply (tests/support/versions.py)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from rdss.model.workload import Workload
from tests.support import versions
from tests.support.gateway_system import open_gateway
from tests.support.system import System

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(("written", "read"), [("3.0.2", "4.0.0"), ("4.0.0", "3.0.2")])
def test_a_producer_and_a_consumer_of_different_versions_exchange_through_the_broker(
    system: System, written: str, read: str
) -> None:
    def make(application: str, **options: Any) -> Any:
        return open_gateway(system, application, **options)

    with system.routing():
        versions.exchange(make, written=written, read=read, channel="metadata", request_channel="metadata")
    # the archive's source, input, holds the bytes as the producer sent them, in its version
    sent = [orjson.loads(p)["messageHeader"] for p in system.read("input")]
    assert {h["version"] for h in sent if h["messageClass"] != "Document"} == {written}


def test_a_message_with_no_form_in_the_version_read_is_moved_to_error(system: System) -> None:
    producer = open_gateway(system, "repository")
    patch = Workload(3).message("VocabularyPatch", "Event")
    producer.send(patch, channel="vocabulary")
    system.route()
    consumer = open_gateway(system, "preservation", reads="4.0.0", tenant_jisc_id=versions.TENANT)
    with consumer.receiver("vocabulary", poll_interval=0.05) as inbox:
        assert inbox.receive(timeout=1.5) is None
        assert inbox.stats.untranslatable == 1
    [moved] = [orjson.loads(p)["messageHeader"] for p in system.read("error")]
    assert moved["messageId"] == patch["messageHeader"]["messageId"]
    assert moved["errorCode"] == "GENERR006"
    assert "GENERR002 VocabularyPatch has no form in 4.0.0" in moved["errorDescription"]
