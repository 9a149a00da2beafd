"""The amqp:// backend on a real RabbitMQ node: topology, Mosaic envelopes, classification,
delay-queue retries, dead letters and the out-of-process redelivery counter."""

from __future__ import annotations

import itertools
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson
import pika
import pytest

from rdss.gateway import Gateway, Received, Receiver, SendFailed, TransportError
from rdss.gateway.amqp import AmqpTransport, Tier, mosaic, parse_tiers, routing_key
from rdss.gateway.amqp.redeliveries import SqliteRedeliveries
from rdss.gateway.backend import Outgoing
from rdss.gateway.url import URLError, parse
from rdss.model import history
from rdss.model.messages import new_message, serialise
from rdss.model.workload import Workload
from tests.amqp.conftest import amqp_url
from tests.support.hops import unhopped
from tests.support.rabbitmq import RabbitMQ

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def namespace(url: str) -> str:
    return parse_qs(urlsplit(url).query)["namespace"][0]


def state(url: str) -> str:
    return parse_qs(urlsplit(url).query)["state"][0]


def collect(receiver: Receiver, count: int, timeout: float = 10.0) -> list[Received]:
    got: list[Received] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        received = receiver.receive(timeout=0.5)
        if received is not None:
            got.append(received)
            receiver.ack(received)
    return got


def drain(node: RabbitMQ, queue: str) -> list[tuple[Any, bytes]]:
    """Every message in a queue, taken with basic.get (properties, body)."""
    found = []
    with pika.BlockingConnection(pika.URLParameters(node.url)) as connection:
        channel = connection.channel()
        while True:
            method, properties, body = channel.basic_get(queue, auto_ack=True)
            if method is None:
                return found
            found.append((properties, body))


def routed(transport: AmqpTransport, channel: str, payload: bytes, message_type: str = "MetadataCreate") -> None:
    """Publish raw bytes on a routed channel as a producer naming this type would."""
    headers = {"messageType": message_type, "messageClass": "Event", "messageId": "raw"}
    [outcome] = transport.publish([Outgoing(channel, payload, "k", headers)])
    assert outcome.ok, outcome


# -- URLs and names ----------------------------------------------------------------------------
def test_tiers_parse_and_are_named_after_their_delay():
    assert parse_tiers("10s:3,30s:3") == (Tier(10.0, 3), Tier(30.0, 3))
    assert parse_tiers("200ms,1m:2") == (Tier(0.2, 1), Tier(60.0, 2))
    assert parse_tiers("none") == ()
    assert [t.name for t in parse_tiers("10s,30s,200ms")] == ["retry.10s", "retry.30s", "retry.200ms"]
    with pytest.raises(URLError):
        parse_tiers("ten seconds")


def test_routing_keys_follow_mosaic():
    assert routing_key("metadata", "MetadataCreate") == "metadata.metadata.MetadataCreate"
    assert routing_key("responses", "VocabularyRead") == "responses.vocabulary.VocabularyRead"


def test_a_bad_option_is_a_url_error(rabbitmq):
    with pytest.raises(URLError, match="envelope"):
        Gateway(f"{rabbitmq.url}?envelope=xml")


@pytest.mark.parametrize(
    ("query", "said"),
    [
        ("namespace=" + "x" * 300, "at most 64 bytes"),  # was pika's ShortStringTooLong, a traceback
        ("namespace=a%00b", "printable"),  # was open()'s "embedded null byte", a traceback
        ("namespace=a%07b", "printable"),
        ("state=a%00b", "NUL"),
    ],
)
def test_a_namespace_or_state_file_that_cannot_work_is_a_url_error(rabbitmq, query, said):
    with pytest.raises(URLError, match=said):
        Gateway(f"{rabbitmq.url}?{query}")


def test_a_state_file_that_is_a_directory_is_said_in_one_line(rabbitmq, tmp_path):
    with pytest.raises(TransportError, match="is a directory, not a SQLite file"):
        Gateway(amqp_url(rabbitmq, tmp_path))


# -- sending and receiving ---------------------------------------------------------------------
def test_the_topology_and_the_wire_format(url, rabbitmq):
    ns = namespace(url)
    message = Workload(seed=5).message("MetadataCreate", "Event")
    with Gateway(url, application="producer") as gateway:
        queues = gateway.transport.declare("metadata", "catalogue")  # type: ignore[attr-defined]
        gateway.send(message, channel="metadata")
    assert f"{ns}.catalogue.metadata.MetadataCreate" in queues
    assert len(queues) == 7  # one per messageType of every version (4.0.0's PreservationEvent too)
    assert f"{ns}.catalogue.metadata.PreservationEvent" in queues
    depths = rabbitmq.queue_depths()
    for name in ("dead_letter", "invalid", "error", "retry.200ms", "retry.500ms"):
        assert f"{ns}.{name}" in depths
    [(properties, body)] = drain(rabbitmq, f"{ns}.catalogue.metadata.MetadataCreate")
    envelope = orjson.loads(body)  # a Mosaic envelope on the wire
    assert envelope["message_id"] == message["messageHeader"]["messageId"]
    assert envelope["message_type"] == "MetadataCreate"
    assert unhopped(mosaic.to_rdss(envelope)) == (message, ["producer"])
    assert properties.delivery_mode == 2
    assert properties.message_id == message["messageHeader"]["messageId"]
    assert properties.app_id == "producer"


def test_envelope_rdss_sends_the_message_as_it_is(rabbitmq, tmp_path):
    url = amqp_url(rabbitmq, tmp_path / "s.sqlite", envelope="rdss")
    message = Workload(seed=6).message("MetadataDelete", "Event")
    with Gateway(url, application="producer") as gateway:
        gateway.transport.declare("metadata", "catalogue")  # type: ignore[attr-defined]
        gateway.send(message, channel="metadata")
    [(_, body)] = drain(rabbitmq, f"{namespace(url)}.catalogue.metadata.MetadataDelete")
    assert history.extends(serialise(message), body)  # as it is, plus the producer's hop


def test_a_message_no_queue_is_bound_for_is_refused_not_dropped(url):
    message = Workload(seed=7).message("MetadataCreate", "Event")
    with Gateway(url, application="producer") as gateway:
        with pytest.raises(SendFailed) as failed:
            gateway.send(message, channel="nobody-listens")
        assert failed.value.error_code == "GENERR006"
        assert failed.value.undelivered[0].error_code == "NO_ROUTE"
        entry = gateway.repository.entry(message["messageHeader"]["messageId"])
        assert entry is not None
        assert entry.status == "TO_SEND"


def test_groups_each_get_every_message_and_channels_stay_apart(url):
    messages = Workload(seed=8).mix(30)
    with (
        Gateway(url, application="producer") as producer,
        Gateway(url, application="a") as a,
        Gateway(url, application="b") as b,
        a.receiver("metadata") as first,
        b.receiver("metadata") as second,
        b.receiver("vocabulary") as other,
    ):
        producer.send_all(messages, channel="metadata")
        got_a = collect(first, 30)
        got_b = collect(second, 30)
        assert other.receive(timeout=0.5) is None
    expected = {m["messageHeader"]["messageId"] for m in messages}
    assert {r.message_id for r in got_a} == expected
    assert {r.message_id for r in got_b} == expected


def test_sequences_travel_in_parts_and_arrive_whole(url):
    large = Workload(seed=9).large(1_300_000)
    with (
        Gateway(url, application="producer") as producer,
        Gateway(url, application="reader") as reader,
        reader.receiver("metadata") as inbox,
    ):
        receipt = producer.send(large, channel="metadata")
        [received] = collect(inbox, 1)
    assert receipt.split
    assert received.body == large["messageBody"]  # the whole body, from its parts
    assert len(received.deliveries) == len(receipt.parts)


def test_request_reply_through_the_broker(url):
    request = new_message(
        "MetadataRead", {"objectUuid": "0b4a5ad2-ae59-4d9d-9b8e-3a1c2a4c7f10"}, message_class="Command"
    )
    with Gateway(url, application="repository") as repository, Gateway(url, application="asker") as asker:
        stop = threading.Event()

        def answer() -> None:
            from rdss.model.messages import reply

            with repository.receiver("metadata", poll_interval=0.05) as inbox:
                while not stop.is_set():
                    received = inbox.receive(timeout=0.2)
                    if received is not None:
                        body = Workload(seed=1).research_object()
                        repository.send(reply(received.message, body))  # to input: routed to responses
                        inbox.ack(received)

        repository.transport.declare("metadata", "repository")  # type: ignore[attr-defined]
        responder = threading.Thread(target=answer, daemon=True)
        responder.start()
        try:
            answered = asker.request(request, timeout=15, reply_to="responses")
        finally:
            stop.set()
            responder.join(10)
    assert answered["messageHeader"]["correlationId"] == request["messageHeader"]["messageId"]


# -- classification ----------------------------------------------------------------------------
def test_invalid_messages_are_decorated_and_moved_never_delivered(url, rabbitmq):
    ns = namespace(url)
    good = Workload(seed=10).message("MetadataCreate", "Event")
    bad_body = Workload(seed=11).message("MetadataCreate", "Event")
    bad_body["messageBody"]["objectValue"] = 4
    with Gateway(url, application="reader") as reader, reader.receiver("metadata") as inbox:
        transport = reader.transport
        assert isinstance(transport, AmqpTransport)
        routed(transport, "metadata", b'{"messageHeader": {"messageId": "oops"')  # truncated: GENERR007
        routed(transport, "metadata", serialise(bad_body))  # GENERR001
        routed(transport, "metadata", serialise(good))
        [received] = collect(inbox, 1)
        assert inbox.receive(timeout=0.5) is None
    assert received.message_id == good["messageHeader"]["messageId"]
    invalid = drain(rabbitmq, f"{ns}.invalid")
    codes = sorted(orjson.loads(body)["messageHeader"]["errorCode"] for _, body in invalid)
    assert codes == ["GENERR001", "GENERR007"]
    assert drain(rabbitmq, f"{ns}.reader.metadata.MetadataCreate") == []  # acknowledged, not looping


def test_an_expired_message_goes_to_the_error_queue(url, rabbitmq):
    from datetime import timedelta

    from rdss.model import timestamps

    expired = new_message(
        "MetadataDelete",
        {"objectUuid": "0b4a5ad2-ae59-4d9d-9b8e-3a1c2a4c7f10"},
        expires_in=timedelta(seconds=1),
        now=timestamps.now() - timedelta(seconds=10),
    )
    with Gateway(url, application="reader") as reader, reader.receiver("metadata") as inbox:
        routed(reader.transport, "metadata", serialise(expired), "MetadataDelete")  # type: ignore[arg-type]
        assert inbox.receive(timeout=1.0) is None
    [(_, body)] = drain(rabbitmq, f"{namespace(url)}.error")
    assert orjson.loads(body)["messageHeader"]["errorCode"] == "GENERR003"


# -- retries and dead letters ------------------------------------------------------------------
def test_a_poison_message_goes_through_the_tiers_to_dead_letter(url):
    poison = Workload(seed=12).message("MetadataCreate", "Event")
    attempts: list[tuple[float, int]] = []

    def handler(received: Received) -> None:
        attempts.append((time.monotonic(), received.deliveries[0].attributes["attempts"]))
        raise RuntimeError("always fails")

    with Gateway(url, application="producer") as producer, Gateway(url, application="worker") as worker:
        worker.transport.declare("metadata", "worker")  # type: ignore[attr-defined]
        producer.send(poison, channel="metadata")
        worker.listen("metadata", handler, idle_timeout=1.5, poll_interval=0.05)
        with worker.transport.consumer("dead_letter", group="operators") as dead:
            deliveries = _poll_until(dead, 1)
    # tiers 200ms x2 then 500ms x1: four attempts, the waits between them at least the TTLs
    assert [number for _, number in attempts] == [0, 1, 2, 3]
    gaps = [later - earlier for (earlier, _), (later, _) in itertools.pairwise(attempts)]
    assert gaps[0] >= 0.2
    assert gaps[1] >= 0.2
    assert gaps[2] >= 0.5
    [delivery] = deliveries
    assert unhopped(delivery.payload)[0] == poison
    headers = delivery.attributes["headers"]
    assert headers["x-rdss-dead-reason"].startswith("retries-exhausted")
    assert headers["x-rdss-queue"].endswith("worker.metadata.MetadataCreate")


def test_a_transient_failure_is_retried_after_the_delay_and_then_processed(url, rabbitmq):
    message = Workload(seed=13).message("MetadataUpdate", "Event")
    calls: list[int] = []

    def flaky(received: Received) -> None:
        calls.append(received.deliveries[0].attributes["attempts"])
        if len(calls) < 3:
            raise ConnectionError("the database is down")

    with Gateway(url, application="producer") as producer, Gateway(url, application="worker") as worker:
        worker.transport.declare("metadata", "worker")  # type: ignore[attr-defined]
        producer.send(message, channel="metadata")
        stats = worker.listen("metadata", flaky, max_messages=1, poll_interval=0.05)
    assert calls == [0, 1, 2]
    assert stats.acked == 1
    assert drain(rabbitmq, f"{namespace(url)}.dead_letter") == []


def test_a_message_that_crashes_its_consumer_is_dead_lettered_across_restarts(classic_url):
    """Classic queues: SIGKILL a consumer holding the message, again and again: each restart sees
    it redelivered, the count in the host's SQLite file grows, and past the limit (2) it is
    dead-lettered unhandled. (Quorum queues leave the count to RabbitMQ: tests/amqp/test_quorum.py.)"""
    url = classic_url
    poison = Workload(seed=14).message("MetadataCreate", "Event")
    message_id = poison["messageHeader"]["messageId"]
    queue = f"{namespace(url)}.crashy.metadata.MetadataCreate"
    with Gateway(url, application="producer") as producer:
        producer.transport.declare("metadata", "crashy")  # type: ignore[attr-defined]
        producer.send(poison, channel="metadata")
    counts = []
    for _ in range(3):
        assert _hold_and_die(url) == message_id
        counter = SqliteRedeliveries(state(url))
        counts.append(counter.count(f"{queue}/{message_id}"))
        counter.close()
    assert counts == [0, 1, 2]  # the first delivery is not a redelivery
    assert _hold_and_die(url) == "nothing"  # redelivered a third time: over the limit
    with (
        Gateway(url, application="operators") as operators,
        operators.transport.consumer("dead_letter", group="ops") as dead,
    ):
        [delivery] = _poll_until(dead, 1)
    assert unhopped(delivery.payload)[0] == poison
    assert delivery.attributes["headers"]["x-rdss-dead-reason"].startswith("redeliveries-exceeded")
    counter = SqliteRedeliveries(state(url))
    assert counter.count(f"{queue}/{message_id}") == 0  # forgotten once dead-lettered
    counter.close()


@pytest.mark.parametrize("queues", ["url", "classic_url"])
def test_closing_while_holding_messages_does_not_count_against_them(queues, request):
    """A receiver that closes with prefetched, unacknowledged messages, five times over (the
    limit is 2): RabbitMQ redelivers them each time, but they were forgiven (classic queues: in
    the host's file; quorum queues, whose x-delivery-count RabbitMQ 3.x raises on every return:
    by this process), so none is dead-lettered and all are delivered in the end."""
    url = request.getfixturevalue(queues)
    messages = Workload(seed=15).mix(10)
    with Gateway(url, application="producer") as producer, Gateway(url, application="restarts") as reader:
        reader.transport.declare("metadata", "restarts")  # type: ignore[attr-defined]
        producer.send_all(messages, channel="metadata")
        for _ in range(5):
            with reader.receiver("metadata") as inbox:
                assert inbox.receive(timeout=5) is not None  # holds it and the rest, acks nothing
        with reader.receiver("metadata") as inbox:
            got = collect(inbox, 10)
        with reader.transport.consumer("dead_letter", group="ops") as dead:
            assert dead.poll(wait=0.3) == []
    assert {r.message_id for r in got} == {m["messageHeader"]["messageId"] for m in messages}


def _hold_and_die(url: str) -> str:
    """Run the holder; once it printed what it holds, SIGKILL it. What it printed."""
    holder = subprocess.Popen(
        [sys.executable, "-m", "tests.amqp.holder", url, "metadata", "crashy"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        line = holder.stdout.readline().strip()
    finally:
        holder.kill()
        holder.wait(10)
    return line


def _poll_until(consumer: Any, count: int, timeout: float = 10.0) -> list[Any]:
    found: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(found) < count and time.monotonic() < deadline:
        deliveries = consumer.poll(wait=0.2)
        consumer.settle(deliveries)
        found.extend(deliveries)
    return found


def test_parse_keeps_the_whole_amqp_url():
    parsed = parse("amqp://u:p@rabbit.example:5671/prod?namespace=x&heartbeat=30")
    assert parsed.scheme == "amqp"
    assert parsed.raw.endswith("heartbeat=30")
