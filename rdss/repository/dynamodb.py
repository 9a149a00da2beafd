"""The Local Data Repository on DynamoDB: the broker's claims at one write unit each, and an
application's entries (:class:`DynamoRepository`) in a table of its own.

Kinesis delivers at least once, so every message received is recorded by messageId and a
message whose id is already recorded is a duplicate. Recording is a *claim*: a conditional
PutItem (``attribute_not_exists``), one per message, a batch's claims issued together from a
small pool of threads (so a batch waits about as long as for one transaction). Not a
TransactWriteItems: a transaction bills two write units per KB where a plain conditional put
bills one, and buys nothing here - each claim's outcome is its own (a cancelled transaction was
retried without the claims whose condition failed). A put refused by its condition returns the
item that holds the id (``ReturnValuesOnConditionCheckFailure=ALL_OLD``; an endpoint that
ignores it is asked with a consistent GetItem, a read for duplicates only). Powertools'
idempotency utility, by comparison, spends two writes per record.

A claim remembers the stream record that made it (``claimedBy``) and the *ledger* of the batch
it belongs to. After a batch's outputs are delivered, one ledger item lists the records whose
outputs arrived. So when Lambda re-delivers a record (a crash, a nack further up the shard), its
claim is found with the same ``claimedBy`` and the ledger tells whether its outputs were already
sent: if so it is acknowledged without sending again, otherwise it is sent now. A different
record carrying an already-claimed messageId is a duplicate.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import KW_ONLY, dataclass, field
from enum import StrEnum
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from rdss.aws.failures import aws_code
from rdss.repository.entries import (
    KEY_ATTRIBUTE,
    RETENTION_SECONDS,
    Entry,
    application_prefix,
    new_ledger_key,
)

_MAX_TRANSACTION = 100
#: Claims in flight at once: botocore's default connection pool per client (more would wait for
#: a connection, and the calls are I/O - the threads mostly wait on DynamoDB).
CLAIM_CONCURRENCY = 10
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
        "TransactionConflictException",
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
    _executor: ThreadPoolExecutor | None = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    # -- claims --------------------------------------------------------------------------------
    def claim(self, claims: Sequence[Claim], ledger: str) -> None:
        """Claim every key (distinct keys only); sets each claim's ``outcome``.

        Raises nothing for infrastructure trouble: affected claims come back UNAVAILABLE. Anything
        else a call raises is raised here once every claim has finished.
        """
        expires = int(self.clock()) + RETENTION_SECONDS
        shared = {
            "ledger": {"S": ledger},
            "receivedAt": {"N": str(int(self.clock()))},
            "expiresAt": {"N": str(expires)},
        }
        if len(claims) == 1:
            self._claim_one(claims[0], shared)
        elif claims:
            futures = [self._pool().submit(self._claim_one, c, shared) for c in claims]
            _wait_then_raise(futures)
        redelivered = [c for c in claims if c.outcome is ClaimOutcome.REDELIVERED]
        if redelivered:
            self._resolve_redeliveries(redelivered, ledger)

    def _pool(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(CLAIM_CONCURRENCY, thread_name_prefix="rdss-claims")
            return self._executor

    def _count(self) -> None:
        with self._lock:  # claims count from the pool's threads
            self.counter.calls += 1

    def _claim_one(self, claim: Claim, shared: dict[str, Any]) -> None:
        """One conditional put, retried with backoff while throttled or unreachable."""
        item = {**_item(claim.attributes), self.key: {"S": claim.key}, "claimedBy": {"S": claim.record}, **shared}
        for attempt in range(_CLAIM_ATTEMPTS):
            try:
                self._count()
                self.client.put_item(
                    TableName=self.table,
                    Item=item,
                    ConditionExpression=f"attribute_not_exists({self.key})",
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )
                claim.outcome = ClaimOutcome.CLAIMED
                return
            except ClientError as error:
                code = aws_code(error)
                if code == "ConditionalCheckFailedException":
                    existing = error.response.get("Item") or self._holder(claim.key)
                    if existing is not None:
                        claim.existing = _plain(existing)
                        claim.outcome = (
                            ClaimOutcome.REDELIVERED
                            if claim.existing.get("claimedBy") == claim.record
                            else ClaimOutcome.DUPLICATE
                        )
                        return
                    continue  # gone since (its TTL ran out): claim it again
                if not _transient(code):
                    raise
            except BotoCoreError:
                pass
            self.sleep(_delay(attempt + 1))
        claim.outcome = ClaimOutcome.UNAVAILABLE

    def _holder(self, key: str) -> dict[str, Any] | None:
        """The item holding ``key``, read consistently: for endpoints that do not return it with a
        failed condition. None if it is gone - or cannot be read now (the put is retried, after
        the same backoff as a throttled put, and finds it again)."""
        try:
            self._count()
            response = self.client.get_item(TableName=self.table, Key={self.key: {"S": key}}, ConsistentRead=True)
        except ClientError as error:
            if not _transient(aws_code(error)):
                raise
            self.sleep(_delay(1))
            return None
        except BotoCoreError:
            self.sleep(_delay(1))
            return None
        item: dict[str, Any] | None = response.get("Item")
        return item

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
                    self._count()
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
        self._count()
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
                self._count()
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
        self._count()
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
                self._count()
                try:
                    self.client.transact_write_items(TransactItems=items)
                    break
                except ClientError as error:
                    code = aws_code(error)
                    reasons = {r.get("Code", "") for r in error.response.get("CancellationReasons") or []}
                    transient = code in _THROTTLING or bool(reasons & _THROTTLING)
                    if not transient or attempt == _CLAIM_ATTEMPTS - 1:
                        raise
                except BotoCoreError:
                    if attempt == _CLAIM_ATTEMPTS - 1:
                        raise
                self.sleep(_delay(attempt + 1))


def _transient(code: str) -> bool:
    return code in _THROTTLING or code.startswith("Throttl")


def _wait_then_raise(futures: Sequence[Future[None]]) -> None:
    """Wait for every claim, then raise the first failure (by claim order): a claim in flight
    when another fails still ends, as it would in a function that dies meanwhile."""
    first: BaseException | None = None
    for future in futures:
        error = future.exception()
        if error is not None and first is None:
            first = error
    if first is not None:
        raise first


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
        if aws_code(error) != "ResourceInUseException":
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
        return Entry.from_attributes(message_id, item)


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
