"""Claims on a provisioned table: a transaction cancelled because capacity ran out retries only
the throttled claims, keeps the verdicts it got (duplicates with the item that holds the id),
and gives up as UNAVAILABLE - so the broker nacks and the event source mapping retries - rather
than losing or doubling a message."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from rdss.repository.dynamodb import Claim, ClaimOutcome, LocalDataRepository


class ThrottledTable:
    """TransactWriteItems answering with the cancellation reasons DynamoDB gives when a
    provisioned table's capacity is exceeded for some items."""

    def __init__(self, throttled_calls: int) -> None:
        self.throttled_calls = throttled_calls
        self.calls: list[list[str]] = []

    def transact_write_items(self, TransactItems: list[dict[str, Any]]) -> dict[str, Any]:
        keys = [item["Put"]["Item"]["messageId"]["S"] for item in TransactItems]
        self.calls.append(keys)
        reasons = []
        for key in keys:
            if key == "taken":
                old = {"messageId": {"S": "taken"}, "claimedBy": {"S": "shardId-1/9"}, "ledger": {"S": "ledger#x"}}
                reasons.append({"Code": "ConditionalCheckFailed", "Item": old})
            elif key == "busy" and len(self.calls) <= self.throttled_calls:
                reasons.append({"Code": "ProvisionedThroughputExceeded"})
            else:
                reasons.append({"Code": "None"})
        if all(r["Code"] == "None" for r in reasons):
            return {}
        raise ClientError(
            {"Error": {"Code": "TransactionCanceledException"}, "CancellationReasons": reasons},
            "TransactWriteItems",
        )


def claims() -> list[Claim]:
    return [Claim("fresh", "shardId-0/1"), Claim("taken", "shardId-0/2"), Claim("busy", "shardId-0/3")]


def test_a_throttled_claim_is_retried_alone_and_then_claimed() -> None:
    table = ThrottledTable(throttled_calls=2)
    repository = LocalDataRepository(table, "rdss-prod-messages", sleep=lambda _: None)
    made = claims()
    repository.claim(made, ledger="ledger#new")
    assert [c.outcome for c in made] == [ClaimOutcome.CLAIMED, ClaimOutcome.DUPLICATE, ClaimOutcome.CLAIMED]
    # the first call names all three; then only the ones neither decided nor refused
    assert table.calls == [["fresh", "taken", "busy"], ["fresh", "busy"], ["fresh", "busy"]]
    # the item that holds the id stays available (a conflict check reads it)
    assert made[1].existing == {"messageId": "taken", "claimedBy": "shardId-1/9", "ledger": "ledger#x"}


def test_claims_throttled_on_every_attempt_come_back_unavailable() -> None:
    table = ThrottledTable(throttled_calls=100)
    repository = LocalDataRepository(table, "rdss-prod-messages", sleep=lambda _: None)
    made = claims()
    repository.claim(made, ledger="ledger#new")
    assert [c.outcome for c in made] == [ClaimOutcome.UNAVAILABLE, ClaimOutcome.DUPLICATE, ClaimOutcome.UNAVAILABLE]
