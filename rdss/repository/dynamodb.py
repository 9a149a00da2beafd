"""The Local Data Repository on DynamoDB: the broker's claims with few calls, and an
application's entries (:class:`DynamoRepository`) in a table of its own.

Kinesis delivers at least once, so every message received is recorded by messageId and a
message whose id is already recorded is a duplicate. Recording is a *claim*: a conditional put
(``attribute_not_exists``), up to 100 per TransactWriteItems call. When a transaction is
cancelled, its cancellation reasons say which items already existed (and, with
``ReturnValuesOnConditionCheckFailure=ALL_OLD``, what they hold); the others are retried
without them. Powertools' idempotency utility, by comparison, spends two or more calls per
record.

A claim remembers the stream record that made it (``claimedBy``) and the *ledger* of the batch
it belongs to. After a batch's outputs are delivered, one ledger item lists the records whose
outputs arrived. So when Lambda re-delivers a record (a crash, a nack further up the shard), its
claim is found with the same ``claimedBy`` and the ledger tells whether its outputs were already
sent: if so it is acknowledged without sending again, otherwise it is sent now. A different
record carrying an already-claimed messageId is a duplicate.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import KW_ONLY, dataclass, field
from enum import StrEnum
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from rdss.repository.entries import (
    KEY_ATTRIBUTE,
    RETENTION_SECONDS,
    Entry,
    application_prefix,
    new_ledger_key,
)

_MAX_TRANSACTION = 100
_MAX_BATCH_GET = 100
_CLAIM_ATTEMPTS = 4


def _delay(attempt: int) -> float:
    """The pause before retry ``attempt`` of a throttled or conflicting write: 50 ms doubling,
    jittered (several shards' batches collide) - :mod:`rdss.model.retry`'s backoff, loaded by the first
    retry rather than at a cold import."""
    from rdss.model.retry import Backoff

    return Backoff(max_retries=_CLAIM_ATTEMPTS + 2, base=0.025, jitter=True).delay(attempt)


_THROTTLING = frozenset(
    {
        "ThrottlingError",
        "ThrottlingException",
        "ProvisionedThroughputExceeded",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
        "TransactionConflict",
        "TransactionInProgressException",
        "InternalServerError",
    }
)


class ClaimOutcome(StrEnum):
    CLAIMED = "claimed"  # new: process it
    DUPLICATE = "duplicate"  # another record already claimed this id
    REDELIVERED = "redelivered"  # this very record claimed it before; see Claim.ledger
    UNAVAILABLE = "unavailable"  # DynamoDB could not answer (throttling, timeouts): retry later


@dataclass
class Claim:
    """One key to claim and, after :meth:`LocalDataRepository.claim`, what happened to it."""

    key: str
    record: str  # identity of the stream record claiming it, e.g. "shardId-000000000000/4959..."
    attributes: dict[str, Any] = field(default_factory=dict)
    outcome: ClaimOutcome | None = None
    #: For DUPLICATE and REDELIVERED: the existing item (plain values).
    existing: dict[str, Any] | None = None
    #: For REDELIVERED: whether the earlier delivery's outputs were all sent (from its ledger).
    already_sent: bool = False


@dataclass
class CallCounter:
    """Counts the data-plane calls this repository makes (the broker's budget is per 1,000)."""

    calls: int = 0


@dataclass(eq=False)  # compared by identity: a service, not a value
class LocalDataRepository:
    """A repository table (the deployment's ``messages``): claims, look-ups and batch ledgers."""

    client: Any
    table: str
    _: KW_ONLY
    #: The table's key attribute (the topology's, unless a table of one's own says otherwise).
    key: str = KEY_ATTRIBUTE
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep
    counter: CallCounter = field(default_factory=CallCounter)

    # -- claims --------------------------------------------------------------------------------
    def claim(self, claims: Sequence[Claim], ledger: str) -> None:
        """Claim every key (distinct keys only); sets each claim's ``outcome``.

        Raises nothing for infrastructure trouble: affected claims come back UNAVAILABLE.
        """
        expires = int(self.clock()) + RETENTION_SECONDS
        for start in range(0, len(claims), _MAX_TRANSACTION):
            self._claim_chunk(list(claims[start : start + _MAX_TRANSACTION]), ledger, expires)
        redelivered = [c for c in claims if c.outcome is ClaimOutcome.REDELIVERED]
        if redelivered:
            self._resolve_redeliveries(redelivered, ledger)

    def _claim_chunk(self, pending: list[Claim], ledger: str, expires: int) -> None:
        shared = {
            "ledger": {"S": ledger},
            "receivedAt": {"N": str(int(self.clock()))},
            "expiresAt": {"N": str(expires)},
        }
        for attempt in range(_CLAIM_ATTEMPTS):
            if not pending:
                return
            items = [
                {
                    "Put": {
                        "TableName": self.table,
                        "Item": {
                            **_item(c.attributes),
                            self.key: {"S": c.key},
                            "claimedBy": {"S": c.record},
                            **shared,
                        },
                        "ConditionExpression": f"attribute_not_exists({self.key})",
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                    }
                }
                for c in pending
            ]
            self.counter.calls += 1
            try:
                self.client.transact_write_items(TransactItems=items)
            except ClientError as error:
                reasons = error.response.get("CancellationReasons")
                code = error.response.get("Error", {}).get("Code", "")
                if code != "TransactionCanceledException" or not reasons:
                    if code in _THROTTLING or code.startswith("Throttl"):
                        self.sleep(_delay(attempt + 1))
                        continue
                    raise
                retry: list[Claim] = []
                throttled = False
                for claim, reason in zip(pending, reasons, strict=True):
                    reason_code = reason.get("Code", "None")
                    if reason_code == "ConditionalCheckFailed":
                        existing = _plain(reason.get("Item", {}))
                        claim.existing = existing
                        claim.outcome = (
                            ClaimOutcome.REDELIVERED
                            if existing.get("claimedBy") == claim.record
                            else ClaimOutcome.DUPLICATE
                        )
                    else:
                        throttled = throttled or reason_code in _THROTTLING
                        retry.append(claim)
                pending = retry
                if throttled:
                    self.sleep(_delay(attempt + 1))
                continue
            except BotoCoreError:
                self.sleep(_delay(attempt + 1))
                continue
            for claim in pending:
                claim.outcome = ClaimOutcome.CLAIMED
            return
        for claim in pending:
            claim.outcome = ClaimOutcome.UNAVAILABLE

    def _resolve_redeliveries(self, redelivered: list[Claim], ledger: str) -> None:
        """Read the ledgers of earlier deliveries: sent records are done; others are taken over."""
        ledgers = {c.existing["ledger"] for c in redelivered if c.existing and c.existing.get("ledger")}
        try:
            found = self.get(sorted(ledgers))
        except (ClientError, BotoCoreError):
            for claim in redelivered:
                claim.outcome = ClaimOutcome.UNAVAILABLE
            return
        for claim in redelivered:
            previous = found.get((claim.existing or {}).get("ledger", ""))
            claim.already_sent = previous is not None and claim.record in previous.get("records", set())
            if not claim.already_sent:
                # this delivery sends it: point the claim at this batch's ledger
                try:
                    self.counter.calls += 1
                    self.client.update_item(
                        TableName=self.table,
                        Key={self.key: {"S": claim.key}},
                        UpdateExpression="SET #l = :l",
                        ExpressionAttributeNames={"#l": "ledger"},
                        ExpressionAttributeValues={":l": {"S": ledger}},
                    )
                except (ClientError, BotoCoreError):
                    claim.outcome = ClaimOutcome.UNAVAILABLE

    # -- ledgers -------------------------------------------------------------------------------
    @staticmethod
    def new_ledger() -> str:
        return new_ledger_key()

    def write_ledger(self, ledger: str, records: Iterable[str]) -> None:
        """Record which stream records of a batch had all their outputs delivered."""
        sent = sorted(set(records))
        if not sent:
            return
        self.counter.calls += 1
        self.client.put_item(
            TableName=self.table,
            Item={
                self.key: {"S": ledger},
                "records": {"SS": sent},
                "expiresAt": {"N": str(int(self.clock()) + RETENTION_SECONDS)},
            },
        )

    # -- look-ups ------------------------------------------------------------------------------
    def get(self, keys: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Items by key (BatchGetItem, 100 keys a call, unprocessed keys retried)."""
        found: dict[str, dict[str, Any]] = {}
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), _MAX_BATCH_GET):
            request: dict[str, Any] = {
                self.table: {"Keys": [{self.key: {"S": k}} for k in unique[start : start + _MAX_BATCH_GET]]}
            }
            for attempt in range(_CLAIM_ATTEMPTS + 2):
                self.counter.calls += 1
                response = self.client.batch_get_item(RequestItems=request)
                for item in response.get("Responses", {}).get(self.table, []):
                    plain = _plain(item)
                    found[plain[self.key]] = plain
                request = response.get("UnprocessedKeys") or {}
                if not request:
                    break
                self.sleep(_delay(attempt + 1))
        return found

    def put(self, key: str, attributes: dict[str, Any]) -> None:
        """Write one entry unconditionally (the gateway's TO_SEND / SENT records)."""
        self.counter.calls += 1
        self.client.put_item(
            TableName=self.table,
            Item=_item({**attributes, self.key: key, "expiresAt": int(self.clock()) + RETENTION_SECONDS}),
        )

    def put_many(self, entries: Sequence[tuple[str, dict[str, Any]]]) -> None:
        """Write entries unconditionally, 100 to a TransactWriteItems call (the gateway's
        TO_SEND / SENT / RECEIVED records for a whole batch: a hundredth of the calls of
        :meth:`put`, and each chunk all-or-nothing). A key given twice keeps its last entry.

        Raises:
            ClientError, BotoCoreError: DynamoDB still refused after a few retries.
        """
        latest = dict(entries)
        expires = int(self.clock()) + RETENTION_SECONDS
        keys = list(latest)
        for start in range(0, len(keys), _MAX_TRANSACTION):
            items = [
                {
                    "Put": {
                        "TableName": self.table,
                        "Item": _item({**latest[key], self.key: key, "expiresAt": expires}),
                    }
                }
                for key in keys[start : start + _MAX_TRANSACTION]
            ]
            for attempt in range(_CLAIM_ATTEMPTS):
                self.counter.calls += 1
                try:
                    self.client.transact_write_items(TransactItems=items)
                    break
                except ClientError as error:
                    code = error.response.get("Error", {}).get("Code", "")
                    reasons = {r.get("Code", "") for r in error.response.get("CancellationReasons") or []}
                    transient = code in _THROTTLING or bool(reasons & _THROTTLING)
                    if not transient or attempt == _CLAIM_ATTEMPTS - 1:
                        raise
                except BotoCoreError:
                    if attempt == _CLAIM_ATTEMPTS - 1:
                        raise
                self.sleep(_delay(attempt + 1))


def create_table(client: Any, table: str, *, key: str = KEY_ATTRIBUTE) -> None:
    """Create a repository table for an application (on-demand, TTL on ``expiresAt``), unless
    it exists: what ``ldr=dynamodb://TABLE`` expects."""
    try:
        client.create_table(
            TableName=table,
            AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"}],
            KeySchema=[{"AttributeName": key, "KeyType": "HASH"}],
            BillingMode="PAY_PER_REQUEST",
        )
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") != "ResourceInUseException":
            raise
        return
    client.get_waiter("table_exists").wait(TableName=table)
    client.update_time_to_live(TableName=table, TimeToLiveSpecification={"Enabled": True, "AttributeName": "expiresAt"})


class DynamoRepository:
    """An application's entries in a repository table, under ``gateway:<application>:`` (so
    several applications can share one table; 100 entries to a TransactWriteItems call).

    The table is the application's own (``ldr=dynamodb://TABLE``): never the deployment's
    ``messages`` table, whose bare messageIds are the broker's de-duplication claims.
    """

    def __init__(self, table: LocalDataRepository, application: str) -> None:
        self.table = table
        self.application = application
        self.prefix = application_prefix(application)

    def record(self, entries: Sequence[Entry]) -> None:
        if entries:
            self.table.put_many(
                [
                    (
                        self.prefix + e.message_id,
                        {"application": self.application, "bareMessageId": e.message_id, **e.attributes()},
                    )
                    for e in entries
                ]
            )

    def statuses(self, message_ids: Sequence[str]) -> dict[str, str]:
        if not message_ids:
            return {}
        found = self.table.get([self.prefix + m for m in message_ids])
        cut = len(self.prefix)
        return {key[cut:]: str(item.get("status", "")) for key, item in found.items()}

    def entry(self, message_id: str) -> Entry | None:
        item = self.table.get([self.prefix + message_id]).get(self.prefix + message_id)
        if item is None:
            return None
        return Entry(
            message_id=message_id,
            message_class=str(item.get("messageClass", "")),
            message_type=str(item.get("messageType", "")),
            sequence=str(item.get("sequence", "")),
            position=int(item.get("position", 1)),
            status=str(item.get("status", "")),
            return_address=item.get("returnAddress"),
            correlation_id=item.get("correlationId"),
            error_code=item.get("errorCode"),
        )


def _item(values: dict[str, Any]) -> dict[str, Any]:
    """Plain values -> DynamoDB attribute values (None dropped)."""
    item: dict[str, Any] = {}
    for name, value in values.items():
        kind = type(value)
        if kind is str:  # the common case first: this runs for every attribute of every claim
            item[name] = {"S": value}
        elif value is None:
            continue
        elif kind is bool:
            item[name] = {"BOOL": value}
        elif kind is int or kind is float:
            item[name] = {"N": str(value)}
        elif kind is set or kind is frozenset:
            item[name] = {"SS": sorted(value)}
        else:
            item[name] = {"S": str(value)}
    return item


def _plain(item: dict[str, Any]) -> dict[str, Any]:
    """DynamoDB attribute values -> plain values."""
    plain: dict[str, Any] = {}
    for name, value in item.items():
        ((kind, raw),) = value.items()
        if kind == "N":
            plain[name] = int(raw) if raw.lstrip("-").isdigit() else float(raw)
        elif kind == "SS":
            plain[name] = set(raw)
        elif kind == "BOOL":
            plain[name] = bool(raw)
        else:
            plain[name] = raw
    return plain
