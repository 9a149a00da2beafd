"""``rdss bench broker``: the real broker handler on realistic Kinesis events.

N realistic messages become event-source-mapping events (``--batch`` records each, the way
Lambda delivers a shard's batch) in memory; the broker handler - the AMGI app behind the
Kinesis adaptor, exactly as deployed - is invoked on each. Against the embedded emulator every
AWS call is real HTTP; with ``--stub-aws`` the clients answer in memory, which leaves the CPU
cost of the broker itself.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TextIO

import orjson

from rdss.amgi.kinesis import KinesisEventSourceMappingHandler
from rdss.bench.aws_calls import CallCounter
from rdss.bench.figures import Measured
from rdss.deployment.topology import Deployment, from_environment
from rdss.model.workload import Workload
from rdss.processors.broker import Broker

#: Records of the first, untimed batch.
WARM_UP = 20

_DATA_PLANE = {
    "PutRecords",
    "PutRecord",
    "TransactWriteItems",
    "BatchGetItem",
    "BatchWriteItem",
    "PutItem",
    "GetItem",
    "UpdateItem",
    "PutObject",
}


@dataclass(frozen=True)
class Figures(Measured):
    records: int
    batch: int
    seconds: float
    aws: str
    calls: dict[str, int]

    @property
    def records_per_second(self) -> float:
        return self.records / self.seconds

    @property
    def calls_per_1000(self) -> float:
        return sum(self.calls.values()) * 1000 / self.records


def events(count: int, batch: int, seed: int = 11, first: int = 0) -> list[dict[str, Any]]:
    """Realistic messages as Lambda event-source-mapping events of ``batch`` records, the
    records numbered (sequence number, partition key, arrival) from ``first``."""
    arn = "arn:aws:kinesis:eu-west-2:123456789012:stream/rdss-bench-input"
    payloads = [orjson.dumps(m) for m in Workload(seed).mix(count)]
    built = []
    for start in range(0, count, batch):
        records = []
        for offset, payload in enumerate(payloads[start : start + batch], start=first + start):
            sequence = f"{49_600_000_000_000_000_000_000_000_000_000_000_000_000_000 + offset}"
            records.append(
                {
                    "kinesis": {
                        "kinesisSchemaVersion": "1.0",
                        "partitionKey": f"{offset:08x}",
                        "sequenceNumber": sequence,
                        "data": base64.b64encode(payload).decode("ascii"),
                        "approximateArrivalTimestamp": 1_795_000_000.0 + offset,
                    },
                    "eventSource": "aws:kinesis",
                    "eventVersion": "1.0",
                    "eventID": f"shardId-000000000000:{sequence}",
                    "eventName": "aws:kinesis:record",
                    "invokeIdentityArn": "arn:aws:iam::123456789012:role/rdss-broker",
                    "awsRegion": "eu-west-2",
                    "eventSourceARN": arn,
                }
            )
        built.append({"Records": records})
    return built


def run(count: int, *, batch: int = 1000, stub_aws: bool = False) -> Figures:
    """Time the broker handler over ``count`` records; count the AWS calls it makes."""
    built = events(count, batch)
    deployment = Deployment("bench")
    names = from_environment(deployment.environment_variables())
    counter = CallCounter(_DATA_PLANE)
    endpoint = None
    if stub_aws:
        kinesis: Any = _StubKinesis(counter)
        dynamodb: Any = _StubDynamoDB(counter)
        s3: Any = None
    else:
        from rdss.local.emulator import provision, start_embedded

        endpoint = start_embedded()
        provision(endpoint, deployment)
        kinesis = counter.attach(endpoint.client("kinesis"))
        dynamodb = counter.attach(endpoint.client("dynamodb"))
        s3 = counter.attach(endpoint.client("s3"))
    try:
        # written all the same, on standard error: standard output holds the figures alone (--json)
        with processor_output_to(sys.stderr):
            handler = KinesisEventSourceMappingHandler(Broker(names=names, dynamodb=dynamodb, s3=s3), kinesis=kinesis)
            # outside the timing, as in a warm Lambda: the lifespan's startup, then a first batch
            # (what processors load on first use: tracer, validators, the reject path), not counted
            handler({"Records": []}, None)
            for event in events(WARM_UP, WARM_UP, seed=12, first=count):
                handler(event, None)
            counter.start()
            started = time.perf_counter()
            for event in built:
                response = handler(event, None)
                if response["batchItemFailures"]:
                    raise AssertionError(f"{len(response['batchItemFailures'])} records failed")
            seconds = time.perf_counter() - started
            handler.close()
    finally:
        if endpoint is not None:
            endpoint.stop()
    return Figures(count, batch, seconds, "stub" if stub_aws else "embedded emulator", counter.counted())


@contextlib.contextmanager
def processor_output_to(stream: TextIO) -> Iterator[None]:
    """Send the processors' JSON log lines and EMF metric lines (printed) to ``stream`` for the
    block. In Lambda they go to standard output, which the runtime ships to CloudWatch."""
    from rdss.observability.powertools import logger

    handler = logger.registered_handler
    assert isinstance(handler, logging.StreamHandler)
    previous = handler.stream
    handler.setStream(stream)
    try:
        with contextlib.redirect_stdout(stream):
            yield
    finally:
        handler.setStream(previous)


class _StubKinesis:
    """Answers PutRecords in memory (every entry accepted)."""

    def __init__(self, counter: CallCounter) -> None:
        self.counter = counter

    def put_records(self, StreamName: str, Records: list[dict[str, Any]]) -> dict[str, Any]:
        self.counter.count("PutRecords")
        return {
            "FailedRecordCount": 0,
            "Records": [{"ShardId": "shardId-000000000000", "SequenceNumber": str(i)} for i in range(len(Records))],
        }


class _StubDynamoDB:
    """Answers the Local Data Repository's calls in memory, as an empty table would."""

    def __init__(self, counter: CallCounter) -> None:
        self.counter = counter

    def batch_get_item(self, **_: Any) -> dict[str, Any]:
        self.counter.count("BatchGetItem")
        return {"Responses": {}, "UnprocessedKeys": {}}

    def put_item(self, **_: Any) -> dict[str, Any]:
        self.counter.count("PutItem")
        return {}
