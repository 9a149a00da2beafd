"""The same application code through kinesis://, amqp:// and memory://: only the URL changes."""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from rdss.gateway import Gateway, Outgoing, Received, Rejected
from rdss.gateway.backend import Delivery
from rdss.model import decoration
from rdss.model.messages import Message
from rdss.model.retry import Backoff
from rdss.model.workload import Workload
from tests.support.hops import unhopped
from tests.support.traffic import channel_mix

pytestmark = pytest.mark.integration


def exchange(url: str, messages: list[Message]) -> list[Message]:
    """What a vendor writes, once: a repository subscribes to the metadata channel, a producer
    sends, the repository receives and acknowledges each message; what it received."""
    with (
        Gateway(url, application="repository") as repository,
        Gateway(url, application="producer") as producer,
        repository.receiver("metadata", poll_interval=0.1) as inbox,
    ):
        producer.send_all(messages, channel="metadata")
        producer.send(messages[0], channel="metadata")  # at least once: a duplicate, dropped
        received = []
        while (message := inbox.receive(timeout=10)) is not None:
            received.append(unhopped(message.message)[0])
            inbox.ack(message)
            if len(received) == len(messages):
                assert inbox.receive(timeout=1) is None
                break
    return received


@pytest.fixture(params=["memory", "kinesis", "amqp"])
def gateway_url(request, monkeypatch) -> Iterator[str]:
    if request.param == "memory":
        yield f"memory://backends-{uuid.uuid4().hex[:8]}"
    elif request.param == "kinesis":
        system = request.getfixturevalue("system")
        for name, value in system.endpoint.environment().items():
            if name != "AWS_ENDPOINT_URL":  # the URL names the endpoint
                monkeypatch.setenv(name, value)
        with system.routing():  # sends enter through input; the broker routes them, as in AWS
            yield (
                f"kinesis://{system.deployment.environment}?endpoint={system.endpoint.url}"
                f"&region={system.endpoint.region}"
            )
    else:
        yield request.getfixturevalue("url")


def test_the_same_code_sends_and_receives_on_every_backend(gateway_url):
    messages = channel_mix(31, 25, "metadata")
    received = exchange(gateway_url, messages)
    by_id = {m["messageHeader"]["messageId"]: m for m in received}
    assert len(received) == len(messages)
    assert by_id == {m["messageHeader"]["messageId"]: m for m in messages}


# -- nothing lost, nothing stuck: the same behaviour on every backend ------------------------------
QUICK = Backoff(max_retries=10, base=0.01)


def records(url: str, channel: str, count: int, timeout: float = 20.0) -> list[dict[str, Any]]:
    """The first ``count`` records of ``channel`` as they are (decorated, even unparseable ones
    wrapped), read with a consumer group of their own."""
    return [orjson.loads(d.payload) for d in deliveries(url, channel, count, timeout)]


def deliveries(url: str, channel: str, count: int, timeout: float = 20.0) -> list[Delivery]:
    """The first ``count`` deliveries of ``channel`` (payload and key), read with a consumer
    group of their own; fewer when no more arrive within ``timeout``."""
    with Gateway(url, application="operator") as operator:
        consumer = operator.transport.consumer(channel, group=f"audit-{uuid.uuid4().hex[:6]}", start="earliest")
        found: list[Delivery] = []
        deadline = time.monotonic() + timeout
        try:
            while len(found) < count and time.monotonic() < deadline:
                polled = consumer.poll(100, wait=0.2)
                found.extend(polled)
                consumer.settle(polled)
                if not polled:
                    time.sleep(0.1)
        finally:
            consumer.close()
    return found


def subscribe(url: str, group: str) -> None:
    """A group's queues exist from its first subscription on amqp:// (as in Mosaic): create them
    before anything is sent. The log backends need nothing."""
    if url.startswith("amqp"):
        with Gateway(url, application=group) as gateway:
            gateway.transport.declare("metadata", group)  # type: ignore[attr-defined]


def same_queue(seed: int, count: int) -> list[Message]:
    """Messages that share a partition on every backend: one type and class (amqp's queue)."""
    workload = Workload(seed)
    return [workload.message("MetadataCreate", "Event") for _ in range(count)]


def test_a_poison_message_goes_to_error_after_max_attempts_across_a_restart(gateway_url):
    messages = same_queue(33, 6)
    poison = messages[1]["messageHeader"]["messageId"]
    calls: Counter[str] = Counter()
    delivered: list[str] = []

    def handler(received: Received, stop: threading.Event | None = None) -> None:
        calls[received.message_id] += 1
        if received.message_id == poison:
            if stop is not None and calls[poison] == 2:
                stop.set()  # the consumer is restarted between attempts
            raise KeyError("objectTitle")
        delivered.append(received.message_id)

    subscribe(gateway_url, "repository")
    with Gateway(gateway_url, application="producer") as producer:
        producer.send_all(messages, channel="metadata")
    first = threading.Event()
    with Gateway(gateway_url, application="repository") as repository:
        repository.listen(
            "metadata",
            lambda r: handler(r, first),
            stop=first,
            max_attempts=3,
            backoff=QUICK,
            idle_timeout=20,
            poll_interval=0.05,
        )
    assert calls[poison] == 2
    with Gateway(gateway_url, application="repository") as repository:
        stats = repository.listen(
            "metadata", handler, max_attempts=3, backoff=QUICK, idle_timeout=3, poll_interval=0.05
        )
        entry = repository.repository.entry(poison)
    assert calls[poison] == 3  # the count went on from 2: not 2 + 3
    assert stats.poison == 1
    assert sorted(delivered) == sorted(
        m["messageHeader"]["messageId"] for m in messages if m["messageHeader"]["messageId"] != poison
    )
    [moved] = records(gateway_url, "error", 1)
    header = moved["messageHeader"]
    assert (header["messageId"], header["errorCode"]) == (poison, "GENERR009")
    assert "3 failed attempts" in header["errorDescription"]
    assert "KeyError: 'objectTitle'" in header["errorDescription"]
    assert entry is not None
    assert (entry.status, entry.error_code) == ("RECEIVED", "GENERR009")


def test_a_malformed_message_id_written_straight_onto_a_data_channel_is_moved_to_invalid(gateway_url):
    message = same_queue(34, 1)[0]
    message["messageHeader"]["messageId"] = "not-a-uuid"
    payload = orjson.dumps(message)
    headers = {"messageId": "not-a-uuid", "messageType": "MetadataCreate", "messageClass": "Event"}
    subscribe(gateway_url, "repository")
    with Gateway(gateway_url, application="repository") as repository:
        # not through the gateway's send (which refuses it): a producer writing the channel itself
        [outcome] = repository.transport.publish([Outgoing("metadata", payload, "k", headers)])
        assert outcome.ok
        handled: list[Received] = []
        stats = repository.listen("metadata", handled.append, idle_timeout=2, poll_interval=0.05)
    assert handled == []
    assert stats.delivered == 0
    [moved] = records(gateway_url, "invalid", 1)
    assert moved["messageHeader"]["errorCode"] == "GENERR010"
    assert "messageId" in moved["messageHeader"]["errorDescription"]
    assert decoration.original(orjson.dumps(moved)) == payload


def test_error_fields_do_not_make_a_move_and_a_consumer_s_move_lands_in_invalid_once(gateway_url):
    """A valid message whose header carries errorCode and errorDescription (optional fields of any
    message) reaches its Data Type Channel; a record the consumer cannot accept is moved by the
    consumer itself to invalid - decorated once, keyed ``moved:<its group>`` - and nowhere else."""
    workload = Workload(36)
    fixed = workload.message("MetadataCreate", "Event")
    fixed["messageHeader"]["errorCode"] = "GENERR001"
    fixed["messageHeader"]["errorDescription"] = "messageBody.objectTitle: missing (fixed since)"
    broken = workload.message("MetadataCreate", "Event")
    broken["messageHeader"]["messageId"] = "not-a-uuid"
    payload = orjson.dumps(broken)
    headers = {"messageId": "not-a-uuid", "messageType": "MetadataCreate", "messageClass": "Event"}
    subscribe(gateway_url, "repository")
    with Gateway(gateway_url, application="producer") as producer:
        producer.send(fixed)  # to input: routed by its content
    with Gateway(gateway_url, application="repository") as repository:
        [outcome] = repository.transport.publish([Outgoing("metadata", payload, "k", headers)])
        assert outcome.ok
        handled: list[Received] = []
        stats = repository.listen("metadata", handled.append, idle_timeout=3, poll_interval=0.05)
    assert [r.message_id for r in handled] == [fixed["messageHeader"]["messageId"]]
    assert handled[0].message["messageHeader"]["errorCode"] == "GENERR001"
    assert stats.delivered == 1  # (amqp:// moves it before the receiver counts it)
    moved = deliveries(gateway_url, "invalid", 2, timeout=5)  # one, and no second within 5 s
    assert len(moved) == 1
    assert moved[0].key == "moved:repository"
    assert orjson.loads(moved[0].payload)["messageHeader"]["errorCode"] == "GENERR010"
    assert decoration.original(moved[0].payload) == payload  # decorated once: the original inside
    assert deliveries(gateway_url, "error", 1, timeout=1) == []


def test_applications_refuse_messages_with_their_own_codes(gateway_url):
    messages = same_queue(35, 3)
    by_reject, by_raise, by_nack = (m["messageHeader"]["messageId"] for m in messages)

    def handler(received: Received) -> None:
        if received.message_id == by_reject:
            received.reject("APPERRMET003", "no dataset with that uuid here")
        elif received.message_id == by_raise:
            raise Rejected("APPERRMET004", "checksum mismatch on file 1")

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "message":
            return
        assert "message.nack.error_code" in scope["extensions"]
        more = True
        while more:
            message = await receive()
            if dict(message["headers"])[b"messageId"].decode() != by_nack:
                await send({"type": "message.ack", "id": message["id"]})  # the repository's business
                more = message.get("more_messages", False)
                continue
            await send(
                {
                    "type": "message.nack",
                    "id": message["id"],
                    "message": "no such dataset",
                    "error_code": "APPERRMET002",
                }
            )
            more = message.get("more_messages", False)

    subscribe(gateway_url, "repository")
    subscribe(gateway_url, "amgi-app")
    with Gateway(gateway_url, application="producer") as producer:
        producer.send_all(messages[:2], channel="metadata")
    with Gateway(gateway_url, application="repository") as repository:
        stats = repository.listen("metadata", handler, max_messages=2, idle_timeout=20, poll_interval=0.05)
    assert stats.rejected == 2
    with Gateway(gateway_url, application="producer") as producer:
        producer.send(messages[2], channel="metadata")
    with Gateway(gateway_url, application="amgi-app") as other:
        served = other.listen("metadata", app, idle_timeout=3, poll_interval=0.05, start="earliest")
    assert served.rejected == 1
    moved = {m["messageHeader"]["messageId"]: m["messageHeader"] for m in records(gateway_url, "invalid", 3)}
    assert len(moved) == 3
    assert moved[by_reject]["errorCode"] == "APPERRMET003"
    assert moved[by_reject]["errorDescription"] == "no dataset with that uuid here"
    assert moved[by_raise]["errorCode"] == "APPERRMET004"
    assert moved[by_nack]["errorCode"] == "APPERRMET002"
    assert moved[by_nack]["errorDescription"] == "no such dataset"
