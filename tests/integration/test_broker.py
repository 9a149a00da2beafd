"""The broker and sequencer against the emulator: real HTTP calls, real event shapes."""

from __future__ import annotations

import random
from collections import Counter
from datetime import UTC, datetime, timedelta

import orjson
import pytest

from rdss.model import decoration, history, schemas
from rdss.model.messages import new_message, reply
from rdss.model.sequences import split
from rdss.model.workload import Workload, Workload4
from tests.conftest import invalid_examples
from tests.support.faults import Proxy
from tests.support.system import System

pytestmark = pytest.mark.integration


def run_broker(system: System, **mapping: object) -> None:
    system.mapping("input", system.handler(system.broker()), **mapping).drain()


def run_sequencer(system: System, **kwargs: object) -> None:
    system.mapping("sequence", system.handler(system.sequencer(**kwargs))).drain()


def ids(records: list[bytes]) -> list[str]:
    return [orjson.loads(r)["messageHeader"]["messageId"] for r in records]


def test_every_type_and_class_is_routed_with_only_the_brokers_hop_added(system: System):
    workload = Workload(31)
    expected: dict[str, list[bytes]] = {"metadata": [], "vocabulary": [], "responses": []}
    payloads = []
    for message_type, message_class, channel in [
        ("MetadataCreate", "Event", "metadata"),
        ("MetadataCreate", "Command", "metadata"),
        ("MetadataUpdate", "Event", "metadata"),
        ("MetadataUpdate", "Document", "metadata"),
        ("MetadataDelete", "Event", "metadata"),
        ("MetadataRead", "Command", "metadata"),
        ("MetadataRead", "Document", "responses"),
        ("VocabularyRead", "Command", "vocabulary"),
        ("VocabularyRead", "Document", "responses"),
        ("VocabularyPatch", "Event", "vocabulary"),
        ("VocabularyPatch", "Command", "vocabulary"),
    ]:
        payload = orjson.dumps(workload.message(message_type, message_class), option=orjson.OPT_INDENT_2)
        payloads.append(payload)
        expected[channel].append(payload)
    system.publish(payloads)
    run_broker(system)
    broker = f"rdss-{system.deployment.environment}-broker"
    for channel, sent in expected.items():
        routed = {orjson.loads(r)["messageHeader"]["messageId"]: r for r in system.read(channel)}
        assert sorted(routed) == sorted(ids(sent)), channel
        for payload in sent:  # byte for byte, plus the broker's hop in messageHistory
            record = routed[orjson.loads(payload)["messageHeader"]["messageId"]]
            assert history.extends(payload, record)
            assert [hop["machineId"] for hop in history.hops(record)] == [broker]
    assert system.read("invalid") == []
    assert system.read("error") == []


def test_every_type_and_class_of_4_0_0_is_routed_by_content(system: System):
    """A PreservationEvent (new in 4.0.0) travels with the research objects' messages."""
    workload = Workload4(31)
    expected: dict[str, list[bytes]] = {"metadata": [], "responses": []}
    for message_type in schemas.V4.message_types:
        for message_class in schemas.V4.classes_for(message_type):
            message = workload.message(message_type, message_class)
            channel = "responses" if (message_type, message_class) == ("MetadataRead", "Document") else "metadata"
            expected[channel].append(orjson.dumps(message))
    assert any(b"PreservationEvent" in payload for payload in expected["metadata"])
    system.publish([p for sent in expected.values() for p in sent])
    run_broker(system)
    for channel, sent in expected.items():
        assert sorted(ids(system.read(channel))) == sorted(ids(sent)), channel
    assert system.read("invalid") == []
    assert system.read("error") == []


def test_every_code_lands_on_its_channel_decorated_with_the_original_bytes_intact(system: System):
    paths = invalid_examples()
    payloads = {p.name: p.read_bytes() for p in paths}
    system.publish(list(payloads.values()))
    run_broker(system)
    received = {"invalid": system.read("invalid"), "error": system.read("error")}
    assert len(received["invalid"]) + len(received["error"]) == len(paths)
    for name, original in payloads.items():
        code = name.split("-", 1)[0]
        channel = "error" if code in ("GENERR003", "GENERR006") else "invalid"
        matches = [r for r in received[channel] if decoration.original(r) == original]
        assert len(matches) == 1, name
        header = orjson.loads(matches[0])["messageHeader"]
        assert header["errorCode"] == code
        assert header["errorDescription"]
    for channel in ("metadata", "vocabulary", "responses", "sequence"):
        assert system.read(channel) == []


def test_an_oversize_message_goes_to_the_error_channel_and_a_huge_one_by_claim_check(system: System):
    workload = Workload(32)
    big = orjson.dumps(workload.large(1_000_100))
    assert 1_000_000 < len(big) < 1_040_000
    huge = big[:-1] + b" " * (1_048_400 - len(big)) + b"}"  # no room left to decorate it
    system.publish([big, huge])
    run_broker(system)
    [inline, pointer] = sorted(system.read("error"), key=len, reverse=True)
    assert decoration.original(inline) == big
    assert orjson.loads(inline)["messageHeader"]["errorCode"] == "GENERR006"
    wrapper = orjson.loads(pointer)
    assert wrapper["messageHeader"]["errorCode"] == "GENERR006"
    location = wrapper["originalPayload"]
    assert location["encoding"] == "s3"
    assert location["bytes"] == len(huge)
    stored = system.client("s3").get_object(Bucket=location["bucket"], Key=location["key"])["Body"].read()
    assert stored == huge


def test_duplicates_are_dropped_within_a_batch_and_across_batches(system: System):
    messages = Workload(33).mix(20)
    payloads = [orjson.dumps(m) for m in messages]
    dynamodb = Proxy(system.client("dynamodb"))
    broker = system.handler(system.broker(dynamodb=dynamodb))
    system.publish(payloads + payloads[:5])  # five duplicates in the same batch
    system.mapping("input", broker).drain()
    system.publish(payloads[5:12])  # seven more, in a later batch
    system.mapping("input", broker).drain()
    broker.close()
    routed = system.read("metadata") + system.read("vocabulary") + system.read("responses")
    assert sorted(ids(routed)) == sorted(m["messageHeader"]["messageId"] for m in messages)
    # a claim is a conditional PutItem per message; the endpoint names the holder of a taken id
    # in its refusal (ReturnValuesOnConditionCheckFailure), so a duplicate costs no read
    # (20 distinct ids, then 7; the second batch's ledger lists nothing sent, so is not written)
    assert dynamodb.calls["put_item"] == 20 + 7 + 1
    assert "get_item" not in dynamodb.calls


def test_a_duplicate_published_on_another_shard_is_dropped(systems):
    system = systems(shards=2)
    message = orjson.dumps(Workload(34).message("MetadataCreate", "Event"))
    system.publish([message], partition_key="a")
    system.publish([message], partition_key="zzzz")
    listed = system.client("kinesis").list_shards(StreamName=system.deployment.stream("input"))["Shards"]
    shards = Counter(s["ShardId"] for s in listed)
    assert len(shards) == 2
    run_broker(system)
    assert len(system.read("metadata")) == 1


def test_replies_go_to_the_return_address_their_request_named(system: System):
    workload = Workload(35)
    to_vocabulary = workload.message("MetadataRead", "Command")
    to_vocabulary["messageHeader"]["returnAddress"] = "vocabulary"
    by_stream_name = workload.message("VocabularyRead", "Command")
    by_stream_name["messageHeader"]["returnAddress"] = system.deployment.stream("responses")
    system.publish([orjson.dumps(to_vocabulary), orjson.dumps(by_stream_name)])
    run_broker(system)
    answer_1 = reply(to_vocabulary, workload.research_object())
    answer_2 = reply(by_stream_name, workload.vocabulary())
    orphan = reply(workload.message("MetadataRead", "Command"), workload.research_object())  # request never seen
    system.publish([orjson.dumps(m) for m in (answer_1, answer_2, orphan)])
    run_broker(system)
    vocabulary = ids(system.read("vocabulary"))
    responses = ids(system.read("responses"))
    assert answer_1["messageHeader"]["messageId"] in vocabulary
    assert answer_2["messageHeader"]["messageId"] in responses
    assert orphan["messageHeader"]["messageId"] in responses


def _sequence(seed: int, target: int = 30_000, limit: int = 8_000) -> tuple[dict, list[dict]]:
    whole = Workload(seed).large(target)
    return whole, split(whole, limit)


def test_a_sequence_out_of_order_with_duplicate_parts_is_released_whole_and_in_order(system: System):
    whole, parts = _sequence(36)
    assert len(parts) >= 4
    delivery = [orjson.dumps(p) for p in parts]
    delivery += [delivery[1], delivery[2]]  # duplicates
    random.Random(1).shuffle(delivery)
    system.publish(delivery)
    run_broker(system)
    assert len(system.read("sequence")) == len(parts)  # the broker dropped the duplicates
    run_sequencer(system)
    released = [orjson.loads(r) for r in system.read("metadata")]
    assert [p["messageHeader"]["messageSequence"]["position"] for p in released] == list(range(1, len(parts) + 1))
    assert "".join(p["messageBody"] for p in released) == orjson.dumps(whole["messageBody"]).decode()
    assert system.read("invalid") == []
    assert system.read("error") == []


def test_a_sequence_whose_whole_body_is_invalid_goes_to_the_invalid_channel(system: System):
    whole = Workload(37).large(30_000)
    del whole["messageBody"]["objectTitle"]
    parts = split(whole, 8_000)
    system.publish([orjson.dumps(p) for p in parts])
    run_broker(system)
    run_sequencer(system)
    assert system.read("metadata") == []
    rejected = system.read("invalid")
    assert len(rejected) == len(parts)
    for record in rejected:
        header = orjson.loads(record)["messageHeader"]
        assert header["errorCode"] == "GENERR001"
        assert "objectTitle" in header["errorDescription"]
    # the parts as published, plus the broker's hop: it forwarded them to the sequence channel
    originals = {orjson.loads(r)["messageHeader"]["messageId"]: decoration.original(r) for r in rejected}
    for part in parts:
        assert history.extends(orjson.dumps(part), originals[part["messageHeader"]["messageId"]])


def test_an_incomplete_sequence_goes_to_the_error_channel_at_expiry(system: System):
    whole = Workload(38).large(30_000)
    published = datetime.now(UTC)
    whole["messageHeader"]["messageTimings"]["expirationTimestamp"] = (published + timedelta(minutes=10)).isoformat()
    parts = split(whole, 8_000)
    system.publish([orjson.dumps(p) for p in parts[:-1]])  # the last part never comes
    run_broker(system)
    run_sequencer(system)
    now = published.timestamp()
    assert system.sweep(clock=lambda: now + 60).run()["count"] == 0  # not yet expired
    assert system.sweep(clock=lambda: now + 601).run()["count"] == 1
    moved = system.read("error")
    assert len(moved) == len(parts) - 1
    assert {orjson.loads(r)["messageHeader"]["errorCode"] for r in moved} == {"GENERR003"}
    assert system.sweep(clock=lambda: now + 700).run()["count"] == 0  # moved once
    # the missing part arriving late joins the others on the error channel
    system.publish([orjson.dumps(parts[-1])])
    run_broker(system)
    run_sequencer(system)
    assert len(system.read("error")) == len(parts)
    assert system.read("metadata") == []


def test_an_incomplete_sequence_without_expiry_times_out(system: System):
    _, parts = _sequence(39)
    system.publish([orjson.dumps(p) for p in parts[1:]])
    run_broker(system)
    run_sequencer(system)
    later = datetime.now(UTC).timestamp() + 7200
    assert system.sweep(clock=lambda: later, timeout_seconds=3600).run()["count"] == 1
    codes = {orjson.loads(r)["messageHeader"]["errorCode"] for r in system.read("error")}
    assert codes == {"GENERR006"}


def test_a_sequence_completed_twice_is_released_once(system: System):
    _, parts = _sequence(40)
    payloads = [orjson.dumps(p) for p in parts]
    system.publish(payloads)
    run_broker(system)
    run_sequencer(system)
    # the same parts re-sent as a new delivery (new record, same ids): duplicates at the broker
    system.publish(payloads)
    run_broker(system)
    run_sequencer(system)
    assert len(system.read("metadata")) == len(parts)


def test_new_message_skeleton_round_trip(system: System):
    message = new_message("MetadataDelete", {"objectUuid": "6ba7b810-9dad-41d1-80b4-00c04fd430c8"})
    system.publish([orjson.dumps(message)])
    run_broker(system)
    assert ids(system.read("metadata")) == [message["messageHeader"]["messageId"]]
