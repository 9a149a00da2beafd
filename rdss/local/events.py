"""Kinesis event-source-mapping events, shaped exactly as Lambda delivers them."""

from __future__ import annotations

import base64
from collections.abc import Iterable
from datetime import datetime
from typing import Any


def esm_event(stream_arn: str, shard_id: str, records: Iterable[dict[str, Any]], region: str) -> dict[str, Any]:
    """A Lambda event for ``records`` as GetRecords returns them (one shard's batch)."""
    return {"Records": [esm_record(stream_arn, shard_id, record, region) for record in records]}


def esm_record(stream_arn: str, shard_id: str, record: dict[str, Any], region: str) -> dict[str, Any]:
    arrival = record.get("ApproximateArrivalTimestamp")
    if isinstance(arrival, datetime):
        arrival = arrival.timestamp()
    return {
        "kinesis": {
            "kinesisSchemaVersion": "1.0",
            "partitionKey": record["PartitionKey"],
            "sequenceNumber": record["SequenceNumber"],
            "data": base64.b64encode(record["Data"]).decode("ascii"),
            "approximateArrivalTimestamp": arrival,
        },
        "eventSource": "aws:kinesis",
        "eventVersion": "1.0",
        "eventID": f"{shard_id}:{record['SequenceNumber']}",
        "eventName": "aws:kinesis:record",
        "invokeIdentityArn": "arn:aws:iam::123456789012:role/rdss-local",
        "awsRegion": region,
        "eventSourceARN": stream_arn,
    }
