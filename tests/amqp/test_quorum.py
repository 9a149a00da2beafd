"""Quorum queues on a real RabbitMQ node: the broker counts deliveries for every consumer on every
host, dead-letters past the limit; a send's Mosaic auth token and context arrive with it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
import uuid
from typing import Any
from urllib.parse import urlencode

import orjson
import pika
import pytest

from rdss.gateway import Gateway, Received, TransportError
from rdss.gateway.amqp.consumer import dead_letter_reason
from rdss.gateway.amqp.vhost import RETURNS_ALLOWANCE
from rdss.model.workload import Workload
from tests.amqp.conftest import FAST, ROOT, amqp_url, run_rdss
from tests.support.hops import unhopped
from tests.support.rabbitmq import RabbitMQ

pytestmark = pytest.mark.integration


def _basic_get_all(node: RabbitMQ, queue: str) -> list[tuple[Any, bytes]]:
    found = []
    with pika.BlockingConnection(pika.URLParameters(node.url)) as connection:
        channel = connection.channel()
        while True:
            method, properties, body = channel.basic_get(queue, auto_ack=True)
            if method is None:
                return found
            found.append((properties, body))


def _dead_letters(url: str, count: int, timeout: float = 10.0) -> list[Any]:
    found: list[Any] = []
    with (
        Gateway(url, application="operators") as operators,
        operators.transport.consumer("dead_letter", group="ops") as dead,
    ):
        deadline = time.monotonic() + timeout
        while len(found) < count and time.monotonic() < deadline:
            deliveries = dead.poll(wait=0.2)
            dead.settle(deliveries)
            found.extend(deliveries)
    return found


def test_consumer_queues_are_quorum_queues_with_the_delivery_limit(url, rabbitmq):
    with Gateway(url, application="reader") as reader:
        [queue, *_] = reader.transport.declare("metadata", "group")  # type: ignore[attr-defined]
    listing = rabbitmq.ctl("list_queues", "-q", "--no-table-headers", "name", "type", "arguments")
    [line] = [row for row in listing.splitlines() if row.startswith(queue + "\t")]
    assert "\tquorum\t" in line
    # the broker's backstop: the consumer dead-letters at redeliveries, less the returns it forgave
    limit = int(FAST["redeliveries"]) + RETURNS_ALLOWANCE
    assert re.search(rf'"x-delivery-limit",\s*{limit}\b', line), line
    assert "x-dead-letter-exchange" in line
    assert f"{queue.split('.')[0]}.dead_letter" in line


def test_a_message_that_kills_every_consumer_is_dead_lettered_after_the_limit_in_total(rabbitmq, tmp_path):
    """Two "hosts" (separate state directories, so nothing on disk is shared) each restart their
    consumer process whenever it dies; the message kills it every time (os._exit in the handler).
    With redeliveries=2 it is handed out three times in all - not three times per host - then
    dead-lettered, RabbitMQ's x-delivery-count being the one count every host reads."""
    query = {"namespace": f"t{uuid.uuid4().hex[:10]}", **FAST}  # no state=: each host's own default
    url = f"{rabbitmq.url}?{urlencode(query)}"
    poison = Workload(seed=41).message("MetadataCreate", "Event")
    message_id = poison["messageHeader"]["messageId"]
    with Gateway(f"{url}&state={tmp_path}/producer.sqlite", application="producer") as producer:
        producer.transport.declare("metadata", "crashy")  # type: ignore[attr-defined]
        producer.send(poison, channel="metadata")
    lines: dict[str, list[str]] = {"a": [], "b": []}

    def host(name: str) -> None:
        environment = {**os.environ, "XDG_STATE_HOME": str(tmp_path / f"host-{name}")}
        for _ in range(6):  # a supervisor restarting the consumer (6: twice the limit per host)
            done = subprocess.run(
                [sys.executable, "-m", "tests.amqp.crasher", url, "metadata", "crashy"],
                cwd=ROOT,
                env=environment,
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            lines[name].append(done.stdout.strip() or f"exit {done.returncode}: {done.stderr[-800:]}")
            if done.stdout.strip() == "nothing":
                return

    threads = [threading.Thread(target=host, args=(name,)) for name in lines]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    handled = [line.split() for line in lines["a"] + lines["b"] if line != "nothing"]
    assert all(line[0] == message_id for line in handled), lines
    # three deliveries in total, the broker's count going on across hosts: 0, 1, 2
    assert sorted(int(line[1]) for line in handled) == [0, 1, 2], lines
    assert lines["a"][-1] == lines["b"][-1] == "nothing"
    for name in lines:  # each host kept its own state: nothing shared on disk
        assert (tmp_path / f"host-{name}" / "rdss").is_dir()
    [dead] = _dead_letters(url, 1)
    assert unhopped(dead.payload)[0] == poison
    headers = dead.attributes["headers"]
    assert headers["x-rdss-dead-reason"].startswith("redeliveries-exceeded")
    assert headers["x-rdss-queue"].endswith("crashy.metadata.MetadataCreate")


def test_deaths_count_as_failed_attempts_towards_max_attempts(url, rabbitmq):
    """A consumer died holding the message once (the broker counted it); the next consumer's
    handler fails once: two failed attempts, so with max_attempts=2 it goes to error, GENERR009."""
    message = Workload(seed=42).message("MetadataCreate", "Event")
    with Gateway(url, application="producer") as producer:
        producer.transport.declare("metadata", "crashy")  # type: ignore[attr-defined]
        producer.send(message, channel="metadata")
    died = subprocess.run(
        [sys.executable, "-m", "tests.amqp.crasher", url, "metadata", "crashy"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert died.returncode == 3
    assert died.stdout.split()[1:] == ["0", "0"]
    seen: list[int] = []

    def handler(received: Received) -> None:
        seen.append(received.deliveries[0].attributes["attempts"])
        raise RuntimeError("still broken")

    with Gateway(url, application="crashy") as worker:
        stats = worker.listen("metadata", handler, max_attempts=2, idle_timeout=2, poll_interval=0.05)
    assert seen == [1]  # the death was the first attempt
    assert stats.poison == 1
    [(_, body)] = _basic_get_all(rabbitmq, f"{url.split('namespace=')[1].split('&')[0]}.error")
    header = orjson.loads(body)["messageHeader"]
    assert header["errorCode"] == "GENERR009"
    assert "2 failed attempts" in header["errorDescription"]


def test_a_classic_queue_is_not_declared_over_with_another_type(rabbitmq, tmp_path):
    url = amqp_url(rabbitmq, tmp_path / "state.sqlite")
    with Gateway(url + "&queue_type=classic", application="old") as old:
        old.transport.declare("metadata", "legacy")  # type: ignore[attr-defined]
    with Gateway(url, application="new") as new, pytest.raises(TransportError, match="cannot change its type") as error:
        new.transport.declare("metadata", "legacy")  # type: ignore[attr-defined]
    assert "docs/rabbitmq.md" in str(error.value)


@pytest.mark.parametrize("envelope", ["mosaic", "rdss"])
def test_a_message_sent_with_an_auth_token_and_context_arrives_with_both(rabbitmq, tmp_path, envelope):
    url = amqp_url(rabbitmq, tmp_path / "state.sqlite", envelope=envelope)
    message = Workload(seed=43).message("MetadataCreate", "Event")
    message["messageHeader"]["messageTimings"]["publishedTimestamp"] = "2024-05-01T10:00:00+02:00"
    token = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ2ZW5kb3IifQ.c2lnbmF0dXJl"
    context = {"ingest": 7, "batch": ["a", "b"]}
    with Gateway(url, application="reader") as reader, reader.receiver("metadata") as inbox:
        with Gateway(url, application="producer") as producer:
            producer.send(message, channel="metadata", auth_token=token, context=context)
        received = inbox.receive(timeout=10)
        assert received is not None
        inbox.ack(received)
    attributes = received.deliveries[0].attributes
    assert attributes["auth_token"] == token
    assert attributes["message_context"] == context
    assert token.encode() not in received.deliveries[0].payload  # beside the message, never in it
    original, _ = unhopped(received.message)
    assert original == message  # the published time as it was written


def test_the_envelope_on_the_wire_has_the_token_the_context_and_a_utc_timestamp(url, rabbitmq):
    message = Workload(seed=44).message("MetadataDelete", "Event")
    message["messageHeader"]["messageTimings"]["publishedTimestamp"] = "2024-05-01T10:00:00.5-03:00"
    with Gateway(url, application="producer") as producer:
        [queue, *_] = producer.transport.declare("metadata", "wire")  # type: ignore[attr-defined]
        producer.send(message, channel="metadata", auth_token="t0k3n", context={"run": 1})
    queue = queue.replace("MetadataCreate", "MetadataDelete")
    [(_, body)] = _basic_get_all(rabbitmq, queue)
    envelope = orjson.loads(body)
    assert envelope["timestamp"] == "2024-05-01T13:00:00.500000Z"
    assert envelope["auth_token"] == "t0k3n"
    assert envelope["message_context"]["run"] == 1


def test_rdss_send_takes_the_auth_token_from_a_file(url, rabbitmq, tmp_path):
    message = Workload(seed=45).message("MetadataCreate", "Event")
    (tmp_path / "message.json").write_bytes(orjson.dumps(message))
    (tmp_path / "token").write_text("eyJ.cli.token\n")
    with Gateway(url, application="reader") as reader, reader.receiver("metadata") as inbox:
        sent = run_rdss(
            "send",
            str(tmp_path / "message.json"),
            "--to",
            "metadata",
            "--url",
            url,
            "--log-format",
            "text",
            "--auth-token-file",
            str(tmp_path / "token"),
            "--context",
            '{"ticket": "RDSS-15"}',
        )
        assert sent.returncode == 0, sent.stderr
        received = inbox.receive(timeout=10)
        assert received is not None
        inbox.ack(received)
    assert received.deliveries[0].attributes["auth_token"] == "eyJ.cli.token"
    assert received.deliveries[0].attributes["message_context"] == {"ticket": "RDSS-15"}


def test_a_dead_letter_from_the_brokers_backstop_says_why_in_the_same_words():
    """RabbitMQ's own dead letters (past x-delivery-limit) carry x-death; the consumer of
    dead_letter reports them as the gateway's own: x-rdss-dead-reason and x-rdss-queue."""
    death = {"count": 1, "reason": "delivery_limit", "queue": "ns.g.metadata.MetadataCreate", "exchange": ""}
    headers = dead_letter_reason({"x-death": [death], "rdss-key": "k"})
    assert headers["x-rdss-dead-reason"].startswith("redeliveries-exceeded")
    assert headers["x-rdss-queue"] == "ns.g.metadata.MetadataCreate"
    expired = {"count": 1, "reason": "expired", "queue": "ns.retry.10s"}  # a delay tier, not a death
    assert "x-rdss-dead-reason" not in dead_letter_reason({"x-death": [expired]})
    own = {"x-rdss-dead-reason": "retries-exhausted: refused 7 times", "x-death": [death]}
    assert dead_letter_reason(own)["x-rdss-dead-reason"].startswith("retries-exhausted")
