"""The gateway on the memory backend (the spec's Mock): send, receive, request-reply and the
consumer patterns, with the same batching and retry code as Kinesis."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from datetime import timedelta
from typing import Any

import orjson
import pytest

from rdss.gateway import (
    Gateway,
    MessageRefused,
    NotARequest,
    Received,
    RequestFailed,
    RequestTimeout,
    SendFailed,
    select,
)
from rdss.gateway.consumer import Receiver
from rdss.gateway.log import memory as memory_backend
from rdss.model import decoration, history, timestamps
from rdss.model.messages import new_message, reply
from rdss.model.retry import Backoff
from rdss.model.sequences import split
from rdss.model.validation import validate
from rdss.model.workload import Workload
from rdss.repository.entries import RECEIVED, SENT, TO_SEND

FAST = Backoff(max_retries=3, base=0.001)


@pytest.fixture
def bus_name():
    name = f"t-{uuid.uuid4().hex[:8]}"
    yield name
    memory_backend.discard(name)


def gateway(bus_name: str, application: str = "app", partitions: int = 1, **kwargs: Any) -> Gateway:
    kwargs.setdefault("backoff", FAST)
    kwargs.setdefault("lease_duration", 0.6)
    kwargs.setdefault("reply_poll_interval", 0.02)
    return Gateway(f"memory://{bus_name}?partitions={partitions}", application=application, **kwargs)


def drain(g: Gateway, channel: str, **options: Any) -> list[Received]:
    options.setdefault("poll_interval", 0.01)
    got = []
    with g.receiver(channel, **options) as inbox:
        while (received := inbox.receive(timeout=0.1)) is not None:
            got.append(received)
            inbox.ack(received)
    return got


def ids(messages: list[Any]) -> list[str]:
    return [m["messageHeader"]["messageId"] if isinstance(m, dict) else m.message_id for m in messages]


# -- sending ---------------------------------------------------------------------------------------
def test_send_records_to_send_then_sent_and_the_message_arrives_byte_for_byte(bus_name):
    g = gateway(bus_name)
    payload = orjson.dumps(Workload(1).message("MetadataCreate", "Event"), option=orjson.OPT_INDENT_2)
    receipt = g.send(payload)
    bus = memory_backend.bus(bus_name)
    [sent] = bus.payloads("input")
    assert history.extends(payload, sent)  # every byte as given, plus the gateway's hop
    assert [hop["machineId"] for hop in history.hops(sent)] == ["app"]
    entry = g.repository.entry(receipt.message_id)
    assert entry is not None
    assert (entry.status, entry.message_type, entry.message_class, entry.position) == (
        SENT,
        "MetadataCreate",
        "Event",
        1,
    )
    assert g.repository.writes == 2  # TO_SEND, then SENT  # type: ignore[attr-defined]


def test_an_invalid_message_is_refused_with_its_code_and_nothing_is_sent(bus_name):
    g = gateway(bus_name)
    good = Workload(2).message("MetadataDelete", "Event")
    bad = Workload(3).message("MetadataDelete", "Event")
    bad["messageHeader"]["messageId"] = "NOT-A-UUID"
    with pytest.raises(MessageRefused) as refused:
        g.send_all([good, bad])
    assert refused.value.error_code == "GENERR010"
    assert [r.index for r in refused.value.refusals] == [1]
    assert memory_backend.bus(bus_name).payloads("input") == []
    assert g.repository.entry(good["messageHeader"]["messageId"]) is None


def test_an_expired_message_is_refused(bus_name):
    expired = new_message("MetadataDelete", {"objectUuid": str(uuid.uuid4())}, expires_in=timedelta(seconds=-1))
    with pytest.raises(MessageRefused, match="GENERR003"):
        gateway(bus_name).send(expired)


def test_ten_thousand_small_messages_take_twenty_put_records_calls(bus_name):
    g = gateway(bus_name, partitions=4)
    bus = memory_backend.bus(bus_name)
    calls = []
    real = bus.put_records

    def counting(**kwargs: Any) -> dict[str, Any]:
        calls.append(len(kwargs["Records"]))
        return real(**kwargs)

    bus.put_records = counting  # type: ignore[method-assign]
    workload = Workload(4)
    messages = [workload.message("MetadataDelete", "Event") for _ in range(10_000)]
    receipts = g.send_all(messages)
    assert len(receipts) == 10_000
    assert len(calls) == 20 <= 25
    assert set(calls) == {500}
    assert len(bus.payloads("input")) == 10_000


def test_throttled_entries_are_retried_alone_until_accepted(bus_name):
    g = gateway(bus_name)
    bus = memory_backend.bus(bus_name)
    seen: dict[bytes, int] = {}

    def throttle_first_two_attempts(channel: str, data: bytes) -> str | None:
        seen[data] = seen.get(data, 0) + 1
        index = int(orjson.loads(data)["messageBody"]["objectUuid"][-2:], 16)
        return "ProvisionedThroughputExceededException" if index % 3 == 0 and seen[data] <= 2 else None

    bus.fault = throttle_first_two_attempts
    messages = [new_message("MetadataDelete", {"objectUuid": f"{uuid.uuid4()}"[:-2] + f"{i:02x}"}) for i in range(60)]
    receipts = g.send_all(messages)
    assert len(receipts) == 60
    sent = {orjson.loads(p)["messageHeader"]["messageId"]: p for p in bus.payloads("input")}
    assert len(sent) == len(bus.payloads("input")) == 60
    assert all(history.extends(orjson.dumps(m), sent[m["messageHeader"]["messageId"]]) for m in messages)
    assert max(seen.values()) == 3
    assert all(g.repository.entry(r.message_id).status == SENT for r in receipts)  # type: ignore[union-attr]


def test_giving_up_logs_generr005_and_leaves_the_messages_to_send(bus_name, caplog):
    g = gateway(bus_name)
    memory_backend.bus(bus_name).fault = lambda channel, data: "ProvisionedThroughputExceededException"
    message = Workload(5).message("MetadataDelete", "Event")
    with caplog.at_level(logging.ERROR), pytest.raises(SendFailed) as failed:
        g.send(message)
    assert failed.value.error_code == "GENERR005"
    assert [u.message_id for u in failed.value.undelivered] == [message["messageHeader"]["messageId"]]
    assert any("GENERR005" in r.getMessage() for r in caplog.records)
    assert g.repository.entry(message["messageHeader"]["messageId"]).status == TO_SEND  # type: ignore[union-attr]


def test_a_message_over_the_limit_travels_as_a_sequence_on_one_partition_and_arrives_whole(bus_name):
    g = gateway(bus_name, partitions=4)
    big = Workload(6).large(2_300_000)
    receipt = g.send(big, channel="metadata")
    assert receipt.split
    assert len(receipt.parts) == 3
    channel = memory_backend.bus(bus_name).channel("metadata")
    holding = [info.id for info in channel.listing() if channel.size(info.id)]
    assert len(holding) == 1  # partition key = sequence id
    parts = [orjson.loads(p) for p in memory_backend.bus(bus_name).payloads("metadata")]
    assert [p["messageHeader"]["messageSequence"]["position"] for p in parts] == [1, 2, 3]
    assert all(len(orjson.dumps(p)) <= 1_000_000 for p in parts)
    for part_id in receipt.parts:
        assert g.repository.entry(part_id).status == SENT  # type: ignore[union-attr]
    [received] = drain(gateway(bus_name, "consumer"), "metadata")
    assert received.body == big["messageBody"]
    assert received.message_id == receipt.parts[0]
    assert len(received.deliveries) == 3


# -- receiving -------------------------------------------------------------------------------------
def test_receive_delivers_in_order_per_key_and_records_received(bus_name):
    producer = gateway(bus_name, "producer", partitions=3)
    messages = Workload(7).mix(30)
    producer.send_all(messages, channel="metadata")
    consumer = gateway(bus_name, "consumer", partitions=3)
    got = drain(consumer, "metadata")
    assert sorted(ids(got)) == sorted(ids(messages))
    by_partition: dict[str, list[int]] = {}
    for received in got:
        [delivery] = received.deliveries
        by_partition.setdefault(delivery.partition, []).append(int(delivery.position))
    assert len(by_partition) == 3
    assert all(positions == sorted(positions) for positions in by_partition.values())
    assert all(consumer.repository.entry(m).status == RECEIVED for m in ids(messages))  # type: ignore[union-attr]


def test_duplicates_are_dropped_not_delivered(bus_name):
    producer, g = gateway(bus_name, "producer"), gateway(bus_name, "consumer")
    message = Workload(8).message("MetadataCreate", "Event")
    producer.send_all([message, message], channel="metadata")  # at least once: the same message twice
    with g.receiver("metadata", poll_interval=0.01) as inbox:
        first = inbox.receive(timeout=0.1)
        assert first is not None
        inbox.ack(first)
        assert inbox.receive(timeout=0.05) is None
        assert inbox.stats.duplicates == 1
    producer.send(message, channel="metadata")  # and again, later
    assert drain(g, "metadata") == []


def test_an_application_does_not_receive_its_own_messages_back(bus_name):
    g = gateway(bus_name)
    g.send(Workload(8).message("MetadataCreate", "Event"), channel="metadata")
    with g.receiver("metadata", poll_interval=0.01) as inbox:
        assert inbox.receive(timeout=0.05) is None
        assert inbox.stats.own == 1
    assert len(drain(gateway(bus_name, "other"), "metadata")) == 1


def test_a_restarted_receiver_resumes_after_its_checkpoint(bus_name):
    producer, g = gateway(bus_name, "producer"), gateway(bus_name, "consumer")
    first = Workload(9).mix(5)
    producer.send_all(first, channel="metadata")
    assert ids(drain(g, "metadata")) == ids(first)
    later = Workload(10).mix(3)
    producer.send_all(later, channel="metadata")
    with g.receiver("metadata", poll_interval=0.01) as inbox:
        got = []
        while (received := inbox.receive(timeout=0.1)) is not None:
            got.append(received)
            inbox.ack(received)
        assert ids(got) == ids(later)
        assert inbox.stats.records == 3  # nothing before the checkpoint was read again
        assert inbox.stats.duplicates == 0


def test_unacknowledged_messages_come_again_after_a_restart(bus_name):
    g = gateway(bus_name, "consumer")
    messages = Workload(11).mix(4)
    gateway(bus_name, "producer").send_all(messages, channel="metadata")
    with g.receiver("metadata", poll_interval=0.01) as inbox:
        a = inbox.receive(timeout=0.1)
        b = inbox.receive(timeout=0.1)
        assert a is not None
        assert b is not None
        inbox.ack(a)  # b is never acknowledged: the process "stops" here
    got = drain(g, "metadata")
    assert ids(got) == ids(messages[1:])


def test_held_parts_keep_the_checkpoint_behind_them_across_a_restart(bus_name):
    producer, g = gateway(bus_name, "producer"), gateway(bus_name, "consumer")
    from rdss.model.sequences import split

    parts = split(Workload(12).large(1_500_000))
    assert len(parts) == 2
    before = Workload(13).message("MetadataDelete", "Event")
    after = Workload(14).message("MetadataDelete", "Event")
    producer.send_all([before, parts[0], after], channel="metadata")
    got = drain(g, "metadata")  # part 1 is held: only the two whole messages arrive
    assert ids(got) == [before["messageHeader"]["messageId"], after["messageHeader"]["messageId"]]
    producer.send(parts[1], channel="metadata")
    with g.receiver("metadata", poll_interval=0.01) as inbox:
        received = inbox.receive(timeout=0.2)
        assert received is not None
        assert received.body == orjson.loads("".join(p["messageBody"] for p in parts))
        inbox.ack(received)
        assert inbox.receive(timeout=0.05) is None
        assert inbox.stats.duplicates == 1  # "after" was read again (behind the held part) and dropped


def test_the_selector_filters_on_the_header(bus_name):
    g = gateway(bus_name, "consumer")
    messages = Workload(15).mix(40)
    gateway(bus_name, "producer").send_all(messages, channel="metadata")
    with g.receiver("metadata", selector=select(message_type="MetadataCreate"), poll_interval=0.01) as inbox:
        got = []
        while (received := inbox.receive(timeout=0.1)) is not None:
            got.append(received)
            inbox.ack(received)
        wanted = [m for m in messages if m["messageHeader"]["messageType"] == "MetadataCreate"]
        assert ids(got) == ids(wanted)
        assert inbox.stats.filtered == 40 - len(wanted)


def test_the_throttle_caps_deliveries_per_second(bus_name):
    g = gateway(bus_name, "consumer")
    gateway(bus_name, "producer").send_all(Workload(16).mix(12), channel="metadata")

    class Clock:
        now = 0.0

        def __call__(self) -> float:
            return self.now

        def sleep(self, seconds: float) -> None:
            self.now += seconds

    clock = Clock()
    consumer = g.transport.consumer("metadata", group="throttled")
    inbox = Receiver(
        consumer, g.repository, publish=g.transport.publish, throttle=4, clock=clock, sleep=clock.sleep, poll_interval=0
    )
    times = []
    for _ in range(12):
        received = inbox.receive(timeout=1)
        assert received is not None
        times.append(clock.now)
        inbox.ack(received)
    inbox.close()
    assert times[-1] == pytest.approx(2.0)  # 4 at once, then 4 a second
    assert all(sum(1 for t in times if start <= t < start + 1) <= 4 for start in times)
    assert inbox.stats.throttled_seconds == pytest.approx(2.0)


def test_expired_messages_go_decorated_to_the_error_channel_not_to_the_application(bus_name):
    g = gateway(bus_name)
    stale = new_message(
        "MetadataDelete",
        {"objectUuid": str(uuid.uuid4())},
        expires_in=timedelta(seconds=1),
        now=timestamps.now() - timedelta(minutes=5),
    )
    fresh = Workload(17).message("MetadataDelete", "Event")
    payload = orjson.dumps(stale)
    memory_backend.bus(bus_name).put_records(
        StreamName="metadata",
        Records=[{"Data": payload, "PartitionKey": "k"}, {"Data": orjson.dumps(fresh), "PartitionKey": "k"}],
    )
    got = drain(g, "metadata")
    assert ids(got) == [fresh["messageHeader"]["messageId"]]
    [moved] = memory_backend.bus(bus_name).payloads("error")
    header = orjson.loads(moved)["messageHeader"]
    assert header["errorCode"] == "GENERR003"
    from rdss.model import decoration

    assert decoration.original(moved) == payload


def test_a_sequence_whose_whole_message_is_invalid_goes_part_by_part_to_invalid(bus_name):
    whole = Workload(19).large(30_000)
    whole["messageBody"]["objectTitle"] = 7  # wrong type: GENERR001, seen only once reassembled
    parts = [orjson.dumps(p) for p in split(whole, 9_000)]
    memory_backend.bus(bus_name).put_records(
        StreamName="metadata", Records=[{"Data": p, "PartitionKey": "seq"} for p in parts]
    )
    with gateway(bus_name).receiver("metadata", poll_interval=0.01) as inbox:
        assert inbox.receive(timeout=0.3) is None
    assert inbox.stats.invalid == len(parts)
    moved = memory_backend.bus(bus_name).payloads("invalid")
    assert [decoration.original(m) for m in moved] == parts  # every part, in order, bytes intact
    for record in moved:
        header = orjson.loads(record)["messageHeader"]
        assert header["errorCode"] == "GENERR001"
        sequence = orjson.loads(parts[0])["messageHeader"]["messageSequence"]["sequence"]
        assert header["errorDescription"].startswith(f"sequence {sequence} (whole message): messageBody.objectTitle")


def test_a_rejection_needs_one_of_the_specs_codes(bus_name):
    gateway(bus_name, "producer").send(Workload(20).message("MetadataDelete", "Event"), channel="metadata")
    with gateway(bus_name).receiver("metadata", poll_interval=0.01) as inbox:
        received = inbox.receive(timeout=1)
        assert received is not None
        with pytest.raises(ValueError, match="APPERRXYZ"):
            received.reject("APPERRXYZ", "not a code of the spec")
        received.reject("APPERRMET002", "no such dataset")
        assert inbox.receive(timeout=0.2) is None  # acknowledged: not delivered again
    [moved] = memory_backend.bus(bus_name).payloads("invalid")
    assert orjson.loads(moved)["messageHeader"]["errorCode"] == "APPERRMET002"
    assert inbox.stats.rejected == 1


def test_without_max_attempts_a_failing_message_is_retried_for_ever(bus_name):
    gateway(bus_name, "producer").send(Workload(21).message("MetadataDelete", "Event"), channel="metadata")
    calls = []
    stop = threading.Event()

    def handler(received: Received) -> None:
        calls.append(received.message_id)
        if len(calls) == 12:
            stop.set()
        raise RuntimeError("still down")

    stats = gateway(bus_name).listen(
        "metadata", handler, max_attempts=None, backoff=Backoff(base=0.001), stop=stop, poll_interval=0.01
    )
    assert len(calls) == 12
    assert (stats.poison, memory_backend.bus(bus_name).payloads("error")) == (0, [])


def test_a_retried_message_does_not_move_again_the_records_moved_behind_it(bus_name):
    # a nack rewinds the partition to the failed message; the invalid and expired records read
    # behind it in the same poll were moved and settled already: they must not be moved again
    poison = Workload(22).message("MetadataDelete", "Event")
    malformed = Workload(23).message("MetadataDelete", "Event")
    malformed["messageHeader"]["messageId"] = "bad-1"  # GENERR010
    stale = new_message(
        "MetadataDelete",
        {"objectUuid": str(uuid.uuid4())},
        expires_in=timedelta(seconds=1),
        now=timestamps.now() - timedelta(minutes=5),
    )  # GENERR003
    later = Workload(24).message("MetadataDelete", "Event")
    records = [poison, malformed, later, stale]
    memory_backend.bus(bus_name).put_records(
        StreamName="metadata", Records=[{"Data": orjson.dumps(m), "PartitionKey": "k"} for m in records]
    )
    calls: list[str] = []

    def handler(received: Received) -> None:
        calls.append(received.message_id)
        if received.message_id == poison["messageHeader"]["messageId"]:
            raise ValueError("cannot map it")

    stats = gateway(bus_name, "consumer").listen(
        "metadata", handler, max_attempts=3, backoff=Backoff(base=0.001), idle_timeout=0.3, poll_interval=0.01
    )
    bus = memory_backend.bus(bus_name)
    invalid, error = bus.payloads("invalid"), bus.payloads("error")
    assert [decoration.original(r) for r in invalid] == [orjson.dumps(malformed)]  # moved once
    assert sorted(orjson.loads(r)["messageHeader"]["errorCode"] for r in error) == ["GENERR003", "GENERR009"]
    assert (stats.invalid, stats.expired, stats.poison, stats.redelivered) == (1, 1, 1, 2)
    assert calls == [poison["messageHeader"]["messageId"]] * 3 + [later["messageHeader"]["messageId"]]
    with gateway(bus_name, "consumer").receiver("metadata", poll_interval=0.01) as inbox:
        assert inbox.receive(timeout=0.05) is None
    assert inbox.stats.records == 0  # and the checkpoint is past them all


def test_nack_redelivers_in_order(bus_name):
    g = gateway(bus_name, "consumer")
    messages = Workload(18).mix(3)
    gateway(bus_name, "producer").send_all(messages, channel="metadata")
    with g.receiver("metadata", poll_interval=0.01) as inbox:
        first = inbox.receive(timeout=0.1)
        assert first is not None
        inbox.nack(first)
        again = [inbox.receive(timeout=0.1) for _ in range(3)]
        assert ids([r for r in again if r]) == ids(messages)
        assert inbox.stats.redelivered == 1


def test_listen_acks_when_the_callback_returns_and_redelivers_when_it_raises(bus_name):
    g = gateway(bus_name, "consumer")
    messages = Workload(19).mix(5)
    gateway(bus_name, "producer").send_all(messages, channel="metadata")
    calls: list[str] = []

    def handler(received: Received) -> None:
        calls.append(received.message_id)
        if calls.count(received.message_id) == 1 and received.message_id == ids(messages)[2]:
            raise RuntimeError("the repository is busy")

    stats = g.listen("metadata", handler, max_messages=5, idle_timeout=1, poll_interval=0.01)
    assert stats.acked == 5
    assert stats.redelivered == 1
    third = ids(messages)[2]
    assert calls == [*ids(messages)[:3], third, *ids(messages)[3:]]


def test_an_amgi_application_gets_one_scope_per_partition_batch(bus_name):
    g = gateway(bus_name, "consumer", partitions=2)
    messages = Workload(20).mix(10)
    gateway(bus_name, "producer", partitions=2).send_all(messages, channel="metadata")
    scopes: list[dict[str, Any]] = []
    seen: list[str] = []
    lifespan: list[str] = []
    nacked_once: set[str] = set()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                event = await receive()
                lifespan.append(event["type"])
                await send({"type": event["type"] + ".complete"})
                if event["type"] == "lifespan.shutdown":
                    return
        scopes.append(scope)
        more = True
        while more:
            event = await receive()
            more = event["more_messages"]
            message = orjson.loads(event["payload"])
            seen.append(message["messageHeader"]["messageId"])
            if message["messageHeader"]["messageType"] == "MetadataRead" and event["id"] not in nacked_once:
                nacked_once.add(event["id"])
                await send({"type": "message.nack", "id": event["id"], "message": "later"})
                continue
            if message["messageHeader"]["messageType"] == "MetadataCreate":
                notice = new_message("MetadataDelete", {"objectUuid": str(uuid.uuid4())})
                await send(
                    {"type": "message.send", "address": "vocabulary", "headers": [], "payload": orjson.dumps(notice)}
                )
            await send({"type": "message.ack", "id": event["id"]})

    stats = g.listen("metadata", app, idle_timeout=0.5, poll_interval=0.01)
    assert asyncio.iscoroutinefunction(app)
    assert lifespan == ["lifespan.startup", "lifespan.shutdown"]
    assert stats.acked == 10
    assert set(seen) == set(ids(messages))
    assert len(seen) > 10  # the nacked ones came again
    assert all(s["address"] == "metadata" for s in scopes)
    creates = sum(1 for m in messages if m["messageHeader"]["messageType"] == "MetadataCreate")
    assert len(memory_backend.bus(bus_name).payloads("vocabulary")) == creates


def test_competing_consumers_of_one_application_share_partitions_and_each_message_once(bus_name):
    producer = gateway(bus_name, "producer", partitions=4)
    messages = Workload(21).mix(80)
    producer.send_all(messages, channel="metadata")
    results: dict[str, list[str]] = {"a": [], "b": []}
    started = threading.Barrier(2)

    def work(name: str) -> None:
        g = gateway(bus_name, "shared", partitions=4, lease_duration=0.3)
        started.wait()
        g.listen("metadata", lambda r: results[name].append(r.message_id), idle_timeout=1.5, poll_interval=0.02)

    threads = [threading.Thread(target=work, args=(name,)) for name in results]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    everything = results["a"] + results["b"]
    assert sorted(everything) == sorted(ids(messages))  # each exactly once


def test_after_a_reshard_parents_are_read_before_children(bus_name):
    g = gateway(bus_name, "producer", partitions=2)
    key_messages = []
    workload = Workload(22)
    for _ in range(6):
        key_messages.append(workload.message("MetadataDelete", "Event"))
    g.send_all(key_messages[:3], channel="metadata")
    memory_backend.bus(bus_name).reshard("metadata", 3)
    g.send_all(key_messages[3:], channel="metadata")
    got = drain(gateway(bus_name, "reader"), "metadata")
    assert set(ids(got)[:3]) == set(ids(key_messages)[:3])  # every parent record first
    assert set(ids(got)[3:]) == set(ids(key_messages)[3:])
    store = memory_backend.bus(bus_name).leases("reader#metadata")
    finished = {lease.partition for lease in store.leases() if lease.finished}
    assert finished == {"partition-000000", "partition-000001"}


# -- request-reply ---------------------------------------------------------------------------------
def responder(bus_name: str, *, split_reply: bool = False) -> threading.Thread:
    """Answers the first MetadataRead it finds on input by sending a Document to its returnAddress."""

    def run() -> None:
        g = gateway(bus_name, "responder")

        def answer(received: Received) -> None:
            body = Workload(23).large(1_200_000)["messageBody"] if split_reply else Workload(23).research_object()
            g.send(reply(received.message, body), channel=received.header["returnAddress"])

        g.listen(
            "input",
            answer,
            max_messages=1,
            idle_timeout=5,
            poll_interval=0.01,
            selector=select(message_class="Command"),
        )

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_a_failure_reply_raises_request_failed_within_a_poll_interval(bus_name):
    """The responder has no such object: ``reply_error`` answers APPERRMET003 and the requester
    learns it at its next poll of the reply channel, not at its timeout."""
    interval, timeout = 0.2, 60.0
    answered: list[float] = []

    def run() -> None:
        g = gateway(bus_name, "responder")

        def answer(received: Received) -> None:
            g.reply_error(received, "APPERRMET003", f"no object {received.body['objectUuid']}")
            answered.append(time.monotonic())

        g.listen(
            "input",
            answer,
            max_messages=1,
            idle_timeout=5,
            poll_interval=0.01,
            selector=select(message_class="Command"),
        )

    thread = threading.Thread(target=run)
    thread.start()
    requester = Gateway(f"memory://{bus_name}", application="requester", reply_poll_interval=interval)
    read = Workload(26).message("MetadataRead", "Command")
    with pytest.raises(RequestFailed) as failed:
        requester.request(read, timeout=timeout)
    raised = time.monotonic()
    thread.join(10)
    assert failed.value.error_code == "APPERRMET003"
    assert failed.value.error_description == f"no object {read['messageBody']['objectUuid']}"
    header = failed.value.reply["messageHeader"]
    assert header["correlationId"] == read["messageHeader"]["messageId"]
    assert (header["messageType"], header["messageClass"]) == ("MetadataRead", "Document")
    assert failed.value.reply["messageBody"] == read["messageBody"]  # says what was not found
    assert validate(orjson.dumps(failed.value.reply)).valid  # the classifier accepts the failure reply
    # found at the first poll after it arrived (threads and a loaded machine aside)
    assert raised - answered[0] < interval + 2.0
    # the failure reply was received like any reply: recorded, so it is not delivered again
    assert requester.repository.entry(header["messageId"]).status == RECEIVED  # type: ignore[union-attr]


def test_reply_error_needs_a_code_and_a_description(bus_name):
    read = Workload(27).message("MetadataRead", "Command")
    with pytest.raises(ValueError, match="errorCode and an errorDescription"):
        gateway(bus_name).reply_error(read, "APPERRMET003", "")


@pytest.mark.parametrize("split_reply", [False, True])
def test_request_returns_the_reply_whose_correlation_id_matches(bus_name, split_reply):
    g = gateway(bus_name)
    noise = reply(Workload(24).message("MetadataRead", "Command"), Workload(24).research_object())
    g.send(noise, channel="responses")  # someone else's reply, already there: not ours
    thread = responder(bus_name, split_reply=split_reply)
    read = Workload(25).message("MetadataRead", "Command")
    del read["messageHeader"]["returnAddress"]
    answer = g.request(read, timeout=5)
    thread.join(10)
    assert answer["messageHeader"]["correlationId"] == read["messageHeader"]["messageId"]
    assert answer["messageHeader"]["messageClass"] == "Document"
    sent = orjson.loads(memory_backend.bus(bus_name).payloads("input")[0])
    assert sent["messageHeader"]["returnAddress"] == "responses"
    assert g.repository.entry(answer["messageHeader"]["messageId"]).status == RECEIVED  # type: ignore[union-attr]
    assert g.repository.entry(read["messageHeader"]["messageId"]).return_address == "responses"  # type: ignore[union-attr]


def test_a_request_with_no_reply_times_out(bus_name):
    g = gateway(bus_name)
    read = Workload(26).message("MetadataRead", "Command")
    with pytest.raises(RequestTimeout) as timeout:
        g.request(read, timeout=0.2)
    assert isinstance(timeout.value, TimeoutError)
    assert timeout.value.request_id == read["messageHeader"]["messageId"]


@pytest.mark.parametrize(
    ("message_type", "message_class"),
    [
        ("MetadataCreate", "Command"),
        ("MetadataRead", "Document"),
        ("MetadataRead", "Event"),
        ("VocabularyPatch", "Event"),
    ],
)
def test_a_message_no_reply_answers_is_not_a_request_and_nothing_is_sent(bus_name, message_type, message_class):
    g = gateway(bus_name)
    message = Workload(27).message(message_type, message_class)
    started = time.monotonic()
    with pytest.raises(NotARequest) as refused:
        g.request(message, timeout=30)
    assert time.monotonic() - started < 1  # refused at once, not after the timeout
    assert isinstance(refused.value, ValueError)
    assert f"a {message_type} {message_class} is not a request" in str(refused.value)
    assert memory_backend.bus(bus_name).payloads("input") == []


def test_a_sequence_that_never_completes_goes_to_the_error_channel_after_the_timeout(bus_name):
    from rdss.model.sequences import split

    g = gateway(bus_name, "consumer")
    parts = split(Workload(27).large(1_500_000))
    gateway(bus_name, "producer").send(parts[0], channel="metadata")  # part 2 is lost

    class Clock:
        now = 0.0

        def __call__(self) -> float:
            return self.now

        def sleep(self, seconds: float) -> None:
            self.now += seconds

    clock = Clock()
    consumer = g.transport.consumer("metadata", group="consumer", background=False)  # type: ignore[call-arg]
    inbox = Receiver(
        consumer, g.repository, publish=g.transport.publish, sequence_timeout=60, clock=clock, sleep=clock.sleep
    )
    assert inbox.receive(timeout=30) is None  # held
    assert memory_backend.bus(bus_name).payloads("error") == []
    assert inbox.receive(timeout=60) is None  # past the timeout: moved, decorated, and settled
    [moved] = memory_backend.bus(bus_name).payloads("error")
    assert orjson.loads(moved)["messageHeader"]["errorCode"] == "GENERR006"
    assert orjson.loads(moved)["messageHeader"]["messageSequence"]["position"] == 1
    assert inbox.stats.expired == 1
    inbox.close()
    with g.receiver("metadata", poll_interval=0.01) as again:  # the checkpoint moved past it
        assert again.receive(timeout=0.05) is None
        assert again.stats.records == 0
