"""A real Firehose delivery stream archiving a channel the way the stack configures it (Kinesis
source, GZIP, a newline after every record, hour prefixes) - on endpoints that have one.

moto's Firehose does not read Kinesis streams; there the local runtime's FirehoseBridge stands
in, and test_local_runtime checks that it writes what Firehose writes.
"""

from __future__ import annotations

import gzip
import json
import re
import time
import uuid
import warnings

import pytest

from rdss.archive import FIREHOSE_ERROR_EXPRESSION, FIREHOSE_HOUR_EXPRESSION
from rdss.topology import RDSS
from tests.support.system import System

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def records_of(body: bytes) -> list[bytes]:
    """The records of one archived object: gunzipped if compressed, split on newlines if
    delimited, else JSON values read one after another (records concatenated as they came)."""
    if body[:2] == b"\x1f\x8b":
        body = gzip.decompress(body)
    text, decoder, found, at = body.decode(), json.JSONDecoder(), [], 0
    while at < len(text):
        if text[at] in " \n":
            at += 1
            continue
        _, end = decoder.raw_decode(text, at)
        found.append(text[at:end].encode())
        at = end
    return found


def test_a_delivery_stream_archives_the_input_channel_as_the_stack_configures_it(system: System) -> None:
    if system.endpoint.embedded:
        pytest.skip("moto's Firehose does not read Kinesis sources: the FirehoseBridge stands in (test_local_runtime)")
    kinesis, firehose, s3 = system.client("kinesis"), system.client("firehose"), system.client("s3")
    [channel] = [c for c in RDSS.channels if c.name == "input"]
    assert channel.archive is not None
    stream = system.deployment.stream("input")
    bucket = system.deployment.bucket("audit")
    role = "arn:aws:iam::000000000000:role/rdss-archive"  # LocalStack does not check it
    name = f"{system.deployment.environment}-archive-{uuid.uuid4().hex[:6]}"
    firehose.create_delivery_stream(
        DeliveryStreamName=name,
        DeliveryStreamType="KinesisStreamAsSource",
        KinesisStreamSourceConfiguration={
            "KinesisStreamARN": kinesis.describe_stream_summary(StreamName=stream)["StreamDescriptionSummary"][
                "StreamARN"
            ],
            "RoleARN": role,
        },
        ExtendedS3DestinationConfiguration={
            "BucketARN": f"arn:aws:s3:::{bucket}",
            "RoleARN": role,
            "Prefix": channel.archive + FIREHOSE_HOUR_EXPRESSION,
            "ErrorOutputPrefix": FIREHOSE_ERROR_EXPRESSION,
            "CompressionFormat": "GZIP",
            "BufferingHints": {"IntervalInSeconds": 60, "SizeInMBs": 1},
            "ProcessingConfiguration": {
                "Enabled": True,
                "Processors": [{"Type": "AppendDelimiterToRecord", "Parameters": []}],
            },
        },
    )
    try:
        deadline = time.monotonic() + 180
        while (
            firehose.describe_delivery_stream(DeliveryStreamName=name)["DeliveryStreamDescription"][
                "DeliveryStreamStatus"
            ]
            != "ACTIVE"
        ):
            assert time.monotonic() < deadline, "delivery stream not ACTIVE"
            time.sleep(1)
        # Firehose starts reading its source at LATEST once its reader is up, some time after
        # ACTIVE: publish numbered records until some arrive, then a few more, and check that
        # what was archived is everything from the first archived record on, once, in order.
        published: list[bytes] = []
        objects: list[str] = []
        while not objects:
            assert time.monotonic() < deadline + 180, "nothing archived"
            record = b'{"n": %d}' % len(published)
            system.publish([record], partition_key="archive")
            published.append(record)
            time.sleep(1)
            objects = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]
        tail = [b'{"n": %d}' % (len(published) + i) for i in range(5)]
        system.publish(tail, partition_key="archive")
        published += tail
        archived: list[bytes] = []
        settle = time.monotonic() + 150
        while published[-1] not in archived:
            assert time.monotonic() < settle, f"the last records were not archived: {archived[-3:]}"
            time.sleep(2)
            keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", []))
            bodies = [s3.get_object(Bucket=bucket, Key=key)["Body"].read() for key in keys]
            archived = [record for body in bodies for record in records_of(body)]
        first = published.index(archived[0])
        assert archived == published[first:]  # nothing lost after the reader started, nothing twice
        assert all(key.startswith(channel.archive) for key in keys), keys
        as_configured = [
            all(body[:2] == b"\x1f\x8b" for body in bodies),  # GZIP
            all(gzip.decompress(b).endswith(b"\n") if b[:2] == b"\x1f\x8b" else b.endswith(b"\n") for b in bodies),
            all(re.match(r"audit/year=\d{4}/month=\d{2}/day=\d{2}/hour=\d{2}/", key) for key in keys),
        ]
        if not all(as_configured):
            # LocalStack community's Firehose delivers (reader, buffering, S3 put) but writes
            # records as they came: no GZIP, no AppendDelimiterToRecord, no !{timestamp:...}
            # prefix expressions. Said in the output, never taken for a pass of the format.
            missing = [
                n
                for n, ok in zip(("GZIP", "newline delimiter", "hour prefix expressions"), as_configured, strict=True)
                if not ok
            ]
            warnings.warn(
                f"this endpoint's Firehose does not model: {', '.join(missing)} (keys: {keys[:1]})", stacklevel=1
            )
            assert "localhost" in (system.endpoint.url or "") or "127.0.0.1" in (system.endpoint.url or "")
    finally:
        firehose.delete_delivery_stream(DeliveryStreamName=name)
