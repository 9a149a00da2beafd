"""Where a sequence waits: part bodies in the staging bucket, progress in the ``sequences`` table.

A part can be close to 1 MB and a DynamoDB item holds at most 400 KB, so the table only keeps
which positions arrived (a number set), the total, when the first part was seen and when the
message expires. The first part of a sequence sets its total, type, class and expiry; a position
is recorded once, by the first part to arrive at it, and a part whose total is not the
sequence's changes nothing (:meth:`SequenceStore.record_part`).

A staged part stays in the bucket once its sequence is finished, until the bucket's lifecycle
expires it with the sequence's row (8 days, longer than any channel keeps a record): it is what
the position held, so a part arriving later is told apart - the same part again, or another part
conflicting with it (:func:`rdss.model.sequences.same_part`) - whether the sequence is still waiting,
released or moved.
"""

# No ``from __future__ import annotations``: a NamedTuple would compile each string annotation
# when made. Every processor's cold start defines the records here (rdss.deployment.topology says more).

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from botocore.exceptions import ClientError

from rdss.aws.conditions import conditional, equal, items
from rdss.aws.failures import aws_code

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


class Recorded(NamedTuple):
    """What :meth:`SequenceStore.record_part` found: the progress, and whether the part's
    position was recorded by this call."""

    progress: Progress
    new: bool


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
    ) -> Recorded:
        """Record that a part arrived at ``position``, if its sequence is pending, has its total
        and has no part there yet; return the sequence's progress and whether it was recorded.

        Not recorded (``new`` False), the row is as it was: the sequence is finished (its status
        says how), its total is another, or the position was recorded before (by this part or
        another: the staged part tells which)."""
        now = self.clock()
        names = {"#s": "status", "#p": "positions", "#t": "total"}
        values: dict[str, Any] = {
            ":p": {"NS": [str(position)]},
            ":position": {"N": str(position)},
            ":t": {"N": str(total)},
            ":f": {"N": str(now)},
            ":x": {"N": str(int(now) + RETENTION_SECONDS)},
            ":pending": {"S": PENDING},
            ":mt": {"S": message_type},
            ":mc": {"S": message_class},
        }
        # the first part sets what the sequence is; later parts only add their position
        update = (
            "ADD #p :p SET #t = if_not_exists(#t, :t), firstSeen = if_not_exists(firstSeen, :f), "
            "expiresAt = :x, #s = if_not_exists(#s, :pending), messageType = if_not_exists(messageType, :mt), "
            "messageClass = if_not_exists(messageClass, :mc)"
        )
        if message_expires_at is not None:
            update += ", messageExpiresAt = if_not_exists(messageExpiresAt, :m)"
            values[":m"] = {"N": str(message_expires_at)}
        condition = "attribute_not_exists(#s) OR (#s = :pending AND #t = :t AND NOT contains(#p, :position))"
        response = self._update(sequence, update, condition, names, values, ReturnValues="ALL_NEW")
        if response is not None:
            return Recorded(_progress(response["Attributes"]), new=True)
        progress = self.get(sequence)
        if progress is None:  # pragma: no cover - a row never goes but by its TTL, days later
            raise LookupError(f"sequence {sequence}: its row was refused and then not found")
        return Recorded(progress, new=False)

    def get(self, sequence: str) -> Progress | None:
        item = self.dynamodb.get_item(TableName=self.table, Key={"sequence": {"S": sequence}}, ConsistentRead=True)
        return _progress(item["Item"]) if "Item" in item else None

    def note_late_part(self, sequence: str, position: int) -> None:
        """Record a part that joined an already finished sequence (moved after it)."""
        self._update(
            sequence,
            "ADD #p :p",
            "attribute_exists(#s)",
            {"#p": "positions", "#s": "status"},
            {":p": {"NS": [str(position)]}},
        )

    def stage(self, sequence: str, position: int, payload: bytes) -> None:
        self.s3.put_object(Bucket=self.bucket, Key=self.part_key(sequence, position), Body=payload)

    def staged(self, sequence: str, position: int) -> bytes | None:
        """The part staged at ``position``; None when there is none (never staged, or expired)."""
        try:
            body: bytes = self.s3.get_object(Bucket=self.bucket, Key=self.part_key(sequence, position))["Body"].read()
        except ClientError as error:
            if aws_code(error) in ("NoSuchKey", "404"):
                return None
            raise
        return body

    def load(self, sequence: str, positions: frozenset[int] | set[int]) -> dict[int, bytes]:
        return {
            p: self.s3.get_object(Bucket=self.bucket, Key=self.part_key(sequence, p))["Body"].read()
            for p in sorted(positions)
        }

    def finish(self, sequence: str, status: str) -> bool:
        """Mark a pending sequence finished; False if it was not pending. Its staged parts stay
        (see the module docstring)."""
        values = {":done": {"S": status}, ":pending": {"S": PENDING}, ":now": {"N": str(self.clock())}}
        finished = self._update(
            sequence, "SET #s = :done, finishedAt = :now", "#s = :pending", {"#s": "status"}, values
        )
        return finished is not None

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
