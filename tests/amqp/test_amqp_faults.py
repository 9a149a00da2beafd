"""Connections dropped under the amqp:// backend: no message lost, none processed twice."""

from __future__ import annotations

import time

import pytest

from rdss.gateway import Gateway
from rdss.gateway.amqp import AmqpTransport
from rdss.model.workload import Workload
from tests.amqp.test_amqp_backend import collect
from tests.support.rabbitmq import TcpProxy

pytestmark = pytest.mark.integration


@pytest.fixture
def proxy(rabbitmq):
    relay = TcpProxy(rabbitmq.port)
    yield relay
    relay.close()


def test_a_connection_dropped_mid_publish_loses_nothing(url, proxy):
    """The publisher's connection is cut after ~300 kB of a 2,000-message batch, with confirms
    outstanding: the unconfirmed messages are published again on a new connection, and the
    consumer, reading directly, processes every message exactly once."""
    messages = Workload(seed=21).mix(2000)
    with Gateway(proxy.url(url), application="producer") as producer, Gateway(url, application="reader") as reader:
        transport = producer.transport
        assert isinstance(transport, AmqpTransport)
        with reader.receiver("metadata", batch_size=500) as inbox:
            proxy.cut_after(300_000)
            receipts = producer.send_all(messages, channel="metadata")
            got = collect(inbox, len(messages), timeout=60)
            assert inbox.receive(timeout=0.5) is None
            stats = inbox.stats
    assert proxy.cuts >= 1
    assert transport.publisher.connections >= 2
    assert len(receipts) == len(messages)
    ids = [r.message_id for r in got]
    assert len(ids) == len(set(ids)) == len(messages)  # every one, once (republished ones dropped as duplicates)
    assert stats.records >= len(messages)


def test_a_consumer_connection_dropped_mid_stream_resumes_without_loss(url, proxy):
    """The consumer's connection is cut while it holds unacknowledged messages: RabbitMQ puts them
    back, the consumer reconnects on its next poll, and each message is processed once."""
    messages = Workload(seed=22).mix(300)
    with (
        Gateway(url, application="producer") as producer,
        Gateway(proxy.url(url), application="reader") as reader,
        reader.receiver("metadata", batch_size=50, poll_interval=0.05) as inbox,
    ):
        producer.send_all(messages, channel="metadata")
        got = collect(inbox, 100)
        proxy.cut()
        deadline = time.monotonic() + 30
        while len(got) < len(messages) and time.monotonic() < deadline:
            got.extend(collect(inbox, len(messages) - len(got), timeout=1))
        assert inbox.receive(timeout=0.5) is None
    ids = [r.message_id for r in got]
    assert proxy.cuts >= 1
    assert len(ids) == len(set(ids)) == len(messages)
