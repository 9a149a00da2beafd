"""The local event source mapping keeps its shard iterators as Lambda does: an idle shard costs
one GetRecords a poll, not a GetShardIterator as well; a retry, a moved checkpoint or an expired
iterator starts again from the checkpoint, so no record is skipped or read twice."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from rdss.local.esm import EventSourceMapping


class Shard:
    """One shard's records behind the four calls the mapping makes; an iterator is a position
    (``fresh:N`` when GetShardIterator made it)."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self.calls: list[str] = []
        self.expired: set[str] = set()

    def put(self, count: int) -> None:
        for _ in range(count):
            number = str(len(self.records) + 1).zfill(10)
            self.records.append({"SequenceNumber": number, "Data": b"{}", "PartitionKey": "k"})

    def list_shards(self, **_: Any) -> dict[str, Any]:
        self.calls.append("ListShards")
        return {"Shards": [{"ShardId": "shardId-0"}]}

    def describe_stream_summary(self, **_: Any) -> dict[str, Any]:
        return {"StreamDescriptionSummary": {"StreamARN": "arn:aws:kinesis:eu-west-2:0:stream/s"}}

    def get_shard_iterator(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append("GetShardIterator")
        if kwargs["ShardIteratorType"] == "TRIM_HORIZON":
            return {"ShardIterator": "fresh:0"}
        after = kwargs["StartingSequenceNumber"]
        position = next(i + 1 for i, r in enumerate(self.records) if r["SequenceNumber"] == after)
        return {"ShardIterator": f"fresh:{position}"}

    def get_records(self, ShardIterator: str, Limit: int) -> dict[str, Any]:
        self.calls.append("GetRecords")
        if ShardIterator in self.expired:
            raise ClientError({"Error": {"Code": "ExpiredIteratorException"}}, "GetRecords")
        start = int(ShardIterator.split(":")[-1])
        batch = self.records[start : start + Limit]
        return {"Records": batch, "NextShardIterator": str(start + len(batch))}


def _mapping(shard: Shard, handler: Any) -> EventSourceMapping:
    return EventSourceMapping(shard, "s", handler, region="eu-west-2", batch_size=10, max_retries=5)


def test_idle_polls_reuse_the_iterator_and_every_record_is_handled_once() -> None:
    shard, seen = Shard(), []
    mapping = _mapping(shard, lambda event, _: seen.extend(r["kinesis"]["sequenceNumber"] for r in event["Records"]))
    shard.put(25)
    for _ in range(4):
        mapping.poll()
    shard.put(3)
    for _ in range(3):
        mapping.poll()
    assert seen == [r["SequenceNumber"] for r in shard.records]
    assert shard.calls.count("GetShardIterator") == 1


def test_a_partly_failed_batch_is_retried_from_the_failure_and_the_iterator_goes_on_after_it() -> None:
    shard, seen = Shard(), []

    def handler(event: dict[str, Any], _: Any) -> dict[str, Any] | None:
        numbers = [r["kinesis"]["sequenceNumber"] for r in event["Records"]]
        if numbers[0] == "0000000011":  # the second batch: its fourth record fails
            seen.extend(numbers[:3])
            return {"batchItemFailures": [{"itemIdentifier": numbers[3]}]}
        seen.extend(numbers)
        return None

    mapping = _mapping(shard, handler)
    shard.put(30)
    for _ in range(5):
        mapping.poll()
    # the retry (Lambda's: from the failed record, 14, in the batch held) ends at the batch's
    # end, where the kept iterator continues: nothing skipped, nothing twice
    assert seen == [r["SequenceNumber"] for r in shard.records]
    assert shard.calls.count("GetShardIterator") == 1
    assert mapping.checkpoints["shardId-0"] == "0000000030"


def test_a_checkpoint_moved_elsewhere_starts_again_from_it() -> None:
    shard, seen = Shard(), []
    mapping = _mapping(shard, lambda event, _: seen.extend(r["kinesis"]["sequenceNumber"] for r in event["Records"]))
    shard.put(10)
    mapping.poll()
    mapping.checkpoints["shardId-0"] = "0000000004"  # kept by the caller: a restart from saved positions
    mapping.poll()
    numbers = [r["SequenceNumber"] for r in shard.records]
    assert seen == numbers + numbers[4:]


def test_an_expired_iterator_starts_again_from_the_checkpoint() -> None:
    shard, seen = Shard(), []
    mapping = _mapping(shard, lambda event, _: seen.extend(r["kinesis"]["sequenceNumber"] for r in event["Records"]))
    shard.put(5)
    mapping.poll()
    shard.expired.add("5")  # the iterator the mapping kept
    shard.put(5)
    mapping.poll()
    assert seen == [r["SequenceNumber"] for r in shard.records]
    assert shard.calls.count("GetShardIterator") == 2


def test_shards_are_listed_once_a_sync_period_and_again_at_once_when_one_closes() -> None:
    from rdss.local.esm import SHARD_SYNC

    shard, now = Shard(), [1000.0]
    mapping = EventSourceMapping(shard, "s", lambda *_: None, region="eu-west-2", batch_size=10, clock=lambda: now[0])
    for _ in range(5):  # passes within one period: one listing
        mapping.poll()
    assert shard.calls.count("ListShards") == 1
    now[0] += SHARD_SYNC
    mapping.poll()
    assert shard.calls.count("ListShards") == 2

    closed = shard.get_records  # the shard is split: its last read gives no NextShardIterator

    def ended(ShardIterator: str, Limit: int) -> dict[str, Any]:
        return {k: v for k, v in closed(ShardIterator=ShardIterator, Limit=Limit).items() if k != "NextShardIterator"}

    shard.get_records = ended  # type: ignore[method-assign]
    mapping.poll()
    mapping.poll()  # the pass after the closed shard lists the shards again, within the period
    assert shard.calls.count("ListShards") == 3
