"""What "the same message" means (rdss.model.conflicts), and the inline broker's conflicts on
memory:// (issue 21, item 4)."""

from __future__ import annotations

import copy
import logging
import uuid
from collections.abc import Iterator

import orjson
import pytest

from rdss.gateway import Gateway, Received
from rdss.gateway.claims import SqliteClaims
from rdss.gateway.log import memory as memory_backend
from rdss.model import decoration, history
from rdss.model.conflicts import CONFLICT, DIGEST_ATTRIBUTE, conflicts, message_digest
from rdss.model.workload import Workload
from rdss.repository.entries import RECEIVED


@pytest.fixture
def message() -> dict:
    return Workload(700).message("MetadataCreate", "Event")


def test_a_resend_has_the_digest_of_its_message(message):
    digest = message_digest(message)
    resent = orjson.loads(history.append(orjson.dumps(message), history.hop("again")))
    resent["messageHeader"]["messageTimings"]["publishedTimestamp"] = "2030-01-01T00:00:00Z"
    assert message_digest(resent) == digest  # header fields a resend changes do not count
    reordered = {"messageBody": dict(reversed(list(message["messageBody"].items()))), **message}
    assert message_digest(reordered) == digest  # nor does the order of members


@pytest.mark.parametrize(
    "change",
    [
        lambda m: m["messageBody"].update(objectTitle="another"),
        lambda m: m["messageHeader"].update(messageType="MetadataUpdate"),
        lambda m: m["messageHeader"].update(messageClass="Command"),
        lambda m: m["messageBody"]["objectPersonRole"].append(m["messageBody"]["objectPersonRole"][0]),
    ],
)
def test_another_message_has_another_digest(message, change):
    changed = copy.deepcopy(message)
    change(changed)
    assert message_digest(changed) != message_digest(message)


def test_conflicts_reads_the_item_a_failed_conditional_write_returns(message):
    digest = message_digest(message)
    all_old = {"messageId": "x", "claimedBy": "shardId-0/1", "status": RECEIVED, DIGEST_ATTRIBUTE: digest}
    assert not conflicts(all_old, digest)
    assert conflicts(all_old, "another")
    assert not conflicts({"messageId": "x", "claimedBy": "shardId-0/1"}, "another")  # claimed before digests
    assert not conflicts(None, digest)
    huge = copy.deepcopy(message)
    huge["messageBody"]["objectValue"] = 10**400  # beyond orjson: digested all the same
    assert message_digest(huge) != digest


@pytest.fixture
def bus_name() -> Iterator[str]:
    name = f"t-{uuid.uuid4().hex[:8]}"
    yield name
    memory_backend.discard(name)


def drain(gateway: Gateway, channel: str) -> list[Received]:
    got: list[Received] = []
    with gateway.receiver(channel, poll_interval=0.01) as inbox:
        while (received := inbox.receive(timeout=0.2)) is not None:
            got.append(received)
            inbox.ack(received)
    return got


def test_memory_a_different_message_under_a_used_id_is_moved_and_recorded(bus_name, message, caplog):
    producer = Gateway(f"memory://{bus_name}", application="producer")
    changed = copy.deepcopy(message)
    changed["messageBody"]["objectTitle"] = "Another title"
    message_id = message["messageHeader"]["messageId"]
    with caplog.at_level(logging.WARNING):
        producer.send(message)
        producer.send(message)  # a resend: consumers drop it as a duplicate
        producer.send(changed)
    bus = memory_backend.bus(bus_name)
    reader = Gateway(f"memory://{bus_name}", application="reader")
    assert [r.message_id for r in drain(reader, "metadata")] == [message_id]
    [moved] = bus.payloads("invalid")
    header = orjson.loads(moved)["messageHeader"]
    assert header["errorCode"] == "GENERR004"
    assert f"messageId: {message_id} was published at " in header["errorDescription"]
    assert history.extends(orjson.dumps(changed), decoration.original(moved))  # as sent, decorated
    assert bus.claims.status(message_id) == [(RECEIVED, message_digest(message)), (CONFLICT, message_digest(changed))]
    [warning] = [r.getMessage() for r in caplog.records if "reused for a different message" in r.getMessage()]
    assert message_digest(message) in warning
    assert message_digest(changed) in warning


def test_raw_records_on_input_are_checked_too(bus_name, message):
    bus = memory_backend.bus(bus_name)
    Gateway(f"memory://{bus_name}", application="reader")  # the transport plays the broker's part
    changed = copy.deepcopy(message)
    changed["messageBody"]["objectTitle"] = "Another title"
    records = [{"Data": orjson.dumps(m), "PartitionKey": "k"} for m in (message, changed, message)]
    assert bus.put_records(StreamName="input", Records=records)["FailedRecordCount"] == 0
    assert len(bus.payloads("metadata")) == 2  # the message and its resend
    assert len(bus.payloads("invalid")) == 1


def test_sqlite_claims_last_across_restarts(tmp_path):
    path = tmp_path / "state.sqlite"
    assert SqliteClaims(path).claim("id", "d1") is None
    again = SqliteClaims(path)  # another process of the host, or a restart
    first = again.claim("id", "d1")
    assert first is not None
    assert first.digest == "d1"
    assert again.claim("id", "d2") == first
    assert again.status("id") == [(RECEIVED, "d1"), (CONFLICT, "d2")]
