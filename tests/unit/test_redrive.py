"""Redrive's pure parts: Lambda's invocation records as pointers, and what it looks up of a record
it puts back (the end-to-end behaviour is in tests/integration/test_redrive.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import orjson
import pytest

from rdss.local.esm import FailedBatch
from rdss.processors.parked import Pointer
from rdss.repository.entries import claimable_id, redriven_key

# As Lambda writes it to an SQS on-failure destination (AWS documentation's example, abridged).
LAMBDA_RECORD = {
    "requestContext": {
        "requestId": "c9b8fa9f-5a7f-xmpl-af9c-0c604cde93a5",
        "functionArn": "arn:aws:lambda:eu-west-2:123456789012:function:rdss-dev-broker",
        "condition": "RetryAttemptsExhausted",
        "approximateInvokeCount": 3,
    },
    "responseContext": {"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"},
    "version": "1.0",
    "timestamp": "2026-11-21T09:14:06.021Z",
    "KinesisBatchInfo": {
        "shardId": "shardId-000000000001",
        "startSequenceNumber": "49601189658422359378836298521827638475320189012309704722",
        "endSequenceNumber": "49601189658422359378836298522902373528957594348623495186",
        "approximateArrivalOfFirstRecord": "2026-11-21T09:14:04.835Z",
        "approximateArrivalOfLastRecord": "2026-11-21T09:14:05.580Z",
        "batchSize": 500,
        "streamArn": "arn:aws:kinesis:eu-west-2:123456789012:stream/rdss-dev-input",
    },
}


def message(body: object) -> dict[str, str]:
    return {"MessageId": "m-1", "ReceiptHandle": "r-1", "Body": orjson.dumps(body).decode()}


def test_a_lambda_failure_record_is_a_pointer_to_its_range():
    pointer = Pointer.parse("broker", message(LAMBDA_RECORD))
    assert pointer.stream == "rdss-dev-input"
    assert pointer.shard_id == "shardId-000000000001"
    assert pointer.size == 500
    assert pointer.condition == "RetryAttemptsExhausted"
    assert pointer.first_arrival == datetime(2026, 11, 21, 9, 14, 4, 835000, tzinfo=UTC)
    assert pointer.covers("49601189658422359378836298521827638475320189012309704722")
    assert pointer.covers("49601189658422359378836298522902373528957594348623495186")
    assert not pointer.covers("49601189658422359378836298522902373528957594348623495187")
    assert pointer.covers_record("shardId-000000000001/49601189658422359378836298522000000000000000000000000000")
    assert not pointer.covers_record("shardId-000000000000/49601189658422359378836298522000000000000000000000000000")
    assert (pointer.message_id, pointer.receipt) == ("m-1", "r-1")


def test_the_local_runtime_parks_batches_in_lambdas_shape():
    failed = FailedBatch(
        stream_arn="arn:aws:kinesis:eu-west-2:000000000000:stream/rdss-local-input",
        shard_id="shardId-000000000000",
        start_sequence_number="1",
        end_sequence_number="5",
        batch_size=5,
        condition="RetryAttemptsExhausted",
        approximate_arrival_of_first_record=1795000000.5,
        approximate_arrival_of_last_record=1795000001.25,
        function_arn="arn:aws:lambda:eu-west-2:000000000000:function:rdss-local-broker",
        invocations=3,
        function_error="Unhandled",
        timestamp=1795000002.0,
    )
    record = failed.as_dict()
    assert set(record) == set(LAMBDA_RECORD)
    assert set(record["KinesisBatchInfo"]) == set(LAMBDA_RECORD["KinesisBatchInfo"])  # type: ignore[arg-type]
    assert record["KinesisBatchInfo"]["approximateArrivalOfFirstRecord"] == "2026-11-18T11:06:40.500Z"
    assert record["requestContext"]["approximateInvokeCount"] == 3
    pointer = Pointer.parse("broker", message(record))
    assert pointer.first_arrival == datetime(2026, 11, 18, 11, 6, 40, 500000, tzinfo=UTC)
    assert pointer.last_arrival == datetime(2026, 11, 18, 11, 6, 41, 250000, tzinfo=UTC)


@pytest.mark.parametrize("body", [{"hello": "operator"}, {"KinesisBatchInfo": {"shardId": "x"}}, "not json"])
def test_anything_else_in_the_queue_is_not_a_pointer(body: object):
    raw = message(body) if body != "not json" else {"MessageId": "m", "ReceiptHandle": "r", "Body": "{"}
    with pytest.raises(ValueError, match="not a Kinesis batch record"):
        Pointer.parse("broker", raw)


def test_nothing_in_a_record_names_another_record_and_only_a_claimable_id_is_looked_up():
    """A record put back carries no mark (a producer could write any): only a messageId the broker
    could have claimed a message by (the schema's UUID) is looked up, never a key of a producer's
    choosing; the note of a record put back is a key form of the broker's table."""
    record = "shardId-000000000003/49601189658422359378836298521827638475320189012309704722"
    assert redriven_key(record) == f"redriven#{record}"
    assert claimable_id(b'{"messageHeader": {"messageId": "5fd3b1e4-6f5a-4d5e-9c1b-7c2a0d9e8b11"}}') == (
        "5fd3b1e4-6f5a-4d5e-9c1b-7c2a0d9e8b11"
    )
    for named in (f"rdss-redrive:{record}", "x" * 5000, "5FD3B1E4-6F5A-4D5E-9C1B-7C2A0D9E8B11", 7, None):
        assert claimable_id(orjson.dumps({"messageHeader": {"messageId": named}})) is None
    assert claimable_id(b"not json") is None
