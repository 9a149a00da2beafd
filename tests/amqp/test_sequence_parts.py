"""amqp://: every part of a sequence ends in exactly one place where the inline broker routes what
producers put on ``input`` and the consumer's receiver holds parts until their sequence is whole.

Two parts at one position (another fragment under another messageId), then the last part: the
first is delivered in its whole message, the second moved alone to ``invalid`` with GENERR004.
A total no sequence can have (10^30, 2^31) is refused once, by the inline broker."""

from __future__ import annotations

import json

import orjson
import pytest

from rdss.gateway import Gateway
from rdss.gateway.amqp import AmqpTransport
from rdss.gateway.backend import Outgoing
from rdss.model import decoration, history
from tests.support.parts import other_fragment, parts_of
from tests.support.rabbitmq import RabbitMQ

pytestmark = pytest.mark.integration


def publish_and_consume(url: str, payloads: list[bytes]) -> tuple[list[list[bytes]], str]:
    """Raw records on ``input`` (as any producer may write them), then everything a consumer of
    ``metadata`` is given (the parts of each message); and the namespace of the queues."""
    delivered: list[list[bytes]] = []
    with Gateway(url, application="consumer") as consumer, consumer.receiver("metadata", poll_interval=0.05) as inbox:
        with Gateway(url, application="producer") as producer:
            producer.transport.publish([Outgoing("input", p, f"k{i}") for i, p in enumerate(payloads)])
        while (received := inbox.receive(timeout=1.5)) is not None:
            delivered.append([d.payload for d in received.deliveries])
            inbox.ack(received)
        transport = consumer.transport
        assert isinstance(transport, AmqpTransport)
        namespace = transport.names.namespace
    return delivered, namespace


def test_two_bodies_at_one_position_then_the_last_part(rabbitmq: RabbitMQ, url: str):
    a, last = parts_of(720, 2)
    b = other_fragment(a)
    inputs = [orjson.dumps(p) for p in (a, b, last)]
    delivered, namespace = publish_and_consume(url, inputs)
    assert len(delivered) == 1
    assert [any(history.extends(inputs[i], r) for r in delivered[0]) for i in range(3)] == [True, False, True]
    [moved] = rabbitmq.drain(f"{namespace}.invalid")
    assert history.extends(inputs[1], decoration.original(moved))
    header = orjson.loads(moved)["messageHeader"]
    assert header["errorCode"] == "GENERR004"
    assert f"held by part {a['messageHeader']['messageId']}" in header["errorDescription"]
    assert rabbitmq.drain(f"{namespace}.error") == []


@pytest.mark.parametrize("total", [10**30, 2**31])
def test_a_total_no_sequence_can_have_is_refused_once(rabbitmq: RabbitMQ, url: str, total: int):
    part = parts_of(721, 2)[0]
    part["messageHeader"]["messageSequence"]["total"] = total
    payload = json.dumps(part).encode()
    delivered, namespace = publish_and_consume(url, [payload])
    assert delivered == []
    [moved] = rabbitmq.drain(f"{namespace}.invalid")
    assert decoration.original(moved) == payload
    header = orjson.loads(moved)["messageHeader"]
    assert header["errorCode"] == "GENERR004"
    assert header["errorDescription"].startswith(f"messageHeader.messageSequence.total: {total} parts is more than")
    assert rabbitmq.drain(f"{namespace}.error") == []
