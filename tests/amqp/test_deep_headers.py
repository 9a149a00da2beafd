"""A RabbitMQ message whose headers pika could not read - a table nested thousands of levels
deep, a timestamp past year 9999 - no longer stalls the queue it is on: pika raised inside its
connection's I/O loop, the connection dropped, RabbitMQ put the message back first in line, and
the bridge (or any receiver of the group) read nothing more, then stopped as "idle"."""

from __future__ import annotations

import contextlib
import struct
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pika
import pika.data
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rdss.gateway import Gateway
from rdss.gateway.amqp import AmqpTransport, fieldtables, routing_key
from rdss.gateway.amqp.naming import H_ENVELOPE
from rdss.gateway.bridge import open_bridge
from rdss.gateway.log import memory as memory_backend
from rdss.model.messages import serialise
from rdss.model.workload import Workload
from tests.amqp.conftest import amqp_url
from tests.amqp.test_amqp_backend import collect
from tests.support.rabbitmq import RabbitMQ

pytestmark = pytest.mark.integration


class Raw(bytes):
    """A header value written as these bytes, type code first (what another client may send)."""


@contextlib.contextmanager
def raw_values() -> Iterator[None]:
    original = pika.data.encode_value

    def encode(pieces: list[bytes], value: Any) -> int:
        if isinstance(value, Raw):
            pieces.append(bytes(value))
            return len(value)
        return int(original(pieces, value))

    pika.data.encode_value = encode
    try:
        yield
    finally:
        pika.data.encode_value = original


def nested(depth: int, kind: str = "F") -> Raw:
    """A table ("F") or array ("A") nested ``depth`` levels around a string, built from the
    inside out (pika's own writer recurses, and fails past a thousand levels)."""
    value = b"S" + struct.pack(">I", 1) + b"x"
    for _ in range(depth):
        if kind == "F":
            inner = b"\x01a" + value
            value = b"F" + struct.pack(">I", len(inner)) + inner
        else:
            value = b"A" + struct.pack(">I", len(value)) + value
    return Raw(value)


#: A timestamp no datetime holds (RabbitMQ takes it; pika raised OverflowError reading it).
FAR_FUTURE = Raw(b"T" + struct.pack(">Q", 2**64 - 1))


def publish(node: RabbitMQ, exchange: str, bodies: list[tuple[bytes, dict[str, Any]]]) -> None:
    with pika.BlockingConnection(pika.URLParameters(node.url)) as connection, raw_values():
        channel = connection.channel()
        channel.confirm_delivery()
        for body, headers in bodies:
            properties = pika.BasicProperties(headers={H_ENVELOPE: "rdss", **headers}, delivery_mode=2)
            channel.basic_publish(exchange, routing_key("metadata", "MetadataCreate"), body, properties)


def test_the_bridge_moves_messages_past_ones_whose_headers_pika_could_not_read(
    rabbitmq: RabbitMQ, tmp_path: Path
) -> None:
    url = amqp_url(rabbitmq, tmp_path / "amqp.sqlite")
    memory = f"memory://deep-{time.monotonic_ns()}"
    bridge = open_bridge(url, memory, ["metadata"], poll_interval=0.1)
    bridge.step()  # the bridge's queues exist
    messages = [serialise(Workload(2900 + i).message("MetadataCreate", "Event")) for i in range(5)]
    exchange = bridge.source.transport.names.events  # type: ignore[attr-defined]
    publish(
        rabbitmq,
        exchange,
        [
            (messages[0], {}),
            (messages[1], {"deep": nested(2000)}),
            (messages[2], {"when": FAR_FUTURE}),
            (messages[3], {"deep": nested(15_000, "A")}),
            (messages[4], {}),
        ],
    )
    stats = bridge.run(idle_timeout=3)
    assert stats.forwarded == 5
    arrived = memory_backend.bus(memory.removeprefix("memory://")).payloads("metadata")
    assert sorted(orjson.loads(p)["messageHeader"]["messageId"] for p in arrived) == sorted(
        orjson.loads(m)["messageHeader"]["messageId"] for m in messages
    )


@pytest.fixture(scope="module")
def reader(rabbitmq: RabbitMQ, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Gateway, str]]:
    url = amqp_url(rabbitmq, tmp_path_factory.mktemp("deep") / "amqp.sqlite")
    with Gateway(url, application="reader") as gateway:
        transport = gateway.transport
        assert isinstance(transport, AmqpTransport)
        transport.declare("metadata", "reader")
        yield gateway, transport.names.events


_HOSTILE = st.one_of(
    st.builds(nested, st.integers(0, 18_000) | st.integers(60, 70), st.sampled_from("FA")),
    st.just(FAR_FUTURE),
)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=_HOSTILE, seed=st.integers(0, 10**6))
def test_no_header_value_stops_the_group(
    rabbitmq: RabbitMQ, reader: tuple[Gateway, str], value: Raw, seed: int
) -> None:
    """Any nesting (tables or arrays, down to what a frame holds) or unreadable value, then a
    plain message: the receiver gets both, the hostile one's headers read down to the limit."""
    gateway, exchange = reader
    hostile = Workload(seed).message("MetadataCreate", "Event")
    follower = Workload(seed + 1).message("MetadataCreate", "Event")
    for message in (hostile, follower):  # new to the group's repository, whatever the seed
        message["messageHeader"]["messageId"] = str(uuid.uuid4())
    publish(rabbitmq, exchange, [(serialise(hostile), {"h": value}), (serialise(follower), {})])
    with gateway.receiver("metadata", poll_interval=0.05) as inbox:
        got = collect(inbox, 2, timeout=20)
    assert [r.message_id for r in got] == [
        hostile["messageHeader"]["messageId"],
        follower["messageHeader"]["messageId"],
    ]
    headers = got[0].deliveries[0].attributes["headers"]
    depth, found = 0, headers["h"]
    while isinstance(found, dict | list) and found:
        found = found["a"] if isinstance(found, dict) else found[0]
        depth += 1
    assert depth < fieldtables.MAX_DEPTH
