"""amqp:// receivers on a real RabbitMQ node never stall on a record (issue 21, item 2): the
issue's batch of 30 valid messages and year-0000 timestamps, and a record whose receiving raises."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest

from rdss.gateway import Gateway, Received, Receiver
from rdss.gateway.amqp import AmqpTransport
from rdss.gateway.backend import Outgoing
from rdss.model.workload import Workload
from tests.amqp.conftest import amqp_url
from tests.support import odd_records
from tests.support.rabbitmq import RabbitMQ

pytestmark = pytest.mark.integration


def collect(receiver: Receiver, idle: float = 1.5) -> list[Received]:
    got: list[Received] = []
    while (received := receiver.receive(timeout=idle)) is not None:
        got.append(received)
        receiver.ack(received)
    return got


def namespace(gateway: Gateway) -> str:
    transport = gateway.transport
    assert isinstance(transport, AmqpTransport)
    return transport.names.namespace


def test_thirty_valid_messages_and_year_zero_timestamps_on_input(rabbitmq: RabbitMQ, tmp_path: Path):
    payloads, valid, odd = odd_records.batch()
    url = amqp_url(rabbitmq, tmp_path / "amqp.sqlite")
    with Gateway(url, application="reader") as reader, reader.receiver("metadata", poll_interval=0.05) as inbox:
        transport = reader.transport
        assert isinstance(transport, AmqpTransport)
        outcomes = transport.publish([Outgoing("input", p, uuid.uuid4().hex, {}) for p in payloads])  # raw, one call
        assert all(o.ok for o in outcomes)
        delivered = collect(inbox)
        ns = namespace(reader)
    found = odd_records.placed(
        {
            "metadata": [r.payload for r in delivered],
            "invalid": rabbitmq.drain(f"{ns}.invalid"),
            "error": rabbitmq.drain(f"{ns}.error"),
        }
    )
    assert found == odd_records.expected(valid, odd)
    assert rabbitmq.drain(f"{ns}.dead_letter") == []


def test_a_record_whose_receiving_raises_is_moved_after_its_attempts(rabbitmq: RabbitMQ, tmp_path: Path):
    url = amqp_url(rabbitmq, tmp_path / "amqp.sqlite", retry="100ms:5")
    messages = [Workload(95 + i).message("MetadataCreate", "Event") for i in range(4)]
    poison = messages[1]["messageHeader"]["messageId"]
    calls: list[str] = []

    def selector(header: Any) -> bool:
        calls.append(header["messageId"])
        if header["messageId"] == poison:
            raise ValueError("the selector cannot read this header")
        return True

    with Gateway(url, application="producer") as producer, Gateway(url, application="reader") as reader:
        reader.transport.declare("metadata", "reader")  # type: ignore[attr-defined]
        producer.send_all(messages)
        with reader.receiver("metadata", selector=selector, max_attempts=3, poll_interval=0.05) as inbox:
            delivered = collect(inbox, idle=2.0)
            deadline = time.monotonic() + 5
            while calls.count(poison) < 3 and time.monotonic() < deadline:
                delivered += collect(inbox, idle=0.5)
        ns = namespace(reader)
    assert sorted(r.message_id for r in delivered) == sorted(
        m["messageHeader"]["messageId"] for i, m in enumerate(messages) if i != 1
    )
    assert calls.count(poison) == 3
    [moved] = rabbitmq.drain(f"{ns}.error")
    header = orjson.loads(moved)["messageHeader"]
    assert header["errorCode"] == "GENERR009"
    assert "ValueError: the selector cannot read this header" in header["errorDescription"]
    assert rabbitmq.drain(f"{ns}.dead_letter") == []
