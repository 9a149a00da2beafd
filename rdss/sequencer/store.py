"""Where a sequence waits: part bodies in the staging bucket, progress in the ``sequences`` table.

A part can be close to 1 MB and a DynamoDB item holds at most 400 KB, so the table only keeps
which positions arrived (a number set: re-adding a duplicate part changes nothing), the total,
when the first part was seen and when the message expires.
"""

# No ``from __future__ import annotations``: a NamedTuple would compile each string annotation
# when made. Every processor's cold start defines the records here (rdss.topology says more).

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from rdss.dynamodb import conditional, equal, items

PENDING, COMPLETE, EXPIRED, TIMED_OUT = "PENDING", "COMPLETE", "EXPIRED", "TIMED_OUT"

#: Sequence records outlive the channels' retention so late duplicates still find them.
RETENTION_SECONDS = 8 * 24 * 3600


class Progress(NamedTuple):
    """One sequence's progress as the ``sequences`` table records it."""

    sequence: str
    total: int
    positions: frozenset[int]
    status: str
    first_seen: float
    message_expires_at: float | None

    @property
    def complete(self) -> bool:
        return len(self.positions) >= self.total


@dataclass(kw_only=True, eq=False)  # compared by identity: a service, not a value
class SequenceStore:
    """Sequences' progress in the ``sequences`` table, their parts staged in S3."""

    dynamodb: Any
    s3: Any
    table: str
    bucket: str
    clock: Callable[[], float] = time.time

    @staticmethod
    def part_key(sequence: str, position: int) -> str:
        return f"sequences/{sequence}/{position:06d}"

    def record_part(
        self,
        sequence: str,
        position: int,
        total: int,
        *,
        message_type: str,
        message_class: str,
        message_expires_at: float | None,
    ) -> Progress | None:
        """Note that a part arrived and return the sequence's progress. A finished sequence is
        left as it is: its progress comes back with the status it finished with."""
        now = self.clock()
        names = {"#s": "status", "#p": "positions", "#t": "total"}
        values: dict[str, Any] = {
            ":p": {"NS": [str(position)]},
            ":t": {"N": str(total)},
            ":f": {"N": str(now)},
            ":x": {"N": str(int(now) + RETENTION_SECONDS)},
            ":pending": {"S": PENDING},
            ":mt": {"S": message_type},
            ":mc": {"S": message_class},
        }
        update = (
            "ADD #p :p SET #t = if_not_exists(#t, :t), firstSeen = if_not_exists(firstSeen, :f), "
            "expiresAt = :x, #s = if_not_exists(#s, :pending), messageType = :mt, messageClass = :mc"
        )
        if message_expires_at is not None:
            update += ", messageExpiresAt = :m"
            values[":m"] = {"N": str(message_expires_at)}
        response = self._update(
            sequence, update, "attribute_not_exists(#s) OR #s = :pending", names, values, ReturnValues="ALL_NEW"
        )
        if response is None:  # finished already: its progress as it finished
            return self.get(sequence)
        return _progress(response["Attributes"])

    def get(self, sequence: str) -> Progress | None:
        item = self.dynamodb.get_item(TableName=self.table, Key={"sequence": {"S": sequence}}, ConsistentRead=True)
        return _progress(item["Item"]) if "Item" in item else None

    def note_late_part(self, sequence: str, position: int) -> bool:
        """Record a part of an already finished sequence; False when it was recorded before."""
        recorded = self._update(
            sequence,
            "ADD #p :p",
            "attribute_exists(#s) AND NOT contains(#p, :position)",
            {"#p": "positions", "#s": "status"},
            {":p": {"NS": [str(position)]}, ":position": {"N": str(position)}},
        )
        return recorded is not None

    def stage(self, sequence: str, position: int, payload: bytes) -> None:
        self.s3.put_object(Bucket=self.bucket, Key=self.part_key(sequence, position), Body=payload)

    def load(self, sequence: str, positions: frozenset[int] | set[int]) -> dict[int, bytes]:
        return {
            p: self.s3.get_object(Bucket=self.bucket, Key=self.part_key(sequence, p))["Body"].read()
            for p in sorted(positions)
        }

    def finish(self, sequence: str, status: str, positions: frozenset[int] | set[int]) -> bool:
        """Mark a pending sequence finished and drop its staged parts; False if it was not pending."""
        values = {":done": {"S": status}, ":pending": {"S": PENDING}, ":now": {"N": str(self.clock())}}
        finished = self._update(
            sequence, "SET #s = :done, finishedAt = :now", "#s = :pending", {"#s": "status"}, values
        )
        if finished is None:
            return False
        if positions:
            objects = [{"Key": self.part_key(sequence, p)} for p in sorted(positions)]
            for start in range(0, len(objects), 1000):
                self.s3.delete_objects(Bucket=self.bucket, Delete={"Objects": objects[start : start + 1000]})
        return True

    def pending(self) -> list[Progress]:
        """Every sequence still waiting for parts."""
        found = items(
            self.dynamodb.scan,
            TableName=self.table,
            **equal("status", PENDING, clause="FilterExpression"),
        )
        return [_progress(item) for item in found]

    def _update(
        self, sequence: str, update: str, condition: str, names: dict[str, str], values: dict[str, Any], **extra: Any
    ) -> dict[str, Any] | None:
        """Update the sequence's row if ``condition`` holds: the response, or None when it did not."""
        return conditional(
            self.dynamodb.update_item,
            TableName=self.table,
            Key={"sequence": {"S": sequence}},
            UpdateExpression=update,
            ConditionExpression=condition,
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
            **extra,
        )


def _progress(item: dict[str, Any]) -> Progress:
    expires = item.get("messageExpiresAt")
    return Progress(
        sequence=item["sequence"]["S"],
        total=int(item["total"]["N"]),
        positions=frozenset(int(p) for p in item.get("positions", {}).get("NS", [])),
        status=item.get("status", {}).get("S", PENDING),
        first_seen=float(item["firstSeen"]["N"]),
        message_expires_at=float(expires["N"]) if expires else None,
    )
