"""No record takes its batch down (issue 21, item 2), on the emulator with the local event source
mapping and Lambda's semantics: the issue's batch of 30 valid messages and year-0000 timestamps,
a record the broker (or the sequencer) fails on every time, and partial batch responses."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from rdss.local.esm import FailedBatch, retry_from
from rdss.model.workload import Workload
from rdss.processors.broker import Broker
from rdss.repository.entries import attempts_key
from tests.support import odd_records
from tests.support.system import System

pytestmark = pytest.mark.integration

ROUTED = ("metadata", "vocabulary", "responses", "invalid", "error")


def channels(system: System) -> dict[str, list[bytes]]:
    return {channel: system.read(channel) for channel in ROUTED}


def test_thirty_valid_messages_and_year_zero_timestamps_in_one_put_records(system: System):
    """The issue's reproduction: before, the classifier raised on the first year-0000 expiry, the
    broker failed the whole batch until the mapping parked all 39 records, and none was routed."""
    payloads, valid, odd = odd_records.batch()
    system.publish(payloads)  # one PutRecords call
    parked: list[FailedBatch] = []
    mapping = system.mapping("input", system.handler(system.broker()), on_failure=parked.append)
    mapping.drain()
    assert parked == []
    assert mapping.stats.retries == 0
    assert mapping.stats.invocations == 1
    assert odd_records.placed(channels(system)) == odd_records.expected(valid, odd)
    # the moved records are the records as they were put, decorated
    moved = {odd_records.original(r) for c in ("invalid", "error") for r in system.read(c)}
    assert moved == {r.payload for r in odd if r.place != "metadata"}


class _Failing(Broker):
    """A broker with a bug for one message: classifying it raises, every time."""

    def __init__(self, poison: str, **options: Any) -> None:
        super().__init__(**options)
        self.poison = poison.encode()

    def _classify(self, event: dict[str, Any], now: Any) -> Any:
        if self.poison in (event.get("payload") or b""):
            raise RuntimeError("a bug for this record")
        return super()._classify(event, now)


def test_a_record_the_broker_fails_on_is_retried_then_moved_and_its_neighbours_routed_once(system: System):
    messages = [Workload(40 + i).message("MetadataCreate", "Event") for i in range(6)]
    poison = messages[2]["messageHeader"]["messageId"]
    system.publish([orjson.dumps(m) for m in messages])
    broker = _Failing(poison, names=system.names, dynamodb=system.client("dynamodb"), s3=system.client("s3"))
    handler = system.handler(broker)
    responses: list[list[str]] = []

    def invoke(event: dict[str, Any], context: Any) -> dict[str, Any]:
        response = handler(event, context)
        responses.append([f["itemIdentifier"] for f in response["batchItemFailures"]])
        return response

    parked: list[FailedBatch] = []
    mapping = system.mapping("input", invoke, max_retries=3, on_failure=parked.append)
    mapping.drain()
    sequence_numbers = [r["SequenceNumber"] for r in _records(system, "input")]
    # the failing record and every one after it on the shard, twice; then it is moved
    assert responses == [sequence_numbers[2:], sequence_numbers[2:], []]
    assert parked == []
    routed = [odd_records.message_id(r) for r in system.read("metadata")]
    assert sorted(routed) == sorted(m["messageHeader"]["messageId"] for i, m in enumerate(messages) if i != 2)
    [moved] = system.read("error")
    header = orjson.loads(moved)["messageHeader"]
    assert header["errorCode"] == "GENERR009"
    assert "broker failed 3 times on this record: RuntimeError: a bug for this record" in header["errorDescription"]
    assert odd_records.original(moved) == orjson.dumps(messages[2])
    record = f"{_records(system, 'input')[2]['shard']}/{sequence_numbers[2]}"
    item = system.client("dynamodb").get_item(
        TableName=system.deployment.table("messages"), Key={"messageId": {"S": attempts_key(record)}}
    )["Item"]
    assert item["attempts"] == {"N": "3"}
    assert "expiresAt" in item


def test_a_transient_failure_is_retried_without_counting(system: System):
    from botocore.exceptions import EndpointConnectionError

    messages = [Workload(60 + i).message("MetadataDelete", "Event") for i in range(3)]
    system.publish([orjson.dumps(m) for m in messages])
    failures = iter([EndpointConnectionError(endpoint_url="http://dynamodb")] * 5)

    class Flaky(Broker):
        def _classify(self, event: dict[str, Any], now: Any) -> Any:
            if b"" + event["payload"] == orjson.dumps(messages[0]):
                error = next(failures, None)
                if error is not None:
                    raise error
            return super()._classify(event, now)

    parked: list[FailedBatch] = []
    broker = Flaky(names=system.names, dynamodb=system.client("dynamodb"), s3=system.client("s3"))
    mapping = system.mapping("input", system.handler(broker), max_retries=10, on_failure=parked.append)
    mapping.drain()
    assert mapping.stats.retries == 5  # more than the 3 attempts: not the record's failures
    assert parked == []
    assert system.read("error") == []
    assert len(system.read("metadata")) == 3


def test_a_part_the_sequencer_fails_on_is_moved_after_its_attempts(system: System):
    from rdss.model.sequences import split
    from rdss.processors.sequencer import Sequencer

    parts = split(Workload(70).large(30_000), 12_000)
    other = split(Workload(71).large(30_000), 12_000)
    poison = parts[1]["messageHeader"]["messageId"]

    class Failing(Sequencer):
        def _take(self, part: Any, tally: Any) -> None:
            if poison.encode() in part.payload:
                raise KeyError("a bug for this part")
            super()._take(part, tally)

    system.publish([orjson.dumps(p) for p in [*parts, *other]], channel="sequence", partition_key="k")
    sequencer = Failing(names=system.names, dynamodb=system.client("dynamodb"), s3=system.client("s3"))
    parked: list[FailedBatch] = []
    mapping = system.mapping("sequence", system.handler(sequencer), max_retries=3, on_failure=parked.append)
    mapping.drain()
    assert parked == []
    [moved] = system.read("error")
    assert orjson.loads(moved)["messageHeader"]["errorCode"] == "GENERR009"
    assert odd_records.original(moved) == orjson.dumps(parts[1])
    # the other sequence, behind the failing part on the shard, was released whole
    released = {orjson.loads(r)["messageHeader"]["messageId"] for r in system.read("metadata")}
    assert {p["messageHeader"]["messageId"] for p in other} <= released


def _records(system: System, channel: str) -> list[dict[str, Any]]:
    kinesis = system.client("kinesis")
    stream = system.deployment.stream(channel)
    found = []
    for shard in kinesis.list_shards(StreamName=stream)["Shards"]:
        iterator = kinesis.get_shard_iterator(
            StreamName=stream, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        for record in kinesis.get_records(ShardIterator=iterator, Limit=1000)["Records"]:
            found.append({"shard": shard["ShardId"], "SequenceNumber": record["SequenceNumber"]})
    return found


# -- the local mapping reads partial batch responses as Lambda does --------------------------------
@pytest.mark.parametrize(
    ("response", "expected"),
    [
        (None, None),
        ({}, None),
        ({"batchItemFailures": []}, None),
        ({"batchItemFailures": None}, None),
        ({"batchItemFailures": [{"itemIdentifier": "30"}, {"itemIdentifier": "20"}]}, 1),  # the lowest
        ({"batchItemFailures": [{"itemIdentifier": ""}]}, 0),  # an empty identifier: all of it
        ({"batchItemFailures": [{"itemIdentifier": None}]}, 0),
        ({"batchItemFailures": [{"sequenceNumber": "20"}]}, 0),  # a bad key name
        ({"batchItemFailures": [{"itemIdentifier": "99"}]}, 0),  # not in the batch
    ],
)
def test_partial_batch_responses_are_read_as_lambda_reads_them(response, expected):
    batch = [{"SequenceNumber": n} for n in ("10", "20", "30")]
    assert retry_from(response, batch) == expected


def test_a_batch_item_failure_checkpoints_before_the_lowest_sequence_number(system: System):
    system.publish([orjson.dumps(Workload(80 + i).message("MetadataDelete", "Event")) for i in range(5)])
    seen: list[list[str]] = []

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        numbers = [r["kinesis"]["sequenceNumber"] for r in event["Records"]]
        seen.append(numbers)
        if len(seen) == 1:  # reported out of order: the 4th, then the 2nd
            return {"batchItemFailures": [{"itemIdentifier": numbers[3]}, {"itemIdentifier": numbers[1]}]}
        if len(seen) == 2:
            return {"batchItemFailures": [{"itemIdentifier": "not-in-this-batch"}]}
        return {"batchItemFailures": []}

    mapping = system.mapping("input", handler, max_retries=3)
    mapping.drain()
    assert seen[1] == seen[0][1:]  # retried from the 2nd
    assert seen[2] == seen[1]  # an unknown identifier fails the whole batch
    assert len(seen) == 3
    assert mapping.checkpoints[next(iter(mapping.checkpoints))] == seen[0][-1]
