"""amqp:// on a real RabbitMQ node: no key a producer sends through ``input`` decides a record's
path. There is no broker function in front of RabbitMQ: the gateway's publisher plays its part
(:mod:`rdss.gateway.inline_broker`), and the key it publishes with (the ``rdss-key`` header) is the
one that part gave the record - a producer's ``moved:<group>`` once travelled with a rejected
record to ``invalid``, where it read as that consumer group's move."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pika
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rdss.gateway import Gateway
from rdss.gateway.amqp import AmqpTransport
from rdss.gateway.amqp.naming import H_KEY
from rdss.gateway.backend import Outgoing
from rdss.model import decoration
from rdss.model.rejection import moved_by
from rdss.model.workload import Workload
from tests.amqp.conftest import amqp_url
from tests.support.rabbitmq import RabbitMQ

pytestmark = pytest.mark.integration

PREFIXES = ("", "moved:", "rdss-redrive:", "record#", "redriven#", "input:", "gateway:")


def taken(node: RabbitMQ, queue: str) -> list[tuple[dict[str, Any], bytes]]:
    """(headers, body) of every message on a queue, taken off it."""
    found = []
    with pika.BlockingConnection(pika.URLParameters(node.url)) as connection:
        channel = connection.channel()
        while True:
            method, properties, body = channel.basic_get(queue, auto_ack=True)
            if method is None:
                return found
            found.append((properties.headers or {}, body))


def test_any_key_sent_through_input_leads_to_the_content_verdict(rabbitmq: RabbitMQ, tmp_path: Path) -> None:
    """For any key - a consumer's ``moved:``, the old redrive mark, the repository's key forms,
    anything - a valid message sent to ``input`` reaches its channel's queue and an invalid one the
    invalid queue, decorated with the classifier's code and never keyed as a consumer's move."""
    url = amqp_url(rabbitmq, tmp_path / "amqp.sqlite")
    seeds = iter(range(28_200, 1_000_000))
    with Gateway(url, application="producer") as producer:
        transport = producer.transport
        assert isinstance(transport, AmqpTransport)
        [queue, *_] = transport.declare("metadata", "reader")
        namespace = transport.names.namespace

        @settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
        @given(prefix=st.sampled_from(PREFIXES), tail=st.text(max_size=30), valid=st.booleans())
        def one(prefix: str, tail: str, valid: bool) -> None:
            key = (prefix + tail) or "k"
            message = Workload(next(seeds)).message("MetadataCreate", "Event")
            if not valid:
                message["messageBody"]["objectUuid"] = "not-a-uuid"  # GENERR010
            payload = orjson.dumps(message)
            [outcome] = transport.publish([Outgoing("input", payload, key)])
            assert outcome.ok, outcome
            routed = [body for _, body in taken(rabbitmq, queue)]
            invalid = taken(rabbitmq, f"{namespace}.invalid")
            if valid:
                assert len(routed) == 1
                assert invalid == []
            else:
                assert routed == []
                [(headers, body)] = invalid
                assert decoration.original(body) == payload
                assert orjson.loads(body)["messageHeader"]["errorCode"] == "GENERR010"
                assert moved_by(str(headers.get(H_KEY))) is None, key

        one()
