"""``rdss trace`` in the embedded runtime: a routed, a duplicate, an invalid and a reassembled
message, each followed to where it went, from the channels, the Local Data Repository, the
sequences table and the archives."""

from __future__ import annotations

import copy
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
import pytest

from rdss.cli import main
from rdss.gateway import Gateway, Receipt, Received, Rejected
from rdss.gateway.backend import state_directory
from rdss.local.emulator import Endpoint
from rdss.local.runtime import Runtime, Settings
from rdss.model.messages import reply
from rdss.model.workload import Workload
from rdss.repository.sqlite import SqliteRepository
from rdss.trace.sources import Sources
from rdss.trace.timeline import Record

pytestmark = pytest.mark.integration


@dataclass
class Sent:
    runtime: Runtime
    url: str
    routed: str
    duplicate: str
    invalid: str
    sequence: Receipt
    refused: str
    mangled: str
    request: str
    answer: str


@pytest.fixture(scope="module")
def sent(endpoint: Endpoint) -> Iterator[Sent]:
    runtime = Runtime(endpoint, Settings(environment=f"tr{uuid.uuid4().hex[:8]}", firehose_buffer_seconds=0.5))
    runtime.provision()
    url = f"kinesis://{runtime.deployment.environment}?region={endpoint.region}"
    url += f"&endpoint={endpoint.url}" if endpoint.url else ""
    saved = dict(os.environ)
    os.environ.update({k: v for k, v in endpoint.environment().items() if k != "AWS_ENDPOINT_URL"})
    try:
        workload = Workload(61)
        routed = workload.message("MetadataCreate", "Event")
        duplicate = workload.message("MetadataDelete", "Event")
        invalid = workload.message("MetadataUpdate", "Event")
        broken = copy.deepcopy(invalid)
        del broken["messageBody"]["objectTitle"]
        refused = workload.message("MetadataCreate", "Event")
        request = workload.message("MetadataRead", "Command")
        answer = reply(request, workload.message("MetadataRead", "Document")["messageBody"])
        with Gateway(url, application="producer") as producer:
            producer.send(routed, channel="metadata")
            producer.send(duplicate)
            producer.send(duplicate)  # at least once: the same message again
            receipt = producer.send(workload.large(2_100_000))
            producer.send(refused)
            producer.send(request)
            producer.send(answer)  # a repository answering it: routed to the request's returnAddress
        mangled = workload.message("MetadataCreate", "Event")  # header members of the wrong kinds
        mangled["messageHeader"] |= {"messageSequence": ["not", "an", "object"], "messageTimings": "yesterday"}
        runtime.publish([orjson.dumps(broken), orjson.dumps(mangled)])  # a producer that skipped the classifier
        runtime.drain()

        def archive(received: Received) -> None:  # a consumer refusing one message with its own code
            if received.message_id == refused["messageHeader"]["messageId"]:
                raise Rejected("APPERRMET001", "no such dataset here")

        with Gateway(url, application="archive") as consumer:
            # until the five messages on metadata are handled (four taken, one refused); the idle
            # limit only stops a run that goes wrong (on a loaded LocalStack the first lease and
            # shard iterator alone can take seconds)
            stats = consumer.listen("metadata", archive, max_messages=5, idle_timeout=60, poll_interval=0.05)
        assert (stats.acked, stats.rejected) == (4, 1)
        runtime.drain()
        yield Sent(
            runtime,
            url,
            routed["messageHeader"]["messageId"],
            duplicate["messageHeader"]["messageId"],
            invalid["messageHeader"]["messageId"],
            receipt,
            refused["messageHeader"]["messageId"],
            mangled["messageHeader"]["messageId"],
            request["messageHeader"]["messageId"],
            answer["messageHeader"]["messageId"],
        )
    finally:
        os.environ.clear()
        os.environ.update(saved)
        runtime.deprovision()


def trace(sent: Sent, capsys: pytest.CaptureFixture[str], message_id: str, *options: str) -> tuple[int, str]:
    code = main(["trace", message_id, "--url", sent.url, *options])
    return code, capsys.readouterr().out


def trace_json(sent: Sent, capsys: pytest.CaptureFixture[str], message_id: str) -> dict[str, Any]:
    code, out = trace(sent, capsys, message_id, "--json", "--application", "producer")
    assert code == 0
    result: dict[str, Any] = orjson.loads(out)
    return result


def test_a_routed_message(sent: Sent, capsys):
    found = trace_json(sent, capsys, sent.routed)
    [record] = found["records"]
    assert (record["outcome"], record["channels"]) == ("routed", ["metadata"])
    assert found["channels"] == {"input": 1, "metadata": 1}
    env = sent.runtime.deployment.environment
    assert [hop["machineId"] for hop in found["messageHistory"]] == ["producer", f"rdss-{env}-broker"]
    [audit] = [a for a in found["archives"] if a["archive"] == "audit"]
    assert audit["key"].startswith("audit/year=")
    assert any("producer's Local Data Repository: SENT" in e["what"] for e in found["events"])
    code, out = trace(sent, capsys, sent.routed)
    assert code == 0
    assert out.splitlines()[-1] == "where it went: routed to metadata"


def test_gateway_entries_come_from_the_application_s_own_store(sent: Sent, capsys, tmp_path):
    """The producer's gateway kept its entries in its own store (its default SQLite file here),
    not in the deployment's messages table: --ldr names that store, as the gateway's ldr= does."""
    env = sent.runtime.deployment.environment
    store = f"sqlite://{state_directory()}/kinesis-rdss-{env}.sqlite"
    code, out = trace(sent, capsys, sent.routed, "--json", "--application", "producer", "--ldr", store)
    assert code == 0
    [event] = [e for e in orjson.loads(out)["events"] if e["where"] == "gateway"]
    assert event["what"] == "producer's Local Data Repository: SENT"
    assert event["details"]["messageType"] == "MetadataCreate"
    # the broker's table holds no gateway entry at all
    table = sent.runtime.endpoint.client("dynamodb").scan(TableName=sent.runtime.deployment.table("messages"))
    assert not [i for i in table["Items"] if i["messageId"]["S"].startswith("gateway:")]
    # an application another store knows nothing of: no gateway event; a missing file is an error
    other = tmp_path / "other.sqlite"
    SqliteRepository(other, "producer")
    code, out = trace(sent, capsys, sent.routed, "--json", "--application", "producer", "--ldr", f"sqlite://{other}")
    assert code == 0
    assert not [e for e in orjson.loads(out)["events"] if e["where"] == "gateway"]
    missing = f"sqlite://{tmp_path}/no.sqlite"
    assert main(["trace", sent.routed, "--url", sent.url, "--application", "producer", "--ldr", missing]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main(["trace", sent.routed, "--url", sent.url, "--ldr", store]) == 2
    assert "--application" in capsys.readouterr().err


def test_a_request_shows_the_reply_that_answered_it(sent: Sent, capsys):
    found = trace_json(sent, capsys, sent.request)
    [record] = found["records"]
    assert record["outcome"] == "routed"
    assert [(r["messageId"], r["channel"]) for r in found["replies"]] == [(sent.answer, "responses")]
    code, out = trace(sent, capsys, sent.request)
    assert code == 0
    assert f"answered by MetadataRead Document {sent.answer} on responses" in out
    assert out.splitlines()[-1].endswith(f"; answered by {sent.answer} on responses")
    # the reply's own trace is the reply's: no request of its own to answer
    assert trace_json(sent, capsys, sent.answer)["replies"] == []


def test_a_duplicate(sent: Sent, capsys):
    found = trace_json(sent, capsys, sent.duplicate)
    first, second = found["records"]
    assert first["outcome"] == "routed"
    assert (second["outcome"], second["duplicateOf"]) == ("duplicate", first["record"])
    assert len([a for a in found["archives"] if a["archive"] == "audit"]) == 2  # both records dispatched
    assert found["summary"] == "routed to metadata; 1 duplicate record(s) dropped"


def test_an_invalid_message(sent: Sent, capsys):
    found = trace_json(sent, capsys, sent.invalid)
    [record] = found["records"]
    assert (record["outcome"], record["errorCode"]) == ("invalid", "GENERR001")
    assert "objectTitle" in record["errorDescription"]
    assert (found["errorCode"], found["channels"]) == ("GENERR001", {"input": 1, "invalid": 1})
    assert {a["archive"] for a in found["archives"]} == {"audit", "errors"}
    assert [a.get("errorCode") for a in found["archives"] if a["archive"] == "errors"] == ["GENERR001"]
    code, out = trace(sent, capsys, sent.invalid)
    assert code == 0
    assert "record(s) moved to invalid (GENERR001)" in out.splitlines()[-1]


def test_a_header_of_the_wrong_shape(sent: Sent, capsys):
    """The only copy of the message has a messageSequence that is a list and messageTimings that
    is a string: traced all the same, from what the deployment kept."""
    found = trace_json(sent, capsys, sent.mangled)
    [record] = found["records"]
    assert (record["outcome"], record["errorCode"]) == ("invalid", "GENERR004")
    assert found["sequence"] is None


def test_a_consumer_s_move(sent: Sent, capsys):
    """Routed, then refused by a consumer, which put it on invalid itself: shown as that group's
    move (its partition key), not as the broker's verdict, and nothing more entered input."""
    found = trace_json(sent, capsys, sent.refused)
    [record] = found["records"]
    assert (record["outcome"], record["channels"]) == ("routed", ["metadata"])
    assert found["moves"] == [{"group": "archive", "channel": "invalid", "errorCode": "APPERRMET001"}]
    assert found["channels"] == {"input": 1, "metadata": 1, "invalid": 1}
    assert found["errorCode"] is None  # the broker rejected nothing of it
    assert found["summary"] == "routed to metadata; moved to invalid by consumer group archive (APPERRMET001)"
    assert any(
        e["what"] == "moved to invalid by consumer group archive: APPERRMET001 no such dataset here"
        for e in found["events"]
    )


def test_a_reassembled_sequence(sent: Sent, capsys):
    found = trace_json(sent, capsys, sent.sequence.parts[0])
    [record] = found["records"]
    assert record["outcome"] == "part"
    assert found["sequence"]["sequence"] == sent.sequence.sequence
    assert (found["sequence"]["status"], found["sequence"]["positionsSeen"]) == ("COMPLETE", [1, 2, 3])
    assert found["channels"] == {"input": 1, "sequence": 1, "metadata": 1}
    env = sent.runtime.deployment.environment
    hops = [hop["machineId"] for hop in found["messageHistory"]]
    assert hops == ["producer", f"rdss-{env}-broker", f"rdss-{env}-sequencer"]
    assert found["summary"] == f"a part of sequence {sent.sequence.sequence}, released to metadata"


def test_nothing_found_exits_1(sent: Sent, capsys):
    code, out = trace(sent, capsys, str(uuid.uuid4()))
    assert code == 1
    assert out.splitlines()[-1] == "where it went: nothing found"


def test_trace_reads_only_kinesis_deployments(capsys):
    assert main(["trace", str(uuid.uuid4()), "--url", "memory://x"]) == 2
    assert "works on a Kinesis deployment" in capsys.readouterr().err


def test_a_sequence_by_the_id_the_sender_printed_and_by_its_sequence_id(sent: Sent, capsys):
    """``rdss send`` of a large message prints "sent ID as N parts (sequence S)": ID never travels
    (the parts carry ids of their own), yet a trace of either finds the parts and the whole."""
    receipt = sent.sequence
    assert receipt.message_id not in receipt.parts
    for asked in (receipt.message_id, receipt.sequence):
        found = trace_json(sent, capsys, asked)
        assert found["messageId"] == asked
        assert [r["outcome"] for r in found["records"]] == ["part", "part", "part"]
        assert found["sequence"]["sequence"] == receipt.sequence
        assert (found["sequence"]["status"], found["sequence"]["positionsSeen"]) == ("COMPLETE", [1, 2, 3])
        whole = found["whole"]
        assert (whole["channel"], whole["parts"], whole["valid"]) == ("metadata", 3, True)
        assert whole["messageId"] == receipt.parts[0]  # as consumers receive it, reassembled
        assert found["channels"] == {"input": 3, "sequence": 3, "metadata": 3}
        code, out = trace(sent, capsys, asked)
        assert code == 0
        assert out.splitlines()[-1] == (
            f"where it went: sequence {receipt.sequence}: released to metadata, "
            f"reassembled as message {receipt.parts[0]} (valid)"
        )


def test_a_trace_reads_each_channel_once(sent: Sent, capsys, monkeypatch):
    """The messageId and the sequence id a split message's parts carry are looked for in one
    pass: a trace of an id nothing carries (the case that looks for both) reads no stream twice."""
    reads: list[str] = []
    original = Sources.read

    def counted(self: Sources, channel: str, start: datetime) -> Iterator[Record]:
        reads.append(channel)
        return original(self, channel, start)

    monkeypatch.setattr(Sources, "read", counted)
    code, _ = trace(sent, capsys, str(uuid.uuid4()))
    assert code == 1
    assert "input" in reads
    assert sorted(reads) == sorted(set(reads))
