"""Every dispatched message in the audit archive, once, whatever the backend and the channel a
producer names: on Kinesis everything enters through ``input`` (archived by the archiver
through Firehose); on RabbitMQ the Wire Tap archiver reads both exchanges and writes the same
entries."""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson
import pytest

from rdss.archive import entries as archive
from rdss.gateway import ChannelMismatch, Gateway, Received
from rdss.gateway.bridge import open_bridge
from rdss.gateway.wiretap import Archiver, DirectorySink
from rdss.local.accounting import read_archive, read_channel
from rdss.local.emulator import Endpoint
from rdss.local.runtime import Runtime, Settings
from rdss.model.messages import new_message, reply
from rdss.model.workload import Workload
from tests.amqp.conftest import run_rdss
from tests.support.traffic import channel_mix

pytestmark = pytest.mark.integration


@contextmanager
def running(runtime: Runtime) -> Iterator[None]:
    """Broker, sequencer, archiver and delivery streams at work on a thread while the block runs."""
    stop = threading.Event()

    def pump() -> None:
        while not stop.is_set():
            if not runtime.step():
                stop.wait(0.05)

    thread = threading.Thread(target=pump, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(30)


def audited(entries: list[archive.Entry]) -> Counter[str]:
    """How many times each messageId is in the archive's records."""
    return Counter(orjson.loads(entry.payload)["messageHeader"]["messageId"] for entry in entries)


def test_sends_bridged_messages_replies_and_sequences_are_each_archived_once(
    endpoint: Endpoint, url: str, monkeypatch: pytest.MonkeyPatch
):
    runtime = Runtime(endpoint, Settings(environment=f"au{uuid.uuid4().hex[:8]}", firehose_buffer_seconds=0.5))
    runtime.provision()
    for name, value in endpoint.environment().items():
        if name != "AWS_ENDPOINT_URL":
            monkeypatch.setenv(name, value)
    kinesis = f"kinesis://{runtime.deployment.environment}?region={endpoint.region}"
    kinesis += f"&endpoint={endpoint.url}" if endpoint.url else ""
    workload = Workload(71)
    direct = workload.message("MetadataCreate", "Event")
    bridged = workload.message("MetadataUpdate", "Event")
    read = workload.message("MetadataRead", "Command")
    answers: list[str] = []

    def respond(received: Received) -> None:  # a repository answering reads, through its gateway
        if received.message_type == "MetadataRead" and received.message_class == "Command":
            document = reply(received.message, workload.research_object())
            responder.send(document, channel="responses")
            answers.append(document["messageHeader"]["messageId"])

    bridge = open_bridge(url, kinesis, ["metadata"], poll_interval=0.1)
    bridge.step()  # the bridge's queues exist before anything is sent
    with (
        running(runtime),
        Gateway(kinesis, application="producer") as producer,
        Gateway(kinesis, application="responder") as responder,
        Gateway(url, application="rabbit-producer") as rabbit,
    ):
        receipt = producer.send(direct, channel="metadata")  # named straight for metadata
        sequence = producer.send(workload.large(2_100_000), channel="metadata")
        rabbit.send(bridged, channel="metadata")
        bridge.run(idle_timeout=1.0, max_messages=1)
        stop = threading.Event()
        listener = threading.Thread(
            target=responder.listen, args=("metadata", respond), kwargs={"stop": stop, "poll_interval": 0.1}
        )
        listener.start()
        try:
            document = producer.request(read, timeout=60)
        finally:
            stop.set()
            listener.join(30)
    runtime.drain()
    _, entries = read_archive(runtime, "audit", "audit/")
    counts = audited(entries)
    assert receipt.channel == "metadata"
    assert counts[direct["messageHeader"]["messageId"]] == 1
    assert counts[bridged["messageHeader"]["messageId"]] == 1
    assert counts[read["messageHeader"]["messageId"]] == 1
    assert answers == [document["messageHeader"]["messageId"]]
    assert counts[document["messageHeader"]["messageId"]] == 1  # the reply
    assert [counts[part] for part in sequence.parts] == [1, 1, 1]  # every part of the sequence
    assert sum(counts.values()) == len(entries) == 7  # and nothing else, nothing twice
    # the broker routed each where its content says, with its hop after the gateways'
    routed = {orjson.loads(r)["messageHeader"]["messageId"]: r for r in read_channel(runtime, "metadata")}
    hops = [
        h["machineId"]
        for h in orjson.loads(routed[bridged["messageHeader"]["messageId"]])["messageHeader"]["messageHistory"]
    ]
    assert hops == ["rabbit-producer", "bridge", f"rdss-{runtime.deployment.environment}-broker"]
    runtime.stop()


def test_a_send_named_for_a_channel_its_content_is_not_routed_to_is_refused(endpoint: Endpoint, monkeypatch):
    runtime = Runtime(endpoint, Settings(environment=f"au{uuid.uuid4().hex[:8]}"))
    runtime.provision()
    for name, value in endpoint.environment().items():
        if name != "AWS_ENDPOINT_URL":
            monkeypatch.setenv(name, value)
    kinesis = f"kinesis://{runtime.deployment.environment}?region={endpoint.region}"
    kinesis += f"&endpoint={endpoint.url}" if endpoint.url else ""
    patch = Workload(72).message("VocabularyPatch", "Event")
    with Gateway(kinesis, application="producer") as producer:
        with pytest.raises(ChannelMismatch, match="routed to vocabulary, not metadata"):
            producer.send_all([Workload(73).message("MetadataDelete", "Event"), patch], channel="metadata")
        assert read_channel(runtime, "input") == []  # nothing was sent
        producer.send(patch, channel="vocabulary")
    [record] = read_channel(runtime, "input")
    assert orjson.loads(record)["messageHeader"]["messageId"] == patch["messageHeader"]["messageId"]
    runtime.stop()


def test_the_archiver_writes_rabbitmq_traffic_in_the_firehose_layout(url: str, tmp_path: Path):
    with Gateway(url, application="audit") as audit:
        audit.transport.declare("input", "audit")  # type: ignore[attr-defined] # the Wire Tap, before traffic
    metadata = channel_mix(74, 6, "metadata")
    vocabulary = channel_mix(75, 3, "vocabulary")
    read = new_message("MetadataRead", {"objectUuid": str(uuid.uuid4())}, message_class="Command")
    document = reply(read, Workload(76).research_object())
    with Gateway(url, application="producer") as producer:
        producer.send_all(metadata, channel="metadata")
        producer.send_all(vocabulary, channel="vocabulary")
        producer.send(document, channel="responses")
        sequence = producer.send(Workload(77).large(1_500_000), channel="metadata")
    target = tmp_path / "archive"
    with Gateway(url, application="audit") as audit:
        stats = Archiver(audit.transport, DirectorySink(target), buffer_seconds=0.3).run(idle_timeout=1.5)
    expected = [m["messageHeader"]["messageId"] for m in [*metadata, *vocabulary, document]] + list(sequence.parts)
    objects = sorted(target.rglob("*.gz"))
    assert stats.records == len(expected)
    assert [str(p.relative_to(target)) for p in objects] == sorted(stats.keys)
    entries: list[archive.Entry] = []
    for path in objects:
        key = str(path.relative_to(target))
        assert key.startswith("audit/year=")
        assert archive.archived_at(key) is not None  # the hour partitions the Glue jobs read
        entries.extend(archive.read(path.read_bytes()))
    assert audited(entries) == Counter(expected)  # every message once, whatever channel it took
    # each an entry with its identity from the transport: the channel, the queue and the position
    assert {e.stream for e in entries} == {"input"}
    assert len({e.identity for e in entries}) == len(entries)
    assert all(e.shard and e.sequence_number for e in entries)


def test_the_archive_command(url: str, tmp_path: Path):
    with Gateway(url, application="audit") as audit:
        audit.transport.declare("input", "audit")  # type: ignore[attr-defined]
    with Gateway(url, application="producer") as producer:
        producer.send_all(channel_mix(78, 4, "metadata"), channel="metadata")
    done = run_rdss(
        "archive", "--url", url, "--to", str(tmp_path), "--idle", "1.5", "--buffer-seconds", "0.3", "--json"
    )
    assert done.returncode == 0, done.stderr
    figures = orjson.loads(done.stdout)
    assert figures["records"] == 4
    assert sum(len(archive.read((tmp_path / key).read_bytes())) for key in figures["keys"]) == 4
