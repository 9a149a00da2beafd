"""Where a sequence waits: part bodies in the staging bucket, progress in the ``sequences`` table.

A part can be close to 1 MB and a DynamoDB item holds at most 400 KB, so the table only keeps
which positions arrived (a number set: re-adding a duplicate part changes nothing), the total,
when the first part was seen and when the message expires.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

PENDING, COMPLETE, EXPIRED, TIMED_OUT = "PENDING", "COMPLETE", "EXPIRED", "TIMED_OUT"

#: Sequence records outlive the channels' retention so late duplicates still find them.
RETENTION_SECONDS = 8 * 24 * 3600


@dataclass(frozen=True)
class Progress:
    sequence: str
    total: int
    positions: frozenset[int]
    status: str
    first_seen: float
    message_expires_at: float | None

    @property
    def complete(self) -> bool:
        return len(self.positions) >= self.total


@dataclass(kw_only=True)
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
        try:
            response = self.dynamodb.update_item(
                TableName=self.table,
                Key={"sequence": {"S": sequence}},
                UpdateExpression=update,
                ConditionExpression="attribute_not_exists(#s) OR #s = :pending",
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
                ReturnValues="ALL_NEW",
            )
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return self.get(sequence)
            raise
        return _progress(response["Attributes"])

    def get(self, sequence: str) -> Progress | None:
        item = self.dynamodb.get_item(TableName=self.table, Key={"sequence": {"S": sequence}}, ConsistentRead=True)
        return _progress(item["Item"]) if "Item" in item else None

    def note_late_part(self, sequence: str, position: int) -> bool:
        """Record a part of an already finished sequence; False when it was recorded before."""
        try:
            self.dynamodb.update_item(
                TableName=self.table,
                Key={"sequence": {"S": sequence}},
                UpdateExpression="ADD #p :p",
                ConditionExpression="attribute_exists(#s) AND NOT contains(#p, :position)",
                ExpressionAttributeNames={"#p": "positions", "#s": "status"},
                ExpressionAttributeValues={":p": {"NS": [str(position)]}, ":position": {"N": str(position)}},
            )
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def stage(self, sequence: str, position: int, payload: bytes) -> None:
        self.s3.put_object(Bucket=self.bucket, Key=self.part_key(sequence, position), Body=payload)

    def load(self, sequence: str, positions: frozenset[int] | set[int]) -> dict[int, bytes]:
        return {
            p: self.s3.get_object(Bucket=self.bucket, Key=self.part_key(sequence, p))["Body"].read()
            for p in sorted(positions)
        }

    def finish(self, sequence: str, status: str, positions: frozenset[int] | set[int]) -> bool:
        """Mark a pending sequence finished and drop its staged parts; False if it was not pending."""
        try:
            self.dynamodb.update_item(
                TableName=self.table,
                Key={"sequence": {"S": sequence}},
                UpdateExpression="SET #s = :done, finishedAt = :now",
                ConditionExpression="#s = :pending",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues={
                    ":done": {"S": status},
                    ":pending": {"S": PENDING},
                    ":now": {"N": str(self.clock())},
                },
            )
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return False
            raise
        if positions:
            objects = [{"Key": self.part_key(sequence, p)} for p in sorted(positions)]
            for start in range(0, len(objects), 1000):
                self.s3.delete_objects(Bucket=self.bucket, Delete={"Objects": objects[start : start + 1000]})
        return True

    def pending(self) -> list[Progress]:
        """Every sequence still waiting for parts."""
        found: list[Progress] = []
        request: dict[str, Any] = {
            "TableName": self.table,
            "FilterExpression": "#s = :pending",
            "ExpressionAttributeNames": {"#s": "status"},
            "ExpressionAttributeValues": {":pending": {"S": PENDING}},
        }
        while True:
            response = self.dynamodb.scan(**request)
            found.extend(_progress(item) for item in response.get("Items", []))
            if "LastEvaluatedKey" not in response:
                return found
            request["ExclusiveStartKey"] = response["LastEvaluatedKey"]


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
