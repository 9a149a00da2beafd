"""memory:// receivers never stall on a record (issue 21, item 2): the issue's batch of 30 valid
messages and year-0000 timestamps put in one call, and a record whose receiving raises."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from rdss.gateway import Gateway, Received
from rdss.gateway.log import memory as memory_backend
from rdss.model.workload import Workload
from tests.support import odd_records


@pytest.fixture
def bus_name() -> Iterator[str]:
    name = f"t-{uuid.uuid4().hex[:8]}"
    yield name
    memory_backend.discard(name)


def drain(gateway: Gateway, channel: str, **options: Any) -> list[Received]:
    got: list[Received] = []
    with gateway.receiver(channel, poll_interval=0.01, **options) as inbox:
        while (received := inbox.receive(timeout=0.2)) is not None:
            got.append(received)
            inbox.ack(received)
    return got


def test_thirty_valid_messages_and_year_zero_timestamps_in_one_put(bus_name):
    """Before, the listener logged "receiving failed (year 0 is out of range)" and never
    delivered the valid messages read with the first year-0000 record."""
    payloads, valid, odd = odd_records.batch()
    gateway = Gateway(f"memory://{bus_name}", application="reader")
    bus = memory_backend.bus(bus_name)
    response = bus.put_records(
        StreamName="input", Records=[{"Data": p, "PartitionKey": uuid.uuid4().hex} for p in payloads]
    )
    assert response["FailedRecordCount"] == 0
    delivered = drain(gateway, "metadata")
    found = odd_records.placed(
        {
            "metadata": [r.payload for r in delivered],
            "invalid": bus.payloads("invalid"),
            "error": bus.payloads("error"),
        }
    )
    assert found == odd_records.expected(valid, odd)


def test_a_record_whose_receiving_raises_is_moved_after_its_attempts_and_the_rest_delivered(bus_name):
    messages = [Workload(90 + i).message("MetadataCreate", "Event") for i in range(5)]
    poison = messages[1]["messageHeader"]["messageId"]
    producer = Gateway(f"memory://{bus_name}", application="producer")
    producer.send_all(messages)
    calls: list[str] = []

    def selector(header: Any) -> bool:
        calls.append(header["messageId"])
        if header["messageId"] == poison:
            raise ValueError("the selector cannot read this header")
        return True

    reader = Gateway(f"memory://{bus_name}", application="reader")
    delivered = drain(reader, "metadata", selector=selector, max_attempts=3)
    assert [r.message_id for r in delivered] == [
        m["messageHeader"]["messageId"] for i, m in enumerate(messages) if i != 1
    ]
    assert calls.count(poison) == 3
    [moved] = memory_backend.bus(bus_name).payloads("error")
    header = orjson.loads(moved)["messageHeader"]
    assert header["errorCode"] == "GENERR009"
    assert header["errorDescription"] == (
        "gave up after 3 failed attempts at receiving it: ValueError: the selector cannot read this header"
    )
    # nothing comes again: a second reader of the group finds the partition settled
    assert drain(reader, "metadata", selector=selector, max_attempts=3) == []
