"""The Messaging Bridge between Kinesis (the embedded emulator) and RabbitMQ (a real node):
both directions, duplicates, invalid records, connections dropped, a bridge killed and restarted."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import orjson
import pytest

from rdss.gateway import Gateway
from rdss.gateway.bridge import Bridge, open_bridge
from rdss.gateway.log import memory as memory_backend
from rdss.model import history
from rdss.model.messages import serialise
from rdss.model.workload import Workload
from tests.amqp.conftest import ROOT, run_rdss
from tests.amqp.test_amqp_backend import collect, drain, namespace
from tests.support.hops import unhopped
from tests.support.rabbitmq import TcpProxy
from tests.support.traffic import channel_mix

pytestmark = pytest.mark.integration


@pytest.fixture
def kinesis_url(system, monkeypatch):
    """The system's deployment as a gateway URL (credentials from the environment, like any client)."""
    for name, value in system.endpoint.environment().items():
        if name != "AWS_ENDPOINT_URL":
            monkeypatch.setenv(name, value)
    return f"kinesis://{system.deployment.environment}?endpoint={system.endpoint.url}&region={system.endpoint.region}"


def ids(messages):
    return {m["messageHeader"]["messageId"] for m in messages}


def test_kinesis_to_rabbitmq_drops_duplicates_and_moves_invalid_records(kinesis_url, url, system, rabbitmq):
    messages = Workload(seed=41).mix(60)
    system.publish([serialise(m) for m in messages], channel="metadata")  # the broker's output
    system.publish([serialise(m) for m in messages[:5]], channel="metadata")  # at least once: again
    # not a message (GENERR004), keyed as a consumer's move would be: the bridge's move is its own
    system.publish([b'{"messageHeader": 7}'], channel="metadata", partition_key="moved:impostor")
    bridge = open_bridge(kinesis_url, url, ["metadata"], declare=["repository"], poll_interval=0.1)
    stats = bridge.run(idle_timeout=1.5)
    assert stats.forwarded == 60
    assert stats.duplicates == 5
    assert stats.rejected == 1
    ns = namespace(url)
    raw = sum(len(drain(rabbitmq, f"{ns}.repository.metadata.{t}")) for t in ("MetadataCreate", "MetadataUpdate"))
    raw += sum(len(drain(rabbitmq, f"{ns}.repository.metadata.{t}")) for t in ("MetadataDelete", "MetadataRead"))
    raw += sum(len(drain(rabbitmq, f"{ns}.repository.metadata.{t}")) for t in ("VocabularyRead", "VocabularyPatch"))
    assert raw == 60  # on the far side once each, duplicates dropped by the bridge
    [(properties, invalid)] = drain(rabbitmq, f"{ns}.invalid")
    assert orjson.loads(invalid)["messageHeader"]["errorCode"] == "GENERR004"
    assert properties.headers["rdss-key"] == "moved:bridge"  # moved by the bridge's consumer group


@pytest.mark.parametrize("queues", ["url", "classic_url"])
def test_rabbitmq_to_kinesis_through_dropped_connections_on_both_sides(kinesis_url, queues, request, rabbitmq, system):
    """The bridge reads RabbitMQ and writes Kinesis through TCP relays, both cut every 0.5 s six
    times over: every message reaches Kinesis, and the far side's application sees each one once
    (the redelivery limit is 2, so the drops must not count as crashes)."""
    url = request.getfixturevalue(queues)
    messages = channel_mix(42, 400, "metadata")
    amqp_relay = TcpProxy(rabbitmq.port)
    host, port = system.endpoint.url.removeprefix("http://").split(":")
    aws_relay = TcpProxy(int(port), host)
    relayed_kinesis = kinesis_url.replace(f":{port}", f":{aws_relay.port}")
    stop = threading.Event()

    def cut_now_and_then() -> None:
        for _ in range(6):
            if stop.wait(0.5):
                return
            amqp_relay.cut()
            aws_relay.cut()

    bridge = open_bridge(amqp_relay.url(url), relayed_kinesis, ["metadata"], poll_interval=0.1, batch_size=100)
    with Gateway(url, application="producer") as producer:
        bridge.step()  # subscribes the bridge's queues
        producer.send_all(messages, channel="metadata")
    threading.Thread(target=cut_now_and_then, daemon=True).start()
    worker = threading.Thread(target=bridge.run, kwargs={"stop": stop}, daemon=True)
    worker.start()
    try:
        with (
            system.routing(),  # the bridge sends to input: the broker routes them to metadata
            Gateway(kinesis_url, application="archive") as far,
            far.receiver("metadata", poll_interval=0.2) as inbox,
        ):
            got = collect(inbox, len(messages), timeout=60)
            assert inbox.receive(timeout=1) is None
    finally:
        stop.set()
        worker.join(30)
        amqp_relay.close()
        aws_relay.close()
    received = [r.message_id for r in got]
    assert amqp_relay.cuts + aws_relay.cuts > 0
    assert len(received) == len(set(received)) == len(messages)
    assert set(received) == ids(messages)


def test_a_bridge_killed_mid_stream_resumes_without_loss_or_duplicates(kinesis_url, url, system):
    """``rdss bridge`` as a process, SIGKILLed after the far side got some messages, then started
    again: the far side ends with every message, each delivered to its application once."""
    messages = Workload(seed=43).mix(400)
    system.publish([serialise(m) for m in messages], channel="metadata")
    command = [
        sys.executable,
        "-m",
        "rdss",
        "bridge",
        "--url",
        kinesis_url,
        "--to",
        url,
        "--channel",
        "metadata",
        "--declare",
        "repository",
        "--batch",
        "40",
        "--lease-duration",
        "1",
    ]
    environment = {**os.environ}
    with Gateway(url, application="repository") as far:
        far.transport.declare("metadata", "repository")  # type: ignore[attr-defined]
        with far.receiver("metadata", poll_interval=0.05) as inbox:
            first = subprocess.Popen(command, cwd=ROOT, env=environment, stderr=subprocess.DEVNULL)
            try:
                # it is moving messages: one more than a batch means a batch was forwarded,
                # settled and checkpointed (the bridge commits before it reads again)...
                got = collect(inbox, 41, timeout=60)
            finally:
                first.kill()  # ...SIGKILL: no checkpoint written on the way out
                first.wait(10)
            second = subprocess.run(
                [*command, "--idle", "3", "--json"], cwd=ROOT, env=environment, capture_output=True, timeout=120
            )
            assert second.returncode == 0, second.stderr
            resumed = orjson.loads(second.stdout)
            assert 0 < resumed["forwarded"] < len(messages)  # it was killed mid-stream
            got.extend(collect(inbox, len(messages) - len(got), timeout=30))
            assert inbox.receive(timeout=1) is None
            duplicates = inbox.stats.duplicates
    received = [r.message_id for r in got]
    assert len(received) == len(set(received)) == len(messages)
    assert set(received) == ids(messages)
    assert duplicates <= 40  # at most the batch in flight when it died reached the far side twice


def test_a_bridge_between_memory_and_rabbitmq_preserves_bytes(url):
    """Through RabbitMQ (as a Mosaic envelope) and back, a message arrives byte for byte."""
    messages = Workload(seed=44).mix(10)
    memory = f"memory://bridge-{os.getpid()}-{time.monotonic_ns()}"
    with Gateway(memory, application="producer") as producer:
        producer.send_all(messages, channel="metadata")
    there = Bridge(
        Gateway(memory, application="bridge"), Gateway(url, application="bridge"), ["metadata"], owns_gateways=True
    )
    back = open_bridge(url, memory, ["metadata"], group="return")
    back.step()  # the return bridge's queues exist before anything is sent
    there.run(idle_timeout=0.5)
    back.run(idle_timeout=0.5)
    # the channel holds what the producer sent and, after it, what came back through RabbitMQ
    records = memory_backend.bus(memory.removeprefix("memory://")).payloads("metadata")
    sent = {m["messageHeader"]["messageId"]: serialise(m) for m in messages}
    assert len(records) == 2 * len(messages)
    for record in records[len(messages) :]:  # byte for byte, plus a hop for each bridge
        original = records[list(sent).index(orjson.loads(record)["messageHeader"]["messageId"])]
        assert history.extends(original, record)
        assert history.extends(sent[orjson.loads(record)["messageHeader"]["messageId"]], record)
        assert unhopped(record)[1] == ["producer", "bridge", "return"]


def test_the_command_reports_an_unreachable_broker_in_one_line():
    result = run_rdss("bridge", "--url", "memory://x", "--from", "amqp://guest:guest@127.0.0.1:1/%2F")
    assert result.returncode == 2
    assert result.stderr.startswith("rdss bridge: cannot connect to RabbitMQ at 127.0.0.1:1")
    assert "Traceback" not in result.stderr


def test_the_bridge_benchmark_moves_messages_both_ways(rabbitmq):
    """``rdss bench bridge`` puts the broker's output on metadata and times both bridges: it had
    sent through a producer (which enters through input, where no broker ran) and timed nothing."""
    done = run_rdss("bench", "bridge", "--messages", "200", "--json", "--url", rabbitmq.url, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    rates = orjson.loads(done.stdout)["rates"]
    assert rates["Kinesis -> RabbitMQ"] > 0
    assert rates["RabbitMQ -> Kinesis"] > 0


def test_a_consumer_group_too_long_for_a_queue_name_is_one_line_not_a_retry(url):
    """A group of 250 bytes fits a group's own limit, but with the namespace, the channel and a
    messageType its queue names pass AMQP's 255: refused at once, exit 2, never retried."""
    result = run_rdss("bridge", "--url", "memory://x", "--from", url, "--group", "g" * 250, "--idle", "1", timeout=30)
    assert result.returncode == 2, result.stderr
    last = result.stderr.splitlines()[-1]  # after the opening line "bridging ..."
    assert last.startswith("rdss bridge: the queue name "), result.stderr
    assert "AMQP allows 255" in last
    assert "Traceback" not in result.stderr
    assert "retrying" not in result.stderr
