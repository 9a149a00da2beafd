"""The gateway on Kinesis and DynamoDB, against the emulator: real HTTP calls, real shards."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import orjson
import pytest

from rdss.gateway import MessageRefused, RequestFailed, SendFailed, select
from rdss.gateway.checkpoints import SHARD_END, TRIM_HORIZON, DynamoLeaseStore, Lease
from rdss.local.emulator import wait_active
from rdss.model import decoration, history, timestamps
from rdss.model.messages import new_message, reply
from rdss.model.workload import Workload
from tests.support.faults import Proxy, partial_put_records
from tests.support.gateway_system import open_gateway, vendor_table
from tests.support.system import System

pytestmark = pytest.mark.integration


def drain(gateway: Any, channel: str, **options: Any) -> tuple[list[Any], Any]:
    options.setdefault("poll_interval", 0.05)
    got = []
    with gateway.receiver(channel, **options) as inbox:
        while (received := inbox.receive(timeout=0.5)) is not None:
            got.append(received)
            inbox.ack(received)
    return got, inbox.stats


def ids(items: list[Any]) -> list[str]:
    return [i["messageHeader"]["messageId"] if isinstance(i, dict) else i.message_id for i in items]


def ldr(system: System, key: str) -> dict[str, Any] | None:
    """An item of the gateways' Local Data Repository (the vendor's table, not the deployment's)."""
    item = system.client("dynamodb").get_item(
        TableName=vendor_table(system), Key={"messageId": {"S": key}}, ConsistentRead=True
    )
    return item.get("Item")


def test_send_and_receive_with_a_sequence_and_the_local_data_repository(system: System):
    producer, consumer = open_gateway(system, "producer"), open_gateway(system, "consumer")
    workload = Workload(41)
    types = ("MetadataCreate", "MetadataUpdate", "MetadataDelete")
    messages = [workload.message(types[i % 3], "Event") for i in range(20)]
    big = workload.large(2_100_000)
    producer.send_all(messages, channel="metadata")  # through input: the broker routes them there
    receipt = producer.send(big, channel="metadata")
    assert len(receipt.parts) == 3
    assert system.read("metadata") == []
    system.route()
    got, stats = drain(consumer, "metadata")
    assert sorted(ids(got)) == sorted([*ids(messages), receipt.parts[0]])
    [whole] = [r for r in got if r.message_id == receipt.parts[0]]
    assert whole.body == big["messageBody"]
    assert stats.records == 23
    # the spec's fields, under the application's namespace: never the bare messageId the broker claims
    sent = ldr(system, f"gateway:producer:{receipt.parts[1]}")
    assert sent is not None
    assert sent["status"] == {"S": "SENT"}
    assert sent["sequence"] == {"S": receipt.sequence}
    assert sent["position"] == {"N": "2"}
    assert sent["messageType"] == {"S": "MetadataCreate"}
    assert ldr(system, f"gateway:consumer:{ids(messages)[0]}")["status"] == {"S": "RECEIVED"}  # type: ignore[index]
    assert ldr(system, ids(messages)[0]) is None  # the bare messageId is the broker's claim, not the gateway's
    claim = system.client("dynamodb").get_item(
        TableName=system.deployment.table("messages"), Key={"messageId": {"S": ids(messages)[0]}}, ConsistentRead=True
    )["Item"]
    assert claim["claimedBy"]["S"].startswith("shardId-")


def test_the_broker_routes_what_the_gateway_sent(system: System):
    producer = open_gateway(system, "producer")
    message = Workload(42).message("MetadataCreate", "Event")
    payload = orjson.dumps(message, option=orjson.OPT_INDENT_2)
    producer.send(payload)
    system.mapping("input", system.handler(system.broker())).drain()
    [routed] = system.read("metadata")  # not dropped as a duplicate of the gateway's entry
    assert history.extends(payload, routed)  # every byte as sent, plus two hops
    assert [hop["machineId"] for hop in history.hops(routed)] == [
        "producer",
        f"rdss-{system.deployment.environment}-broker",
    ]


def test_a_batch_send_uses_full_put_records_calls(system: System):
    calls: list[int] = []
    kinesis = system.client("kinesis")
    kinesis.meta.events.register(
        "before-parameter-build.kinesis.PutRecords", lambda params, **_: calls.append(len(params["Records"]))
    )
    producer = open_gateway(system, "producer", clients={"kinesis": kinesis})
    workload = Workload(43)
    messages = [workload.message("MetadataDelete", "Event") for _ in range(2_500)]
    assert len(producer.send_all(messages)) == 2_500
    assert calls == [500] * 5  # 10,000 messages would take 20 calls: at most 25 per 10,000
    assert len(system.read("input")) == 2_500


def test_throttled_put_records_are_retried_per_record(system: System):
    throttled = Proxy(
        system.client("kinesis"),
        put_records=partial_put_records(lambda call, entry: call == 1 and entry["PartitionKey"][-1] in "02468ace"),
    )
    producer = open_gateway(system, "producer", clients={"kinesis": throttled})
    messages = Workload(44).mix(40)
    receipts = producer.send_all(messages)
    assert throttled.calls["put_records"] == 2
    assert sorted(ids([orjson.loads(r) for r in system.read("input")])) == sorted(ids(messages))
    assert all(ldr(system, f"gateway:producer:{r.message_id}")["status"] == {"S": "SENT"} for r in receipts)  # type: ignore[index]


def test_giving_up_after_the_retries_is_generr005_and_leaves_to_send(system: System, caplog):
    refused = Proxy(system.client("kinesis"), put_records=partial_put_records(lambda call, entry: True))
    producer = open_gateway(system, "producer", clients={"kinesis": refused})
    message = Workload(45).message("MetadataDelete", "Event")
    with caplog.at_level(logging.ERROR), pytest.raises(SendFailed) as failed:
        producer.send(message)
    assert failed.value.error_code == "GENERR005"
    assert refused.calls["put_records"] == 4  # the first attempt and three retries
    assert any(r.getMessage().startswith("GENERR005") for r in caplog.records)
    entry = ldr(system, f"gateway:producer:{message['messageHeader']['messageId']}")
    assert entry is not None
    assert entry["status"] == {"S": "TO_SEND"}
    assert system.read("input") == []


def test_an_invalid_message_is_never_sent(system: System):
    message = Workload(46).message("MetadataCreate", "Event")
    del message["messageBody"]["objectTitle"]
    with pytest.raises(MessageRefused) as refused:
        open_gateway(system, "producer").send(message)
    assert refused.value.error_code == "GENERR001"
    assert system.read("input") == []


def test_expired_messages_go_to_the_error_channel(system: System):
    stale = new_message(
        "MetadataDelete",
        {"objectUuid": "f3b1c7a2-9d4e-4b8a-8c6f-0e2d5a7b9c1d"},
        now=timestamps.now().replace(year=2020),
    )
    stale["messageHeader"]["messageTimings"]["expirationTimestamp"] = "2020-01-01T00:00:00Z"
    payload = orjson.dumps(stale)
    system.publish([payload], channel="metadata")
    got, stats = drain(open_gateway(system, "consumer"), "metadata")
    assert (got, stats.expired) == ([], 1)
    # the consumer puts its move on error itself, decorated, keyed as its group's move; nothing
    # enters input (where the broker would judge it as a producer's message)
    [record] = system.records("error")
    assert record.partition_key == "moved:consumer"
    assert system.read("input") == []
    moved = record.data
    assert orjson.loads(moved)["messageHeader"]["errorCode"] == "GENERR003"
    assert decoration.original(moved) == payload


def test_a_failure_reply_through_the_broker_raises_request_failed(system: System):
    """The responder cannot answer: its reply_error goes to input like any reply, the broker
    routes it to the request's returnAddress, and the requester raises RequestFailed."""
    stop = threading.Event()

    def broker() -> None:
        mapping = system.mapping("input", system.handler(system.broker()))
        while not stop.is_set():
            mapping.poll()
            stop.wait(0.05)

    def responder() -> None:
        gateway = open_gateway(system, "responder")
        gateway.listen(
            "metadata",
            lambda received: gateway.reply_error(received, "APPERRMET003", "no such object here"),
            stop=stop,
            poll_interval=0.05,
            selector=select(message_type="MetadataRead"),
        )

    threads = [threading.Thread(target=broker), threading.Thread(target=responder)]
    for thread in threads:
        thread.start()
    try:
        requester = open_gateway(system, "requester", reply_poll_interval=0.1)
        read = Workload(49).message("MetadataRead", "Command")
        read["messageHeader"]["returnAddress"] = "vocabulary"  # not the default: the broker looks it up
        with pytest.raises(RequestFailed) as failed:
            requester.request(read, timeout=60)
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
    assert (failed.value.error_code, failed.value.error_description) == ("APPERRMET003", "no such object here")
    assert failed.value.reply["messageHeader"]["correlationId"] == read["messageHeader"]["messageId"]
    [routed] = [orjson.loads(r) for r in system.read("vocabulary") if b"APPERRMET003" in r]
    assert routed == failed.value.reply
    assert system.read("invalid") == []


def test_request_reply_through_the_broker(system: System):
    """The requester names returnAddress; the broker routes the responder's Document there."""
    stop = threading.Event()

    def broker() -> None:
        mapping = system.mapping("input", system.handler(system.broker()))
        while not stop.is_set():
            mapping.poll()
            stop.wait(0.05)

    def responder() -> None:
        gateway = open_gateway(system, "responder")

        def answer(received: Any) -> None:
            gateway.send(reply(received.message, Workload(47).research_object()))  # to input, like any message

        gateway.listen("metadata", answer, stop=stop, poll_interval=0.05, selector=select(message_type="MetadataRead"))

    threads = [threading.Thread(target=broker), threading.Thread(target=responder)]
    for thread in threads:
        thread.start()
    try:
        requester = open_gateway(system, "requester", reply_poll_interval=0.1)
        read = Workload(48).message("MetadataRead", "Command")
        del read["messageHeader"]["returnAddress"]
        started = time.monotonic()
        document = requester.request(read, timeout=30)
        assert time.monotonic() - started < 30
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
    assert document["messageHeader"]["correlationId"] == read["messageHeader"]["messageId"]
    assert document["messageHeader"]["messageClass"] == "Document"


def test_resharding_children_after_parents_and_nothing_twice(system: System):
    kinesis, stream = system.client("kinesis"), system.deployment.stream("metadata")
    consumer = open_gateway(system, "consumer")
    workload = Workload(49)
    first, second, third = workload.mix(10), workload.mix(10), workload.mix(10)
    system.publish([orjson.dumps(m) for m in first], channel="metadata")
    with consumer.receiver("metadata", poll_interval=0.05) as inbox:  # half of the first ten, then stop
        for _ in range(5):
            received = inbox.receive(timeout=30)  # the first takes a lease and an iterator first
            assert received is not None
            inbox.ack(received)
    [parent] = [s["ShardId"] for s in kinesis.list_shards(StreamName=stream)["Shards"]]
    kinesis.split_shard(StreamName=stream, ShardToSplit=parent, NewStartingHashKey=str(2**127))
    wait_active(kinesis, stream)  # UPDATING while it splits: Kinesis refuses another reshard until then
    system.publish([orjson.dumps(m) for m in second], channel="metadata")
    children = sorted(s["ShardId"] for s in kinesis.list_shards(StreamName=stream)["Shards"] if s["ShardId"] != parent)
    kinesis.merge_shards(StreamName=stream, ShardToMerge=children[0], AdjacentShardToMerge=children[1])
    wait_active(kinesis, stream)
    system.publish([orjson.dumps(m) for m in third], channel="metadata")
    expected = ids(first[5:] + second + third)
    # children are read once their parents are finished, which takes lease ticks: wait for what
    # is expected (an idle pause is no sign of the end here), then make sure nothing more comes
    got = []
    with consumer.receiver("metadata", poll_interval=0.05) as inbox:
        deadline = time.monotonic() + 60
        copies = 50 if system.endpoint.embedded else 0  # see below
        while time.monotonic() < deadline and (len(got) < len(expected) or inbox.stats.records < copies):
            if (received := inbox.receive(timeout=1)) is not None:
                got.append(received)
                inbox.ack(received)
        assert inbox.receive(timeout=1) is None
    stats = inbox.stats
    assert sorted(ids(got)) == sorted(expected)  # everything once
    if system.endpoint.embedded:  # moto moves a split parent's records into the children and
        assert stats.records == 50  # copies merged children's into the merged shard:
        assert stats.duplicates == 25  # all of them read, the copies dropped by the LDR
    else:  # Kinesis keeps each record in the shard it was written to: each read once
        assert (stats.records, stats.duplicates) == (25, 0)
    partitions = [r.deliveries[0].partition for r in got]
    [merged] = [
        s["ShardId"] for s in kinesis.list_shards(StreamName=stream)["Shards"] if s.get("AdjacentParentShardId")
    ]
    assert partitions.index(merged) > max(i for i, p in enumerate(partitions) if p in children)
    rows = {
        item["shardId"]["S"]: item
        for item in system.client("dynamodb").scan(TableName=system.deployment.table("checkpoints"))["Items"]
    }
    for shard in (parent, *children):
        assert rows[shard]["checkpoint"] == {"S": SHARD_END}
        assert "leaseOwner" not in rows[shard]
        assert int(rows[shard]["expiresAt"]["N"]) > time.time()
    assert "expiresAt" not in rows[merged]
    assert rows[merged]["parentShardIds"]["SS"] == children or sorted(rows[merged]["parentShardIds"]["SS"]) == children


def test_lease_rows_are_written_conditionally(system: System):
    store = DynamoLeaseStore(system.client("dynamodb"), system.deployment.table("checkpoints"), "group#stream")
    assert store.create(Lease("shard-0", None, 0, TRIM_HORIZON, ("parent",)))
    assert not store.create(Lease("shard-0", None, 0, TRIM_HORIZON))
    [row] = store.leases()
    assert row.parents == ("parent",)
    mine = store.take(row, "a")
    assert mine is not None
    assert store.take(row, "b") is None  # stale counter
    assert store.request_handoff(mine, "b")
    assert not store.request_handoff(mine, "c")  # already asked for
    renewed = store.renew(mine)
    assert renewed is not None
    assert renewed.handoff == "b"
    assert store.checkpoint(mine, "5") is None  # the counter moved on
    saved = store.checkpoint(renewed, "5")
    assert saved is not None
    released = store.release(saved)
    assert released is not None
    [row] = store.leases()
    assert (row.owner, row.handoff, row.checkpoint) == (None, None, "5")
    taken = store.take(row, "b")
    assert taken is not None
    finished = store.checkpoint(taken, SHARD_END)
    assert finished is not None
    item = system.client("dynamodb").get_item(
        TableName=system.deployment.table("checkpoints"),
        Key={"lease": {"S": "group#stream"}, "shardId": {"S": "shard-0"}},
    )["Item"]
    assert "leaseOwner" not in item
    assert int(item["expiresAt"]["N"]) > time.time()


def test_the_cli_sends_tails_and_requests_against_the_emulator(system: System, monkeypatch, capsys, tmp_path):
    """``rdss request`` with the reply published straight to the reply channel (no broker)."""
    from rdss.cli import main
    from tests.support.gateway_system import gateway_url

    for name, value in system.endpoint.environment().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("RDSS_GATEWAY_URL", gateway_url(system))
    create = tmp_path / "create.json"
    create.write_bytes(orjson.dumps(Workload(50).message("MetadataCreate", "Event")))
    assert main(["send", str(create), "--to", "metadata"]) == 0
    system.route()
    assert main(["tail", "metadata", "--from-start", "--count", "1"]) == 0
    out, _ = capsys.readouterr()
    tailed = orjson.loads(out.splitlines()[-1])
    assert [hop["machineId"] for hop in tailed["messageHeader"].pop("messageHistory")] == [
        "rdss-cli",
        f"rdss-{system.deployment.environment}-broker",
    ]
    assert tailed == orjson.loads(create.read_bytes())

    read = Workload(51).message("MetadataRead", "Command")
    request = tmp_path / "read.json"
    request.write_bytes(orjson.dumps(read))
    stop = threading.Event()

    def respond() -> None:  # a responder watching input, answering on the request's returnAddress
        while not stop.is_set():
            for payload in system.read("input"):
                header = orjson.loads(payload)["messageHeader"]
                if header["messageId"] == read["messageHeader"]["messageId"]:
                    document = reply(read, Workload(52).research_object())
                    system.publish([orjson.dumps(document)], channel=header["returnAddress"])
                    return
            stop.wait(0.1)

    thread = threading.Thread(target=respond)
    thread.start()
    try:
        code = main(["request", str(request), "--timeout", "20", "--interval", "0.1"])
    finally:
        stop.set()
        thread.join(10)
    out, err = capsys.readouterr()
    assert (code, err) == (0, "")
    assert orjson.loads(out)["messageHeader"]["correlationId"] == read["messageHeader"]["messageId"]


def test_the_send_benchmark_counts_put_records_calls(capsys):
    from rdss.cli import main

    assert main(["bench", "send", "--messages", "1000", "--json"]) == 0
    figures = orjson.loads(capsys.readouterr().out)
    assert figures["put_records_calls"] == 2
    assert figures["put_records_per_1000"] == 2.0
    assert figures["calls"]["TransactWriteItems"] == 20  # TO_SEND and SENT, 100 entries a call
    assert figures["messages_per_second"] > 0
