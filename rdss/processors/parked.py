"""A parked batch: the invocation record Lambda leaves in a processor's on-failure queue when its
event source mapping gives up on a batch - a pointer (stream, shard, first and last sequence
number), not the records. :mod:`rdss.processors.redrive` follows it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson


@dataclass(frozen=True)
class Pointer:
    """One parked batch: Lambda's invocation record from the on-failure queue."""

    processor: str
    stream_arn: str
    shard_id: str
    start: str
    end: str
    size: int
    condition: str
    first_arrival: datetime | None
    last_arrival: datetime | None
    #: The SQS message holding it (its id, and the receipt handle to delete it with).
    message_id: str = ""
    receipt: str = field(default="", repr=False)

    @classmethod
    def parse(cls, processor: str, message: Mapping[str, Any]) -> Pointer:
        """A pointer from one SQS message.

        Raises:
            ValueError: the message is not a Kinesis invocation record.
        """
        try:
            body = orjson.loads(message["Body"])
            info = body["KinesisBatchInfo"]
            return cls(
                processor=processor,
                stream_arn=str(info["streamArn"]),
                shard_id=str(info["shardId"]),
                start=str(info["startSequenceNumber"]),
                end=str(info["endSequenceNumber"]),
                size=int(info["batchSize"]),
                condition=str((body.get("requestContext") or {}).get("condition", "")),
                first_arrival=_moment(info.get("approximateArrivalOfFirstRecord")),
                last_arrival=_moment(info.get("approximateArrivalOfLastRecord")),
                message_id=str(message.get("MessageId", "")),
                receipt=str(message.get("ReceiptHandle", "")),
            )
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as error:
            raise ValueError(f"not a Kinesis batch record ({type(error).__name__}: {error})") from error

    @property
    def stream(self) -> str:
        return self.stream_arn.rsplit("/", 1)[-1]

    def covers(self, sequence_number: str) -> bool:
        return int(self.start) <= int(sequence_number) <= int(self.end)

    def covers_record(self, record: str) -> bool:
        shard, _, sequence = record.partition("/")
        return shard == self.shard_id and sequence.isdigit() and self.covers(sequence)

    def describe(self) -> str:
        arrived = f", first arrived {self.first_arrival:%Y-%m-%d %H:%M:%S}Z" if self.first_arrival else ""
        return (
            f"{self.stream} {self.shard_id} {self.start}..{self.end} "
            f"({self.size} record(s), {self.condition or 'no condition'}{arrived})"
        )


def _moment(value: Any) -> datetime | None:
    """Lambda writes ISO 8601 (``...T09:14:03.021Z``); older records and tools epoch seconds."""
    if value is None or value == "":
        return None
    if isinstance(value, int | float):
        return datetime.fromtimestamp(float(value), UTC)
    return datetime.fromisoformat(str(value).replace("Z", "+00:00")).astimezone(UTC)
