"""What the broker's Local Data Repository says of the parked ``input`` records ``rdss redrive``
puts back, and the two writes redrive makes there.

The broker judges every record of ``input`` by its content and knows it by the identity Kinesis
gave it (shard, sequence number); nothing a producer writes - bytes or partition key - can make
a record pass for another. So a record put back is a new record, and what the parked record's
delivery left in the repository decides what is done before it goes back:

* a note ``redriven#<record>`` (:func:`rdss.repository.entries.redriven_key`): an earlier run put
  it back already, as the record the note names - it is not put back again;
* a claim by the record (its messageId's, or ``record#<record>`` for an invalid or conflicting
  record) whose batch ledger lists it: its outputs went out - it is not put back;
* a claim of its messageId by the record, not in that ledger: claimed, nothing sent. Put back as
  it is, the new record would be a duplicate of the old one and dropped, so the claim is
  *released* first: deleted, on condition it still names that record and that ledger;
* anything else (a ``record#`` claim whose move never went, no claim at all): put back as it is;
  the new record is claimed under its own identity.

Once the new records are accepted, a note per record names the record it became, for a second
run, ``rdss trace`` and the accounting to follow. These writes are an operator's: the table is
the broker's, and no vendor's role may write it (:mod:`rdss.deployment.vendors`) - which is what keeps a
producer from forging them. A crash between putting a record back and noting it leaves the
pointer parked; the next run puts the record back again, a duplicate the broker drops (an
invalid record is then moved twice).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from rdss.aws.failures import aws_code
from rdss.repository.dynamodb import LocalDataRepository
from rdss.repository.entries import KEY_ATTRIBUTE, claimable_id, record_key, redriven_key


@dataclass(frozen=True)
class Standing:
    """What to do with one parked record before it goes back."""

    #: Its outputs went out (its claim's batch ledger lists it): left alone.
    done: bool = False
    #: Put back by an earlier run, as this record (``shard/sequence``): left alone.
    redriven_as: str | None = None
    #: The claims to release before it goes back: (key, the ledger the claim must still name).
    release: tuple[tuple[str, str], ...] = ()

    @property
    def goes_back(self) -> bool:
        return not self.done and self.redriven_as is None


class RedriveClaims:
    """The repository (the deployment's ``messages`` table) as ``rdss redrive`` reads and writes it."""

    def __init__(self, dynamodb: Any, table: str, *, clock: Callable[[], float] = time.time) -> None:
        self.client = dynamodb
        self.table = table
        self.repository = LocalDataRepository(dynamodb, table)
        self.clock = clock

    def settle(self, found: Sequence[tuple[str | None, bytes]], *, dry_run: bool = False) -> list[bool]:
        """For each record found, (the stream record it was, or None when not known; its bytes),
        whether it goes back; releases the claims of those that do (unless ``dry_run``).

        Raises:
            ClientError, BotoCoreError: DynamoDB refused.
        """
        parked = [(record, payload) for record, payload in found if record is not None]
        standings = self.standings(parked)
        if not dry_run:
            self.release(standings, parked)
        known = iter(standings)
        return [next(known).goes_back if record is not None else True for record, _ in found]

    def standings(self, parked: Sequence[tuple[str, bytes]]) -> list[Standing]:
        """For each parked record, (its identity ``shard/sequence``, its bytes), what to do."""
        keys = []
        for record, payload in parked:
            keys += [redriven_key(record), record_key(record)]
            found = claimable_id(payload)
            if found is not None:
                keys.append(found)
        items = self.repository.get(keys)
        records = {record for record, _ in parked}
        ledgers = self.repository.get(
            sorted({str(i["ledger"]) for i in items.values() if i.get("claimedBy") in records and i.get("ledger")})
        )
        standings = []
        for record, payload in parked:
            note = items.get(redriven_key(record))
            if note is not None:
                standings.append(Standing(redriven_as=str(note.get("redrivenAs", "?"))))
                continue
            claims = [
                (key, items[key])
                for key in (record_key(record), claimable_id(payload))
                if key is not None and key in items and items[key].get("claimedBy") == record
            ]
            sent = any(record in ledgers.get(str(claim.get("ledger")), {}).get("records", ()) for _, claim in claims)
            release = tuple((key, str(claim.get("ledger", ""))) for key, claim in claims if key != record_key(record))
            standings.append(Standing(done=True) if sent else Standing(release=release))
        return standings

    def release(self, standings: Sequence[Standing], parked: Sequence[tuple[str, bytes]]) -> None:
        """Delete the claims the records going back left, each only while it still names its
        record and ledger (one a resend has taken since is left to that resend).

        Raises:
            ClientError: DynamoDB refused (other than the condition).
        """
        for standing, (record, _) in zip(standings, parked, strict=True):
            for key, ledger in standing.release:
                try:
                    self.client.delete_item(
                        TableName=self.table,
                        Key={KEY_ATTRIBUTE: {"S": key}},
                        ConditionExpression="#c = :record AND #l = :ledger",
                        ExpressionAttributeNames={"#c": "claimedBy", "#l": "ledger"},
                        ExpressionAttributeValues={":record": {"S": record}, ":ledger": {"S": ledger}},
                    )
                except ClientError as error:
                    if aws_code(error) != "ConditionalCheckFailedException":
                        raise

    def note(self, moves: Sequence[tuple[str, str]]) -> None:
        """Note, for each (parked record, the record it went back as), where it went.

        Raises:
            ClientError, BotoCoreError: DynamoDB refused.
        """
        if moves:
            at = int(self.clock())
            self.repository.put_many([(redriven_key(old), {"redrivenAs": new, "redrivenAt": at}) for old, new in moves])
