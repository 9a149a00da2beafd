"""The embedded emulator refuses what AWS refuses, as AWS refuses it, before anything is applied or
journalled: Kinesis record, partition key and request sizes, Firehose batch sizes, DynamoDB item
sizes, and a bound on any request's body. Real boto3 calls over HTTP."""

from __future__ import annotations

import http.client
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from rdss.local import limits
from rdss.local.emulator import Emulator, Endpoint
from rdss.local.state import StateDirectory
from tests.support.system import System

pytestmark = pytest.mark.integration

MIB = 1024 * 1024
TOO_LONG = "Member must have length less than or equal to"


@pytest.fixture(autouse=True)
def embedded(endpoint: Endpoint) -> None:
    if not endpoint.embedded:
        pytest.skip("the embedded emulator's own checks: elsewhere the service answers for itself")


def refused(call: object, code: str, message: str) -> None:
    assert callable(call)
    with pytest.raises(ClientError) as error:
        call()
    assert error.value.response["Error"]["Code"] == code
    assert message in error.value.response["Error"]["Message"]
    assert error.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400


def stored(kinesis: object, stream: str) -> int:
    from rdss.local.accounting import read_stream

    return len(read_stream(kinesis, stream))


# -- Kinesis ---------------------------------------------------------------------------------------
def test_put_record_data_over_1_mib_is_refused_and_not_stored(system: System) -> None:
    kinesis, stream = system.client("kinesis"), system.deployment.stream("input")
    put = kinesis.put_record
    refused(
        lambda: put(StreamName=stream, Data=b"x" * (MIB + 1), PartitionKey="k"),
        "ValidationException",
        f"1 validation error detected: Value at 'data' failed to satisfy constraint: {TOO_LONG} 1048576",
    )
    assert stored(kinesis, stream) == 0


def test_put_record_data_and_key_over_1_mib_is_refused_and_at_1_mib_taken(system: System) -> None:
    kinesis, stream = system.client("kinesis"), system.deployment.stream("input")
    refused(
        lambda: kinesis.put_record(StreamName=stream, Data=b"x" * MIB, PartitionKey="kk"),
        "ValidationException",
        f"Value at 'data' failed to satisfy constraint: {TOO_LONG} 1048576",
    )
    kinesis.put_record(StreamName=stream, Data=b"x" * (MIB - 2), PartitionKey="kk")  # exactly 1 MiB in all
    assert stored(kinesis, stream) == 1


def test_a_partition_key_over_256_characters_is_refused(system: System) -> None:
    kinesis, stream = system.client("kinesis"), system.deployment.stream("input")
    refused(
        lambda: kinesis.put_record(StreamName=stream, Data=b"x", PartitionKey="k" * 257),
        "ValidationException",
        f"at 'partitionKey' failed to satisfy constraint: {TOO_LONG} 256",
    )
    kinesis.put_record(StreamName=stream, Data=b"x", PartitionKey="é" * 256)  # characters, not bytes
    assert stored(kinesis, stream) == 1


def test_put_records_over_500_records_is_refused(system: System) -> None:
    kinesis, stream = system.client("kinesis"), system.deployment.stream("input")
    records = [{"Data": b"x", "PartitionKey": "k"}] * 501
    refused(
        lambda: kinesis.put_records(StreamName=stream, Records=records),
        "ValidationException",
        f"Value at 'records' failed to satisfy constraint: {TOO_LONG} 500",
    )
    assert stored(kinesis, stream) == 0


def test_put_records_over_5_mib_with_the_keys_is_refused(system: System) -> None:
    kinesis, stream = system.client("kinesis"), system.deployment.stream("input")
    records = [{"Data": b"x" * (MIB - 300), "PartitionKey": "k" * 200} for _ in range(5)]  # each within 1 MiB
    records.append({"Data": b"x" * 1000, "PartitionKey": "k"})
    refused(
        lambda: kinesis.put_records(StreamName=stream, Records=records),
        "InvalidArgumentException",
        "Records size exceeds 5 MB limit",
    )
    assert stored(kinesis, stream) == 0


def test_put_records_names_each_record_over_its_limits(system: System) -> None:
    kinesis, stream = system.client("kinesis"), system.deployment.stream("input")
    records = [
        {"Data": b"x", "PartitionKey": "k" * 300},
        {"Data": b"x" * (MIB + 1), "PartitionKey": "k"},
        {"Data": b"x", "PartitionKey": "k"},
    ]
    refused(
        lambda: kinesis.put_records(StreamName=stream, Records=records),
        "ValidationException",
        "2 validation errors detected: Value '" + "k" * 300 + "' at 'records.1.member.partitionKey' failed to "
        f"satisfy constraint: {TOO_LONG} 256; Value at 'records.2.member.data' failed to satisfy constraint: "
        f"{TOO_LONG} 1048576",
    )
    assert stored(kinesis, stream) == 0


# -- Firehose --------------------------------------------------------------------------------------
@pytest.fixture
def delivery_stream(system: System) -> Iterator[str]:
    firehose, name = system.client("firehose"), f"limits-{uuid.uuid4().hex[:8]}"
    firehose.create_delivery_stream(
        DeliveryStreamName=name,
        DeliveryStreamType="DirectPut",
        ExtendedS3DestinationConfiguration={
            "RoleARN": "arn:aws:iam::123456789012:role/firehose",
            "BucketARN": f"arn:aws:s3:::{system.deployment.bucket('audit')}",
        },
    )
    yield name
    firehose.delete_delivery_stream(DeliveryStreamName=name)


def test_put_record_batch_over_500_records_is_refused(system: System, delivery_stream: str) -> None:
    firehose = system.client("firehose")
    refused(
        lambda: firehose.put_record_batch(DeliveryStreamName=delivery_stream, Records=[{"Data": b"x"}] * 501),
        "ValidationException",
        f"Value at 'records' failed to satisfy constraint: {TOO_LONG} 500",
    )


def test_put_record_batch_record_over_1000_kib_is_refused(system: System, delivery_stream: str) -> None:
    firehose = system.client("firehose")
    refused(
        lambda: firehose.put_record_batch(DeliveryStreamName=delivery_stream, Records=[{"Data": b"x" * 1_024_001}]),
        "ValidationException",
        f"Value at 'records.1.member.data' failed to satisfy constraint: {TOO_LONG} 1024000",
    )
    refused(
        lambda: firehose.put_record(DeliveryStreamName=delivery_stream, Record={"Data": b"x" * 1_024_001}),
        "ValidationException",
        f"Value at 'record.data' failed to satisfy constraint: {TOO_LONG} 1024000",
    )


def test_put_record_batch_over_4_mib_is_refused(system: System, delivery_stream: str) -> None:
    firehose = system.client("firehose")
    refused(
        lambda: firehose.put_record_batch(DeliveryStreamName=delivery_stream, Records=[{"Data": b"x" * 1_000_000}] * 5),
        "InvalidArgumentException",
        "Records size exceeds 4 MB limit",
    )


# -- DynamoDB --------------------------------------------------------------------------------------
@pytest.fixture
def table(system: System) -> str:
    dynamodb, name = system.client("dynamodb"), f"limits-{uuid.uuid4().hex[:8]}"
    dynamodb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    system.own_tables.append(name)
    return name


def test_an_item_over_400_kb_is_refused_by_every_write(system: System, table: str) -> None:
    dynamodb = system.client("dynamodb")
    big = {"id": {"S": "big"}, "blob": {"S": "x" * (400 * 1024)}}
    message = "Item size has exceeded the maximum allowed size"
    refused(lambda: dynamodb.put_item(TableName=table, Item=big), "ValidationException", message)
    refused(
        lambda: dynamodb.batch_write_item(RequestItems={table: [{"PutRequest": {"Item": big}}]}),
        "ValidationException",
        message,
    )
    refused(
        lambda: dynamodb.transact_write_items(TransactItems=[{"Put": {"TableName": table, "Item": big}}]),
        "ValidationException",
        message,
    )
    fits = {"id": {"S": "fits"}, "blob": {"S": "x" * (390 * 1024)}}  # (moto itself refuses from about 396 KiB)
    dynamodb.put_item(TableName=table, Item=fits)
    assert dynamodb.scan(TableName=table)["Count"] == 1


# -- any request -----------------------------------------------------------------------------------
@pytest.fixture
def journalled(tmp_path: Path) -> Iterator[tuple[Emulator, Endpoint, StateDirectory]]:
    state = StateDirectory(tmp_path / "state")
    emulator = Emulator(state=state)
    emulator.recover()
    endpoint = emulator.open()
    yield emulator, endpoint, state
    emulator.stop(snapshot=False)
    state.close()


def raw(
    endpoint: Endpoint, method: str, path: str, headers: dict[str, str], body: Iterator[bytes], length: int
) -> tuple[int, bytes]:
    port = int((endpoint.url or "").rsplit(":", 1)[1])
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        connection.putrequest(method, path)
        for name, value in {**headers, "Content-Length": str(length)}.items():
            connection.putheader(name, value)
        connection.endheaders()
        try:
            for chunk in body:
                connection.send(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass  # answered before it read all: the answer is what counts
        answer = connection.getresponse()
        return answer.status, answer.read()
    finally:
        connection.close()


def zeros(size: int) -> Iterator[bytes]:
    chunk = b"\0" * MIB
    for _ in range(size // MIB):
        yield chunk


def test_a_100_mb_request_is_refused_unread_and_nothing_is_journalled(
    journalled: tuple[Emulator, Endpoint, StateDirectory],
) -> None:
    emulator, endpoint, state = journalled
    before = state.journal.stat().st_size if state.journal.exists() else 0
    signed = {
        "X-Amz-Target": "Kinesis_20131202.PutRecord",
        "Content-Type": "application/x-amz-json-1.1",
        "Authorization": "AWS4-HMAC-SHA256 Credential=testing/20260101/eu-west-2/kinesis/aws4_request, "
        "SignedHeaders=host, Signature=0",
    }
    status, body = raw(endpoint, "POST", "/", signed, zeros(100 * MIB), 100 * MIB)
    assert status == 413
    answer = json.loads(body)
    assert answer["__type"] == "RequestEntityTooLarge"
    assert f"{limits.MAX_BODY:,} bytes" in answer["message"]
    status, body = raw(endpoint, "PUT", "/some-bucket/key", {}, zeros(100 * MIB), 100 * MIB)
    assert status == 400
    assert b"<Code>EntityTooLarge</Code>" in body
    after = state.journal.stat().st_size if state.journal.exists() else 0
    assert after == before
    assert emulator.app._index == 0  # nothing applied


def test_a_json_request_that_is_not_json_is_refused_and_not_journalled(
    journalled: tuple[Emulator, Endpoint, StateDirectory],
) -> None:
    emulator, endpoint, _ = journalled
    kinesis = boto3.client(
        "kinesis",
        endpoint_url=endpoint.url,
        region_name="eu-west-2",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(retries={"max_attempts": 1}),
    )
    headers = {"X-Amz-Target": "Kinesis_20131202.PutRecord", "Content-Type": "application/x-amz-json-1.1"}
    status, body = raw(endpoint, "POST", "/", headers, iter([b"\xff garbage"]), 9)
    assert status == 400
    assert json.loads(body)["__type"] == "SerializationException"
    assert emulator.app._index == 0
    kinesis.create_stream(StreamName="after", ShardCount=1)  # and it serves on
    assert emulator.app._index == 1
