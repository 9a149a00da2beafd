"""amqp:// on a real RabbitMQ node: no header stalls a consumer group.

A producer (or any client that can publish to the exchanges) chooses every AMQP header of its
message, including those this backend keeps itself: ``x-rdss-attempts``, RabbitMQ's
``x-delivery-count``, the key, the envelope, the auth token and context. One message whose
``x-rdss-attempts`` was ``"lots"`` made the consumer raise on every poll, so the messages after it
were never delivered. Now a header that is not a count counts as none, one that is not text is
absent, and a copy carries what pika cannot write again as text: the message is delivered, moved
with a code or dead-lettered with a reason, and the group goes on.
"""

from __future__ import annotations

import struct
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pika
import pika.data
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rdss.gateway import Gateway, Received, Receiver
from rdss.gateway.amqp import AmqpTransport, routing_key
from rdss.gateway.amqp import headers as amqp_headers
from rdss.gateway.amqp.naming import (
    H_ATTEMPTS,
    H_AUTH_TOKEN,
    H_CHANNEL,
    H_CONTEXT,
    H_DELIVERY_COUNT,
    H_ENVELOPE,
    H_KEY,
    H_QUEUE,
    H_REASON,
)
from rdss.model.messages import serialise
from rdss.model.workload import Workload
from tests.amqp.conftest import amqp_url
from tests.support.rabbitmq import RabbitMQ

pytestmark = pytest.mark.integration

#: Every header this backend reads or writes, and RabbitMQ's own that it reads.
OWN_HEADERS = (H_ATTEMPTS, H_DELIVERY_COUNT, H_KEY, H_CHANNEL, H_ENVELOPE, H_REASON, H_QUEUE, H_AUTH_TOKEN, H_CONTEXT)


@contextmanager
def doubles_on_the_wire() -> Iterator[None]:
    """Let this test's own publisher write doubles (AMQP ``d``), as a Java or Go client does:
    pika reads them but never writes them. Only around the test's basic_publish."""
    original = pika.data.encode_value

    def encode(pieces: list[bytes], value: Any) -> int:
        if isinstance(value, float):
            pieces.append(struct.pack(">cd", b"d", value))
            return 9
        return int(original(pieces, value))

    pika.data.encode_value = encode
    try:
        yield
    finally:
        pika.data.encode_value = original


class Producer:
    """A raw AMQP publisher onto the ``events`` exchange, confirmed, headers as given."""

    def __init__(self, node: RabbitMQ, transport: AmqpTransport) -> None:
        self.connection = pika.BlockingConnection(pika.URLParameters(node.url))
        self.channel = self.connection.channel()
        self.channel.confirm_delivery()
        self.exchange = transport.names.events

    def publish(self, message: dict[str, Any] | bytes, headers: dict[str, Any]) -> None:
        body = message if isinstance(message, bytes) else serialise(message)
        properties = pika.BasicProperties(headers={H_ENVELOPE: "rdss", **headers}, delivery_mode=2)
        with doubles_on_the_wire():
            self.channel.basic_publish(self.exchange, routing_key("metadata", "MetadataCreate"), body, properties)

    def close(self) -> None:
        self.connection.close()


def placed(node: RabbitMQ, namespace: str) -> dict[str, list[tuple[dict[str, Any], bytes]]]:
    """What the invalid, error and dead_letter queues hold now, (headers, body), taken off them."""
    found: dict[str, list[tuple[dict[str, Any], bytes]]] = {}
    with pika.BlockingConnection(pika.URLParameters(node.url)) as connection:
        channel = connection.channel()
        for name in ("invalid", "error", "dead_letter"):
            found[name] = []
            while True:
                method, properties, body = channel.basic_get(f"{namespace}.{name}", auto_ack=True)
                if method is None:
                    break
                found[name].append((properties.headers or {}, body))
    return found


def receive_until(
    receiver: Receiver, done: Callable[[], bool], handle: Callable[[Received], None], seconds: float
) -> None:
    deadline = time.monotonic() + seconds
    while not done() and time.monotonic() < deadline:
        received = receiver.receive(timeout=0.2)
        if received is not None:
            handle(received)


def test_an_attempts_header_that_is_not_a_number_does_not_stall_the_group(rabbitmq: RabbitMQ, tmp_path: Path) -> None:
    """x-rdss-attempts: "lots", then three messages: all four are delivered, the first counted as
    on its first attempt; nothing is moved or dead-lettered."""
    url = amqp_url(rabbitmq, tmp_path / "amqp.sqlite")
    messages = [Workload(2800 + i).message("MetadataCreate", "Event") for i in range(4)]
    ids = [m["messageHeader"]["messageId"] for m in messages]
    attempts: dict[str, int] = {}
    with Gateway(url, application="reader") as reader:
        transport = reader.transport
        assert isinstance(transport, AmqpTransport)
        transport.declare("metadata", "reader")
        producer = Producer(rabbitmq, transport)
        producer.publish(messages[0], {H_ATTEMPTS: "lots"})
        for message in messages[1:]:
            producer.publish(message, {})
        producer.close()
        with reader.receiver("metadata", poll_interval=0.05) as inbox:

            def handle(received: Received) -> None:
                attempts[received.message_id] = received.deliveries[0].attributes["attempts"]
                inbox.ack(received)

            receive_until(inbox, lambda: len(attempts) == 4, handle, 30)
        left = placed(rabbitmq, transport.names.namespace)
    assert sorted(attempts) == sorted(ids)  # every input accounted for: released to the group
    assert attempts[ids[0]] == 0
    assert left == {"invalid": [], "error": [], "dead_letter": []}


def test_a_producers_x_death_does_not_crash_the_delay_tier(rabbitmq: RabbitMQ, tmp_path: Path) -> None:
    """x-death is RabbitMQ's record of dead-letterings; one a producer wrote (an array of arrays)
    made RabbitMQ 3.10 crash the delay tier's queue when the refused message's TTL expired, losing
    it and whatever else waited there. A copy starts afresh, without RabbitMQ's headers: both
    refused messages come back through the tier and are delivered."""
    url = amqp_url(rabbitmq, tmp_path / "amqp.sqlite")
    messages = [Workload(2810 + i).message("MetadataCreate", "Event") for i in range(2)]
    ids = [m["messageHeader"]["messageId"] for m in messages]
    refused: set[str] = set()
    delivered: set[str] = set()
    with Gateway(url, application="reader") as reader:
        transport = reader.transport
        assert isinstance(transport, AmqpTransport)
        transport.declare("metadata", "reader")
        producer = Producer(rabbitmq, transport)
        producer.publish(messages[0], {"x-death": [[1]], "x-first-death-queue": [[1]]})
        producer.publish(messages[1], {})
        producer.close()
        with reader.receiver("metadata", poll_interval=0.05) as inbox:

            def handle(received: Received) -> None:
                if received.message_id not in refused:  # each refused once: through the tier
                    refused.add(received.message_id)
                    inbox.nack(received, "not yet")
                    return
                delivered.add(received.message_id)
                inbox.ack(received)

            receive_until(inbox, lambda: len(delivered) == 2, handle, 30)
        left = placed(rabbitmq, transport.names.namespace)
    assert delivered == set(ids)
    assert left == {"invalid": [], "error": [], "dead_letter": []}


# -- any value of any header -------------------------------------------------------------------
_SCALARS = st.one_of(
    st.text(max_size=30),
    st.binary(max_size=30),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.sampled_from([0, 1, 4, 5, 2**31 - 1, 2**31, -1]),
    # RabbitMQ refuses NaN and the infinities itself (the publisher's connection is closed, nothing
    # is queued): every other double
    st.floats(allow_nan=False, allow_infinity=False),
    st.builds(
        lambda raw, places: Decimal(raw).scaleb(-places),
        st.integers(min_value=-(2**31), max_value=2**31 - 1),
        st.integers(min_value=0, max_value=9),
    ),
    st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(2200, 1, 1)).map(
        lambda d: d.replace(microsecond=0)
    ),
    st.none(),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(min_size=1, max_size=12), inner, max_size=3),
    max_leaves=6,
)
_NAMES = st.one_of(
    st.sampled_from((*OWN_HEADERS, "x-death", "x-first-death-queue")),
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz-", min_size=1, max_size=12).map(lambda s: f"x-rdss-{s}"),
)
_HEADERS = st.dictionaries(_NAMES, _VALUES, min_size=1, max_size=4)


def test_any_value_of_any_header_never_stalls_the_group(rabbitmq: RabbitMQ, tmp_path: Path) -> None:
    """For any headers (wrong types, huge, negative, bytes, doubles, decimals, nested tables), on a
    message that is valid or invalid, accepted or refused once by its handler, then a plain message
    after it: the plain one is delivered, and the hostile one is delivered, moved to invalid or
    error with a code, or dead-lettered with a reason - none missing."""
    url = amqp_url(rabbitmq, tmp_path / "amqp.sqlite")
    seed = iter(range(28_000, 1_000_000))
    with Gateway(url, application="reader") as reader:
        transport = reader.transport
        assert isinstance(transport, AmqpTransport)
        transport.declare("metadata", "reader")
        namespace = transport.names.namespace
        producer = Producer(rabbitmq, transport)
        inbox = reader.receiver("metadata", poll_interval=0.02)

        @settings(
            max_examples=40,
            deadline=None,
            derandomize=True,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
        )
        @given(headers=_HEADERS, broken=st.booleans(), refuse=st.booleans())
        def one(headers: dict[str, Any], broken: bool, refuse: bool) -> None:
            hostile = Workload(next(seed)).message("MetadataCreate", "Event")
            hostile["messageHeader"]["messageId"] = hostile_id = str(uuid.uuid4())
            if broken:
                hostile["messageBody"]["objectValue"] = 4  # GENERR001: moved, its headers copied
            follower = Workload(next(seed)).message("MetadataCreate", "Event")
            follower_id = follower["messageHeader"]["messageId"]
            producer.publish(hostile, headers)
            producer.publish(follower, {})
            delivered: set[str] = set()
            refused: set[str] = set()
            found: dict[str, list[tuple[dict[str, Any], bytes]]] = {"invalid": [], "error": [], "dead_letter": []}

            def handle(received: Received) -> None:
                if refuse and received.message_id == hostile_id and hostile_id not in refused:
                    refused.add(hostile_id)  # through a delay tier: a copy with its headers
                    inbox.nack(received, "refused once")
                    return
                delivered.add(received.message_id)
                inbox.ack(received)

            def settled() -> bool:
                for name, bodies in placed(rabbitmq, namespace).items():
                    found[name] += bodies
                moved = any(hostile_id.encode() in body for kept in found.values() for _, body in kept)
                return follower_id in delivered and (hostile_id in delivered or moved)

            receive_until(inbox, settled, handle, 20)
            assert follower_id in delivered, f"the message after the hostile one was not delivered ({headers!r})"
            where = [name for name, kept in found.items() if any(hostile_id.encode() in b for _, b in kept)]
            assert (hostile_id in delivered) + len(where) == 1, (headers, delivered, where)
            for name in where:
                [(kept_headers, body)] = [(h, b) for h, b in found[name] if hostile_id.encode() in b]
                if name == "dead_letter":  # set aside with a reason
                    assert kept_headers[H_REASON], kept_headers
                else:  # moved with the spec's code
                    assert orjson.loads(body)["messageHeader"]["errorCode"].startswith("GENERR")
            if broken:
                assert hostile_id not in delivered

        try:
            one()
        finally:
            inbox.close()
            producer.close()


@given(headers=st.dictionaries(st.text(max_size=12), _VALUES | st.integers(), max_size=6))
def test_reading_any_headers_never_raises_and_a_copy_is_always_writable(headers: dict[str, Any]) -> None:
    """The readers of every header this backend keeps, and the copy's headers, on any values (any
    integer too, beyond what AMQP carries): a count from 0 to MAX_COUNT, text or None, and
    headers pika encodes."""
    for name in OWN_HEADERS:
        assert 0 <= amqp_headers.counted(headers, name) <= amqp_headers.MAX_COUNT
        assert amqp_headers.text(headers.get(name)) is None or isinstance(amqp_headers.text(headers.get(name)), str)
    pika.data.encode_table([], amqp_headers.writable(headers))
