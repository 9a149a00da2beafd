"""amqp://: a messageId published again for a different message is moved to invalid and
recorded as a CONFLICT in the host's state file; a resend is not (issue 21, item 4)."""

from __future__ import annotations

import copy
from pathlib import Path

import orjson
import pytest

from rdss.gateway import Gateway
from rdss.gateway.amqp import AmqpTransport
from rdss.gateway.claims import SqliteClaims
from rdss.model.conflicts import CONFLICT, message_digest
from rdss.model.workload import Workload
from rdss.repository.entries import RECEIVED
from tests.amqp.conftest import amqp_url
from tests.support.rabbitmq import RabbitMQ

pytestmark = pytest.mark.integration


def test_a_different_message_under_a_used_id(rabbitmq: RabbitMQ, tmp_path: Path):
    state = tmp_path / "amqp.sqlite"
    url = amqp_url(rabbitmq, state)
    message = Workload(710).message("MetadataCreate", "Event")
    changed = copy.deepcopy(message)
    changed["messageBody"]["objectTitle"] = "Another title"
    message_id = message["messageHeader"]["messageId"]
    with Gateway(url, application="reader") as reader, reader.receiver("metadata", poll_interval=0.05) as inbox:
        with Gateway(url, application="producer") as producer:
            producer.send(message)
            producer.send(message)  # a resend
            producer.send(changed)
        got = []
        while (received := inbox.receive(timeout=1.5)) is not None:
            got.append(received.message_id)
            inbox.ack(received)
        transport = reader.transport
        assert isinstance(transport, AmqpTransport)
        namespace = transport.names.namespace
    assert got == [message_id]  # the resend dropped by the consumer, the other message never delivered
    [moved] = rabbitmq.drain(f"{namespace}.invalid")
    header = orjson.loads(moved)["messageHeader"]
    assert header["errorCode"] == "GENERR004"
    assert f"messageId: {message_id} was published at " in header["errorDescription"]
    assert SqliteClaims(state).status(message_id) == [
        (RECEIVED, message_digest(message)),
        (CONFLICT, message_digest(changed)),
    ]
