"""A producer of one Message API version and a consumer of another exchange create, update,
delete and a read request/reply through gateways (issue 31), on whichever backend the caller's
``make_gateway`` opens: memory (tests/unit), the local runtime (tests/integration), RabbitMQ
(tests/amqp)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import orjson

from rdss.gateway import Gateway, Received, select
from rdss.model import translation
from rdss.model.messages import Message, new_message
from rdss.model.workload import Workload

#: The tenantJiscID consumers and producers of 4.0.0 use here.
TENANT = 2718

MakeGateway = Callable[..., Gateway]


def in_version(message: Message, version: str) -> Message:
    """A 3.0.2 message as a producer of ``version`` writes it itself (no translation hop)."""
    if version == "3.0.2":
        return message
    return translation.translate_message(translation.read(orjson.dumps(message)), version, tenant_jisc_id=TENANT)


def object_id(message: Message) -> Any:
    body = message["messageBody"]
    return body.get("objectUUID", body.get("objectUuid"))


def exchange(
    make_gateway: MakeGateway,
    *,
    written: str,
    read: str,
    channel: str,
    request_channel: str,
    timeout: float = 20.0,
    seed: int = 31,
    subscribe: Callable[[Gateway, str], None] | None = None,
) -> None:
    """Send create, update and delete in ``written`` and receive them in ``read``; then request a
    read in ``written`` and have it answered by a responder reading (and writing) ``read``.
    ``subscribe(gateway, channel)`` makes a group's queues before anything is sent (amqp://)."""
    workload = Workload(seed)
    producer = make_gateway(f"repository-{written.replace('.', '')}", reads=written, tenant_jisc_id=TENANT)
    consumer = make_gateway(f"preservation-{read.replace('.', '')}", reads=read, tenant_jisc_id=TENANT)
    responder = make_gateway(f"responder-{read.replace('.', '')}", reads=read, tenant_jisc_id=TENANT)
    if subscribe is not None:
        subscribe(consumer, channel)
        subscribe(responder, request_channel)
    create = workload.message("MetadataCreate", "Command")
    update = workload.message("MetadataUpdate", "Command")
    update["messageBody"]["objectUuid"] = create["messageBody"]["objectUuid"]
    delete = workload.message("MetadataDelete", "Command")
    delete["messageBody"]["objectUuid"] = create["messageBody"]["objectUuid"]
    sent = [in_version(m, written) for m in (create, update, delete)]
    producer.send_all(sent, channel=channel)
    got: list[Received] = []
    with consumer.receiver(channel, poll_interval=0.05) as inbox:
        while len(got) < len(sent) and (received := inbox.receive(timeout=timeout)) is not None:
            got.append(received)
            inbox.ack(received)
    assert [r.message_id for r in got] == [m["messageHeader"]["messageId"] for m in sent]
    for received, original in zip(got, sent, strict=True):
        assert received.header["version"] == read
        assert received.message_type == original["messageHeader"]["messageType"]
        assert object_id(received.message) == object_id(original)
        assert received.header["messageHistory"][-1]["machineId"] == f"rdss-translate-{written}-to-{read}"
        assert translation.read(received.payload).header.message_id == received.message_id
        entry = consumer.repository.entry(received.message_id)  # what rdss trace shows as the hop
        assert entry is not None
        assert (entry.status, entry.translated_from, entry.delivered_as) == ("RECEIVED", written, read)
    _request_reply(producer, responder, written=written, read=read, request_channel=request_channel, timeout=timeout)


def _request_reply(
    requester: Gateway, responder: Gateway, *, written: str, read: str, request_channel: str, timeout: float
) -> None:
    workload = Workload(7)
    asked: list[Received] = []

    def answer(received: Received) -> None:
        asked.append(received)
        body = workload.research_object()
        body["objectUuid"] = object_id(received.message)
        document = new_message("MetadataRead", body, message_class="Document", correlation_id=received.message_id)
        # where a broker routes replies by their correlationId (kinesis, amqp's), through input
        to = "input" if responder.url.scheme in ("kinesis", "amqp") else str(received.header["returnAddress"])
        responder.send(in_version(document, read), channel=to)

    thread = threading.Thread(
        target=responder.listen,
        args=(request_channel, answer),
        kwargs={
            "max_messages": 1,
            "idle_timeout": timeout,
            "poll_interval": 0.05,
            "selector": select(message_type="MetadataRead", message_class="Command"),
        },
    )
    thread.start()
    request = in_version(workload.message("MetadataRead", "Command"), written)
    try:
        reply = requester.request(request, timeout=timeout)
    finally:
        thread.join(timeout + 5)
    [seen] = asked
    assert seen.header["version"] == read
    assert seen.message_id == request["messageHeader"]["messageId"]
    header = reply["messageHeader"]
    assert header["correlationId"] == request["messageHeader"]["messageId"]
    assert header["version"] == written
    assert header["messageHistory"][-1]["machineId"] == f"rdss-translate-{read}-to-{written}"
    assert object_id(reply) == object_id(request)
    entry = requester.repository.entry(str(header["messageId"]))
    assert entry is not None
    assert (entry.status, entry.translated_from, entry.delivered_as) == ("RECEIVED", read, written)
