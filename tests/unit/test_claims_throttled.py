"""Claims on a provisioned table: a conditional put refused because capacity ran out is retried
alone, the others keep the verdicts they got (duplicates with the item that holds the id), and
a claim throttled on every attempt gives up as UNAVAILABLE - so the broker nacks and the event
source mapping retries - rather than losing or doubling a message. An endpoint that does not
return the holder with a failed condition is asked for it, once per duplicate."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from rdss.repository.dynamodb import CLAIM_CONCURRENCY, Claim, ClaimOutcome, LocalDataRepository

OLD = {"messageId": {"S": "taken"}, "claimedBy": {"S": "shardId-1/9"}, "ledger": {"S": "ledger#x"}}


class ThrottledTable:
    """PutItem answering as a provisioned table does: ``taken`` exists, ``busy`` is throttled on
    its first ``throttled_calls`` attempts."""

    def __init__(self, throttled_calls: int, *, returns_holder: bool = True) -> None:
        self.throttled_calls = throttled_calls
        self.returns_holder = returns_holder
        self.calls: dict[str, int] = {}
        self.reads: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def put_item(self, TableName: str, Item: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        assert kwargs["ConditionExpression"] == "attribute_not_exists(messageId)"
        key = Item["messageId"]["S"]
        with self.lock:
            self.calls[key] = self.calls.get(key, 0) + 1
        if key == "taken":
            error: dict[str, Any] = {"Error": {"Code": "ConditionalCheckFailedException"}}
            if self.returns_holder and kwargs.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD":
                error["Item"] = OLD
            raise ClientError(error, "PutItem")  # type: ignore[arg-type]
        if key == "busy" and self.calls[key] <= self.throttled_calls:
            raise ClientError({"Error": {"Code": "ProvisionedThroughputExceededException"}}, "PutItem")
        return {}

    def get_item(self, **kwargs: Any) -> dict[str, Any]:
        self.reads.append(kwargs)
        return {"Item": OLD}


def claims() -> list[Claim]:
    return [Claim("fresh", "shardId-0/1"), Claim("taken", "shardId-0/2"), Claim("busy", "shardId-0/3")]


def test_a_throttled_claim_is_retried_alone_and_then_claimed() -> None:
    table = ThrottledTable(throttled_calls=2)
    pauses: list[float] = []
    repository = LocalDataRepository(table, "rdss-prod-messages", sleep=pauses.append)
    made = claims()
    repository.claim(made, ledger="ledger#new")
    assert [c.outcome for c in made] == [ClaimOutcome.CLAIMED, ClaimOutcome.DUPLICATE, ClaimOutcome.CLAIMED]
    # one put each; the throttled one twice more, after a pause each time
    assert table.calls == {"fresh": 1, "taken": 1, "busy": 3}
    assert len(pauses) == 2
    assert all(p > 0 for p in pauses)
    assert repository.counter.calls == 5
    # the item that holds the id stays available (a conflict check reads it), without a read
    assert made[1].existing == {"messageId": "taken", "claimedBy": "shardId-1/9", "ledger": "ledger#x"}
    assert table.reads == []


def test_claims_throttled_on_every_attempt_come_back_unavailable() -> None:
    table = ThrottledTable(throttled_calls=100)
    repository = LocalDataRepository(table, "rdss-prod-messages", sleep=lambda _: None)
    made = claims()
    repository.claim(made, ledger="ledger#new")
    assert [c.outcome for c in made] == [ClaimOutcome.CLAIMED, ClaimOutcome.DUPLICATE, ClaimOutcome.UNAVAILABLE]
    assert table.calls["busy"] == 4


def test_an_endpoint_without_the_holder_in_its_refusal_is_asked_once_per_duplicate() -> None:
    table = ThrottledTable(throttled_calls=0, returns_holder=False)
    repository = LocalDataRepository(table, "rdss-prod-messages", sleep=lambda _: None)
    made = claims()
    repository.claim(made, ledger="ledger#new")
    assert [c.outcome for c in made] == [ClaimOutcome.CLAIMED, ClaimOutcome.DUPLICATE, ClaimOutcome.CLAIMED]
    assert made[1].existing == {"messageId": "taken", "claimedBy": "shardId-1/9", "ledger": "ledger#x"}
    assert table.reads == [
        {"TableName": "rdss-prod-messages", "Key": {"messageId": {"S": "taken"}}, "ConsistentRead": True}
    ]


class SlowTable:
    """PutItem that takes a while, noting how many are in flight at once."""

    def __init__(self, fail: str | None = None) -> None:
        self.lock = threading.Lock()
        self.in_flight = self.most = 0
        self.fail = fail
        self.keys: list[str] = []

    def put_item(self, Item: dict[str, Any], **_: Any) -> dict[str, Any]:
        with self.lock:
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
            self.keys.append(Item["messageId"]["S"])
        try:
            threading.Event().wait(0.01)
            if Item["messageId"]["S"] == self.fail:
                raise RuntimeError("the function died here")
            if Item["messageId"]["S"] == "down":
                raise EndpointConnectionError(endpoint_url="https://dynamodb.eu-west-2.amazonaws.com")
            return {}
        finally:
            with self.lock:
                self.in_flight -= 1


def test_a_batchs_claims_are_made_together_within_the_pool() -> None:
    table = SlowTable()
    repository = LocalDataRepository(table, "t", sleep=lambda _: None)
    made = [Claim(f"id-{i}", f"shardId-0/{i}") for i in range(4 * CLAIM_CONCURRENCY)] + [Claim("down", "s/x")]
    repository.claim(made, ledger="ledger#new")
    assert [c.outcome for c in made[:-1]] == [ClaimOutcome.CLAIMED] * (4 * CLAIM_CONCURRENCY)
    assert made[-1].outcome is ClaimOutcome.UNAVAILABLE  # unreachable on every attempt
    assert 1 < table.most <= CLAIM_CONCURRENCY
    assert table.keys.count("down") == 4


def test_anything_else_a_claim_raises_is_raised_once_every_claim_has_ended() -> None:
    table = SlowTable(fail="id-3")
    repository = LocalDataRepository(table, "t", sleep=lambda _: None)
    made = [Claim(f"id-{i}", f"shardId-0/{i}") for i in range(25)]
    with pytest.raises(RuntimeError, match="died"):
        repository.claim(made, ledger="ledger#new")
    assert table.in_flight == 0
    assert sorted(table.keys) == sorted(c.key for c in made)
