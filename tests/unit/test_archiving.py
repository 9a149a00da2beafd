"""The archiver app behind the Kinesis event-source-mapping server, with stub Firehose and S3:
what it puts, what it retries (only failed records), what it reports failed (per record), and
where a record too large for one Firehose record goes."""

from __future__ import annotations

import base64
import os
from typing import Any

from botocore.exceptions import ClientError

from rdss.amgi.kinesis import KinesisEventSourceMappingHandler
from rdss.archive import entries as archive
from rdss.archive.app import ArchiverApp
from rdss.archive.delivery import FirehoseWriter
from rdss.deployment.topology import Deployment, from_environment
from rdss.model.retry import Backoff

DEPLOYMENT = Deployment("dev")
NAMES = from_environment(DEPLOYMENT.environment_variables())


def event(stream: str, payloads: list[bytes], shard: str = "shardId-000000000002") -> dict[str, Any]:
    arn = f"arn:aws:kinesis:eu-west-2:123456789012:stream/{stream}"
    return {
        "Records": [
            {
                "kinesis": {
                    "partitionKey": f"pk-{i}",
                    "sequenceNumber": f"{4960 + i}",
                    "data": base64.b64encode(data).decode(),
                    "approximateArrivalTimestamp": 1795000000.25,
                },
                "eventID": f"{shard}:{4960 + i}",
                "eventSourceARN": arn,
            }
            for i, data in enumerate(payloads)
        ]
    }


class FakeFirehose:
    """PutRecordBatch: records each call; a record whose entries include ``fail`` fails ``times``
    times; ``error`` makes every call raise it."""

    def __init__(self, fail: bytes | None = None, times: int = 1, error: str | None = None) -> None:
        self.calls: list[tuple[str, list[bytes]]] = []
        self.fail, self.remaining, self.error = fail, times, error

    def put_record_batch(self, *, DeliveryStreamName: str, Records: list[dict[str, bytes]]) -> dict[str, Any]:
        self.calls.append((DeliveryStreamName, [r["Data"] for r in Records]))
        if self.error:
            raise ClientError({"Error": {"Code": self.error, "Message": "no"}}, "PutRecordBatch")
        responses: list[dict[str, str]] = []
        for record in Records:
            payloads = [e.payload for e in archive.read(record["Data"])]
            if self.fail is not None and self.fail in payloads and self.remaining > 0:
                self.remaining -= 1
                responses.append({"ErrorCode": "ServiceUnavailableException", "ErrorMessage": "slow down"})
            else:
                responses.append({"RecordId": "r"})
        return {"FailedPutCount": sum("ErrorCode" in r for r in responses), "RequestResponses": responses}

    def delivered(self) -> list[archive.Entry]:
        """Entries of every record some call did not report failed (the fake fails whole calls' records
        only through ``fail``, so: every record of a call but the failed ones)."""
        found = []
        for _, records in self.calls:
            for record in records:
                found.extend(archive.read(record))
        return found


class FakeS3:
    def __init__(self, fail: bool = False) -> None:
        self.objects: dict[tuple[str, str], bytes] = {}
        self.fail = fail

    def put_object(self, *, Bucket: str, Key: str, Body: bytes) -> None:
        if self.fail:
            raise ClientError({"Error": {"Code": "AccessDenied", "Message": "no"}}, "PutObject")
        self.objects[(Bucket, Key)] = Body


def server(firehose: FakeFirehose, s3: FakeS3 | None = None) -> KinesisEventSourceMappingHandler:
    writer = FirehoseWriter(firehose, backoff=Backoff(max_retries=2, base=0.001), sleep=lambda s: None)
    app = ArchiverApp(names=NAMES, firehose=firehose, s3=s3 or FakeS3(), writer=writer)
    return KinesisEventSourceMappingHandler(app, kinesis=object())


def test_every_record_is_framed_with_its_identity_and_put_as_one_member() -> None:
    firehose = FakeFirehose()
    payloads = [b'{\n  "indented": true\n}', b"", b"\xff\xfe"]
    answer = server(firehose)(event("rdss-dev-input", payloads))
    assert answer == {"batchItemFailures": []}
    [(stream, records)] = firehose.calls
    assert stream == NAMES.delivery_stream("input") == "rdss-dev-input"
    assert len(records) == 1  # one gzip member for the batch
    entries = archive.read(records[0])
    assert [e.payload for e in entries] == payloads
    assert [e.record for e in entries] == [
        "shardId-000000000002/4960",
        "shardId-000000000002/4961",
        "shardId-000000000002/4962",
    ]
    assert {e.stream for e in entries} == {"rdss-dev-input"}
    assert [e.partition_key for e in entries] == ["pk-0", "pk-1", "pk-2"]
    assert {e.arrival for e in entries} == {"2026-11-18T11:06:40.250Z"}  # 1795000000.25, in UTC


def test_the_invalid_and_error_channels_go_to_their_own_delivery_streams() -> None:
    firehose = FakeFirehose()
    handler = server(firehose)
    handler(event("rdss-dev-invalid", [b"a"]))
    handler(event("rdss-dev-error", [b"b"]))
    assert [stream for stream, _ in firehose.calls] == ["rdss-dev-invalid", "rdss-dev-error"]


def test_only_the_records_firehose_failed_are_put_again() -> None:
    payloads = [os.urandom(300_000) for _ in range(9)]  # incompressible: several members
    firehose = FakeFirehose(fail=payloads[3], times=1)
    answer = server(firehose)(event("rdss-dev-input", payloads))
    assert answer == {"batchItemFailures": []}
    first, retry = firehose.calls
    assert len(first[1]) >= 3
    assert len(retry[1]) == 1  # the failed member, and nothing else
    assert payloads[3] in [e.payload for e in archive.read(retry[1][0])]


def test_records_still_failed_after_the_retries_are_reported_one_by_one() -> None:
    payloads = [os.urandom(300_000) for _ in range(9)]
    firehose = FakeFirehose(fail=payloads[3], times=100)
    answer = server(firehose)(event("rdss-dev-input", payloads))
    failed = [f["itemIdentifier"] for f in answer["batchItemFailures"]]
    members = archive.pack(
        [archive.frame(p, stream="s", shard="h", sequence_number=str(i)) for i, p in enumerate(payloads)]
    )
    member = next(m for m in members if m.start <= 3 < m.end)
    # exactly the records of the member that did not go (Lambda retries from the first of them)
    assert failed == [str(4960 + i) for i in range(member.start, member.end)]
    assert member.count < len(payloads)


def test_a_refused_call_fails_every_record_of_it() -> None:
    answer = server(FakeFirehose(error="ResourceNotFoundException"))(event("rdss-dev-input", [b"a", b"b"]))
    assert [f["itemIdentifier"] for f in answer["batchItemFailures"]] == ["4960", "4961"]


def test_a_record_too_large_for_firehose_is_an_object_of_its_own() -> None:
    firehose, s3 = FakeFirehose(), FakeS3()
    huge = os.urandom(1_040_000)
    answer = server(firehose, s3)(event("rdss-dev-input", [b"small", huge, b"after"]))
    assert answer == {"batchItemFailures": []}
    [((bucket, key), body)] = s3.objects.items()
    assert bucket == NAMES.bucket("audit")
    assert key.startswith("audit/year=")
    assert key.endswith(".gz")
    assert "/rdss-dev-input-1-" in key  # named as Firehose names the delivery stream's objects
    assert [e.payload for e in archive.read(body)] == [huge]
    assert sorted(e.payload for e in firehose.delivered()) == [b"after", b"small"]


def test_a_large_record_not_stored_is_reported() -> None:
    huge = os.urandom(1_040_000)
    answer = server(FakeFirehose(), FakeS3(fail=True))(event("rdss-dev-input", [b"small", huge]))
    assert [f["itemIdentifier"] for f in answer["batchItemFailures"]] == ["4961"]


def test_records_of_a_stream_that_is_not_archived_are_never_acknowledged() -> None:
    firehose = FakeFirehose()
    answer = server(firehose)(event("rdss-dev-metadata", [b"a"]))
    assert [f["itemIdentifier"] for f in answer["batchItemFailures"]] == ["4960"]
    assert firehose.calls == []
