"""``rdss bench amqp`` and ``rdss bench bridge``: the RabbitMQ backend and the Messaging Bridge.

``amqp`` times, on a real broker, N messages

* through :meth:`rdss.gateway.Gateway.send_all` (classifier, Local Data Repository TO_SEND and
  SENT, publish with confirms), as Mosaic envelopes and as plain RDSS JSON;
* through the transport alone (publisher confirms, many in flight, persistent messages);
* one publish and one confirm at a time (pika's BlockingChannel with ``confirm_delivery``): the
  baseline the pipelined publisher exists to beat - every confirm of a persistent message waits
  for the broker's fsync;
* received and acknowledged through a gateway receiver (classification, de-duplication);
* the Mosaic send and the receive again with ``queue_type=classic``: the consumer groups' queues
  as classic queues rather than quorum queues (the default, whose Raft log costs writes), side
  by side in the same run.

``bridge`` times the bridge moving N messages from Kinesis (the embedded emulator, every call
real HTTP) to RabbitMQ, and back.

Both need a broker: ``--url`` or ``RDSS_AMQP_URL``; without either, run from a source checkout,
they start a private node with the test suite's helper (``tests/support/rabbitmq.py``).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import orjson

from rdss.host import resources
from rdss.model.messages import Message
from rdss.model.workload import Workload


@dataclass
class Figures:
    """Messages per second by what was timed, and what was timed on."""

    messages: int
    mean_bytes: float
    broker: str
    rates: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"messages": self.messages, "mean_bytes": self.mean_bytes, "broker": self.broker, "rates": self.rates}


@contextlib.contextmanager
def broker(url: str | None) -> Iterator[str]:
    """The broker to measure: ``url``, ``RDSS_AMQP_URL``, or a private node started for the run."""
    given = url or os.environ.get("RDSS_AMQP_URL")
    if given:
        yield given
        return
    from rdss.bench.rabbitmq_node import SERVER, RabbitMQ

    # a private node only from a checkout (make setup installed the server); a benchmark run from
    # an installed package installs nothing and is told what would let it run
    if resources.checkout_on_path() is None or not SERVER.exists():
        raise RuntimeError(
            "no broker: pass --url or set RDSS_AMQP_URL (from a checkout, `make rabbitmq` installs the server "
            "for a private node)"
        )
    node = RabbitMQ()
    node.start()
    try:
        yield node.url
    finally:
        node.stop()


def _scoped(url: str, state: Path, **options: str) -> str:
    """``url`` with a namespace of its own (so runs never see each other's queues)."""
    query = {"namespace": f"bench{uuid.uuid4().hex[:8]}", "state": str(state), **options}
    return f"{url}{'&' if '?' in url else '?'}{urlencode(query)}"


def _timed(count: int, work: Any) -> float:
    started = time.perf_counter()
    work()
    return count / (time.perf_counter() - started)


def run(count: int, *, url: str | None = None, realistic: bool = True, seed: int = 7, baseline: int = 500) -> Figures:
    """Publish and consume ``count`` messages on a real broker; rates in messages per second."""
    from rdss.gateway import Gateway
    from rdss.gateway.amqp import AmqpTransport
    from rdss.gateway.backend import Outgoing

    messages = _messages(count, seed, realistic)
    payloads = [orjson.dumps(m) for m in messages]
    figures = Figures(count, sum(map(len, payloads)) / count, "")
    with broker(url) as base, tempfile.TemporaryDirectory() as scratch:
        figures.broker = base.split("@")[-1].split("?")[0]
        for envelope, queue_type in (("mosaic", "quorum"), ("rdss", "quorum"), ("mosaic", "classic")):
            scoped = _scoped(
                base, Path(scratch) / f"{envelope}-{queue_type}.sqlite", envelope=envelope, queue_type=queue_type
            )
            suffix = ", classic queues" if queue_type == "classic" else ""
            with Gateway(scoped, application="bench-producer") as producer:
                producer.transport.declare("metadata", "bench")  # type: ignore[attr-defined]
                rate = _timed(count, lambda p=producer: p.send_all(messages, channel="metadata"))
                figures.rates[f"Gateway.send_all, {envelope} envelope{suffix}"] = rate
            if envelope == "mosaic":
                with Gateway(scoped, application="bench") as consumer, consumer.receiver("metadata") as inbox:
                    rate = _timed(count, lambda i=inbox: _drain(i, count))
                    figures.rates[f"Gateway receiver, receive + ack{suffix}"] = rate
        scoped = _scoped(base, Path(scratch) / "raw.sqlite", envelope="rdss")
        with Gateway(scoped, application="bench-producer") as producer:
            transport = producer.transport
            assert isinstance(transport, AmqpTransport)
            transport.declare("metadata", "bench")
            outgoing = [
                Outgoing("metadata", p, m["messageHeader"]["messageId"], _headers(m))
                for m, p in zip(messages, payloads, strict=True)
            ]
            figures.rates["transport.publish (confirms in flight)"] = _timed(count, lambda: transport.publish(outgoing))
            figures.rates["one confirm at a time (BlockingChannel)"] = _one_at_a_time(transport, payloads[:baseline])
    return figures


def run_bridge(count: int, *, url: str | None = None, seed: int = 9) -> Figures:
    """The bridge moving ``count`` messages Kinesis -> RabbitMQ, then RabbitMQ -> Kinesis."""
    from rdss.aws.putrecords import PutRecordsBatcher, Record
    from rdss.deployment.topology import Deployment
    from rdss.gateway.bridge import open_bridge
    from rdss.local.emulator import connect, provisioned

    messages = _messages(count, seed, True)
    figures = Figures(count, sum(len(orjson.dumps(m)) for m in messages) / count, "")
    endpoint = connect()
    saved = dict(os.environ)
    os.environ.update({k: v for k, v in endpoint.environment().items() if k != "AWS_ENDPOINT_URL"})
    try:
        with (
            broker(url) as base,
            tempfile.TemporaryDirectory() as scratch,
            provisioned(endpoint, Deployment(f"bench{int(time.time())}"), shards=2) as deployment,
        ):
            figures.broker = (
                base.split("@")[-1].split("?")[0]
                + " and "
                + ("the embedded emulator" if endpoint.embedded else str(endpoint.url))
            )
            # the Kinesis side's Local Data Repository: a file of the run's own
            kinesis = (
                f"kinesis://{deployment.environment}?region={endpoint.region}&ldr=sqlite://{scratch}/kinesis.sqlite"
            )
            if endpoint.url:
                kinesis += f"&endpoint={endpoint.url}"
            amqp = _scoped(base, Path(scratch) / "bridge.sqlite")
            # the broker's output on metadata (a producer's send enters through input, and no broker runs here)
            report = PutRecordsBatcher(endpoint.client("kinesis")).put(
                Record(deployment.stream("metadata"), orjson.dumps(m), m["messageHeader"]["messageId"])
                for m in messages
            )
            if not report.ok:
                raise RuntimeError(f"{len(report.failed)} records not put on the metadata stream: {report.failed[:1]}")
            there = open_bridge(kinesis, amqp, ["metadata"], group="there", declare=["back"], poll_interval=0.05)
            back = open_bridge(amqp, kinesis, ["metadata"], group="back", poll_interval=0.05)
            back.step()  # its queues exist before anything arrives
            stats = there.run(idle_timeout=2.0)
            figures.rates["Kinesis -> RabbitMQ"] = stats.forwarded / max(stats.busy_seconds, 1e-9)
            stats = back.run(idle_timeout=2.0)
            figures.rates["RabbitMQ -> Kinesis"] = stats.forwarded / max(stats.busy_seconds, 1e-9)
    finally:
        os.environ.clear()
        os.environ.update(saved)
        endpoint.stop()
    return figures


def _messages(count: int, seed: int, realistic: bool) -> list[Message]:
    workload = Workload(seed)
    return workload.mix(count) if realistic else [workload.message("MetadataDelete", "Event") for _ in range(count)]


def _headers(message: Message) -> dict[str, str]:
    header = message["messageHeader"]
    return {name: str(header[name]) for name in ("messageId", "messageType", "messageClass")}


def _drain(receiver: Any, count: int) -> None:
    done = 0
    while done < count:
        batch = receiver.receive_batch(500, timeout=10)
        if not batch:
            raise RuntimeError(f"only {done} of {count} messages arrived")
        receiver.ack(batch)
        done += len(batch)


def _one_at_a_time(transport: Any, payloads: list[bytes]) -> float:
    """The baseline: pika's BlockingChannel, confirm mode, each publish waiting for its confirm."""
    import pika

    with transport.vhost.connection() as connection:
        channel = connection.channel()
        channel.confirm_delivery()
        # durable, like the gateway's queues: a persistent message in a durable queue is confirmed
        # only once it is on disk
        queue = f"bench-baseline-{uuid.uuid4().hex[:8]}"
        channel.queue_declare(queue, durable=True)
        properties = pika.BasicProperties(delivery_mode=2, content_type="application/json")

        def publish() -> None:
            for payload in payloads:
                channel.basic_publish("", queue, payload, properties, mandatory=True)

        try:
            return _timed(len(payloads), publish)
        finally:
            channel.queue_delete(queue)
