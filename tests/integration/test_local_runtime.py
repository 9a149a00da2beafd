"""The local runtime's parts with Lambda's and Firehose's semantics, on the emulator."""

from __future__ import annotations

import os
import re
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import orjson
import pytest
from botocore.exceptions import ClientError

from rdss.archive import entries as archive
from rdss.local.emulator import Endpoint
from rdss.local.firehose import STAGING_PREFIX, DeliveryStream, LocalFirehose
from tests.support import archives
from tests.support.localup import serving
from tests.support.system import System

pytestmark = pytest.mark.integration


class Recorder:
    """A Lambda handler that records its events and answers as told."""

    def __init__(self, answer: Any = None) -> None:
        self.events: list[list[bytes]] = []
        self.answer = answer or (lambda data: [])

    def __call__(self, event: dict, context: Any) -> dict:
        import base64

        data = [base64.b64decode(r["kinesis"]["data"]) for r in event["Records"]]
        self.events.append(data)
        failed = self.answer(data)
        if isinstance(failed, Exception):
            raise failed
        return {
            "batchItemFailures": [{"itemIdentifier": event["Records"][i]["kinesis"]["sequenceNumber"]} for i in failed]
        }


def publish(system: System, count: int, key: str = "same-shard") -> list[bytes]:
    payloads = [b"record-%03d" % i for i in range(count)]
    system.publish(payloads, channel="metadata", partition_key=key)
    return payloads


def test_batch_size_and_shard_order(system: System):
    payloads = publish(system, 25)
    recorder = Recorder()
    system.mapping("metadata", recorder, batch_size=10).drain()
    assert [len(e) for e in recorder.events] == [10, 10, 5]
    assert [d for e in recorder.events for d in e] == payloads


def test_partial_batch_failure_retries_from_the_earliest_failed_record(system: System):
    payloads = publish(system, 6)
    first_time = {"done": False}

    def answer(data: list[bytes]) -> list[int]:
        if not first_time["done"]:
            first_time["done"] = True
            return [4, 2]  # Lambda retries from the earliest: index 2
        return []

    recorder = Recorder(answer)
    mapping = system.mapping("metadata", recorder, batch_size=10)
    mapping.drain()
    assert recorder.events == [payloads, payloads[2:]]
    assert mapping.stats.retries == 1


def test_function_errors_bisect_then_exhausted_batches_go_to_the_failure_destination(system: System):
    publish(system, 8)
    poison = b"record-005"
    destination: list[dict] = []

    def answer(data: list[bytes]) -> Exception | list[int]:
        return RuntimeError("poison") if poison in data else []

    recorder = Recorder(answer)
    mapping = system.mapping(
        "metadata", recorder, batch_size=8, max_retries=2, on_failure=lambda f: destination.append(f.as_dict())
    )
    mapping.drain()
    assert mapping.stats.bisections >= 3  # 8 -> 4 -> 2 -> 1
    assert [b for e in recorder.events for b in e].count(poison) == 1 + 1 + 1 + 1 + 2  # 8,4,2,1 then two retries
    [failure] = destination
    assert failure["requestContext"]["condition"] == "RetryAttemptsExhausted"
    assert failure["requestContext"]["approximateInvokeCount"] == 3  # the single record's invocation + 2 retries
    assert failure["responseContext"]["functionError"] == "Unhandled"
    assert failure["KinesisBatchInfo"]["batchSize"] == 1
    assert failure["KinesisBatchInfo"]["startSequenceNumber"] == failure["KinesisBatchInfo"]["endSequenceNumber"]
    assert re.fullmatch(
        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", failure["KinesisBatchInfo"]["approximateArrivalOfFirstRecord"]
    )
    delivered = {b for e in recorder.events for b in e if b != poison}
    assert len(delivered) == 7  # every other record still went through


def test_batching_window_waits_for_a_fuller_batch(system: System):
    publish(system, 3)
    recorder = Recorder()
    mapping = system.mapping("metadata", recorder, batch_size=5, batching_window=0.3)
    started = time.monotonic()
    mapping.poll()
    assert time.monotonic() - started >= 0.25
    assert [len(e) for e in recorder.events] == [3]


def test_records_older_than_the_maximum_age_are_skipped_to_the_destination(system: System):
    publish(system, 3)
    destination: list[Any] = []
    recorder = Recorder()
    mapping = system.mapping(
        "metadata", recorder, max_record_age=60, on_failure=destination.append, clock=lambda: time.time() + 3600
    )
    mapping.drain()
    assert recorder.events == []
    assert destination[0].condition == "RecordAgeExceeded"


def test_checkpoints_survive_a_new_mapping(system: System):
    publish(system, 4)
    checkpoints: dict[str, str] = {}
    first = Recorder()
    system.mapping("metadata", first, checkpoints=checkpoints).drain()
    publish(system, 2, key="same-shard")
    second = Recorder()
    system.mapping("metadata", second, checkpoints=checkpoints).drain()
    assert [len(e) for e in second.events] == [2]


def delivery_stream(system: System, **settings: Any) -> DeliveryStream:
    return DeliveryStream(
        system.client("s3"), name="test", bucket=system.deployment.bucket("audit"), prefix="audit/", **settings
    )


def members(count: int, start: int = 0) -> list[bytes]:
    """``count`` Firehose records as the archiver makes them: gzip members of entries."""
    lines = archives.entries([b"record-%03d" % i for i in range(start, start + count)])
    return [archive.member([line]) for line in lines]


def test_a_local_delivery_stream_delivers_as_firehose_does(system: System):
    s3, bucket = system.client("s3"), system.deployment.bucket("audit")
    stream = delivery_stream(system, buffer_bytes=2000, buffer_seconds=3600)
    firehose = LocalFirehose({"test": stream})
    records = members(30)
    answer = firehose.put_record_batch(DeliveryStreamName="test", Records=[{"Data": r} for r in records[:10]])
    assert answer["FailedPutCount"] == 0
    assert len(answer["RequestResponses"]) == 10
    assert firehose.poll() == 0  # under both hints: buffered
    firehose.put_record_batch(DeliveryStreamName="test", Records=[{"Data": r} for r in records[10:]])
    assert firehose.poll() == 30  # over the size hint: delivered, as one object
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="audit/")["Contents"]]
    assert len(keys) == 1
    assert re.match(
        r"audit/year=\d{4}/month=\d\d/day=\d\d/hour=\d\d/test-1-\d{4}-\d\d-\d\d-\d\d-\d\d-\d\d-[0-9a-f-]{36}\.gz$",
        keys[0],
    )
    body = s3.get_object(Bucket=bucket, Key=keys[0])["Body"].read()
    assert body == b"".join(records)  # concatenated as they came: one gzip object of 30 members
    assert [e.payload for e in archive.read(body)] == [b"record-%03d" % i for i in range(30)]
    hour = archive.archived_at(keys[0])
    assert hour is not None
    assert abs((datetime.now(UTC) - hour).total_seconds()) < 7200
    assert s3.list_objects_v2(Bucket=bucket, Prefix=STAGING_PREFIX).get("KeyCount", 0) == 0  # buffer cleared


def test_a_local_delivery_stream_refuses_what_firehose_refuses(system: System):
    firehose = LocalFirehose({"test": delivery_stream(system)})
    with pytest.raises(ClientError, match="ResourceNotFoundException"):
        firehose.put_record_batch(DeliveryStreamName="other", Records=[{"Data": b"x"}])
    with pytest.raises(ClientError, match=r"ValidationException.*'records' .* less than or equal to 500"):
        firehose.put_record_batch(DeliveryStreamName="test", Records=[{"Data": b"x"}] * 501)
    with pytest.raises(ClientError, match=r"ValidationException.*'records\.1\.member\.data' .* 1024000"):
        firehose.put_record_batch(DeliveryStreamName="test", Records=[{"Data": b"x" * (1000 * 1024 + 1)}])
    with pytest.raises(ClientError, match=r"InvalidArgumentException.*Records size exceeds 4 MB limit"):
        firehose.put_record_batch(DeliveryStreamName="test", Records=[{"Data": b"x" * 1_000_000}] * 5)


def test_what_a_delivery_stream_accepted_survives_the_process(system: System):
    s3, bucket = system.client("s3"), system.deployment.bucket("audit")
    crashed = delivery_stream(system, buffer_seconds=3600)
    crashed.put(members(3))
    crashed.put(members(2, start=3))  # accepted (the caller acknowledged its records)... and the process dies
    assert s3.list_objects_v2(Bucket=bucket, Prefix="audit/").get("KeyCount", 0) == 0
    survivor = delivery_stream(system, buffer_seconds=3600)
    assert survivor.buffered == 5
    assert survivor.flush() == 5
    [key] = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="audit/")["Contents"]]
    body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    assert [e.payload for e in archive.read(body)] == [b"record-%03d" % i for i in range(5)]


def test_local_demo_follows_the_report_contract(endpoint: Endpoint, tmp_path: Path):
    from rdss.local import demo

    messages = tmp_path / "messages"
    messages.mkdir()
    examples = Path(__file__).resolve().parents[2] / "examples" / "messages"
    chosen = [
        "valid/metadata-create-event.json",
        "invalid/GENERR004-header-missing.json",
        "invalid/GENERR003-expired.json",
    ]
    for index, name in enumerate(chosen):
        (messages / f"{index:02d}-{Path(name).name}").write_bytes((examples / name).read_bytes())
    (messages / "03-copy.json").write_bytes((examples / chosen[0]).read_bytes())
    report = tmp_path / "report.json"
    body = demo.run(messages_dir=messages, report=report, analytics=False, endpoint=endpoint)
    assert orjson.loads(report.read_bytes()) == body
    assert set(body) == {"inputs", "channels", "audit", "analytics", "trace"}
    assert [i["file"] for i in body["inputs"]] == sorted(p.name for p in messages.iterdir())
    assert [(i["outcome"], i["channels"], i["errorCode"], i["records"]) for i in body["inputs"]] == [
        ("routed", ["metadata"], None, 1),
        ("invalid", ["invalid"], "GENERR004", 1),
        ("error", ["error"], "GENERR003", 1),
        ("duplicate", [], None, 1),
    ]
    assert body["channels"]["input"] == 4
    assert body["channels"]["metadata"] == 1
    assert body["audit"]["objects"] >= 1
    assert body["audit"]["records"] == 4  # each record once, however many lines its JSON spans
    assert "published" not in body["audit"]


def test_local_up_serves_until_interrupted(endpoint: Endpoint, tmp_path: Path):
    if not endpoint.embedded:
        pytest.skip("`rdss local up` always starts its own embedded moto: run by the moto suite, not per endpoint")
    env = {**os.environ, "POWERTOOLS_LOG_LEVEL": "WARNING", "POWERTOOLS_METRICS_DISABLED": "true"}
    env.pop("AWS_ENDPOINT_URL", None)
    argv = [sys.executable, "-m", "rdss", "local", "up", "--env", f"u{uuid.uuid4().hex[:6]}", "--state", str(tmp_path)]
    with serving(argv, {**env, "COLUMNS": "200"}, ready=60) as lines:
        endpoint = next(
            re.search(r"http://127\.0\.0\.1:\d+", line).group(0) for line in lines if line.startswith("endpoint")
        )
        kinesis = boto3.client(
            "kinesis",
            endpoint_url=endpoint,
            region_name="eu-west-2",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        streams = kinesis.list_streams()["StreamNames"]
        assert sum(name.endswith("-input") for name in streams) == 1
        assert any("export AWS_ENDPOINT_URL=" in line for line in lines)


@pytest.mark.slow
def test_local_demo_runs_the_glue_jobs_on_the_archive(endpoint: Endpoint, tmp_path: Path):
    if not endpoint.embedded:
        pytest.skip(
            "the Glue jobs run on local Spark over files whatever the endpoint (minutes of CPU): run by the moto "
            "suite; the archive they read is checked on this endpoint by test_local_demo_follows_the_report_contract"
        )
    from rdss.local import demo
    from rdss.model.workload import Workload

    messages = tmp_path / "messages"
    messages.mkdir()
    for index, message in enumerate(Workload(77).mix(12)):
        (messages / f"{index:02d}.json").write_bytes(orjson.dumps(message))
    (messages / "99-garbage.json").write_bytes(b"not json")
    body = demo.run(messages_dir=messages, report=tmp_path / "r.json", analytics=True, endpoint=endpoint)
    analytics = body["analytics"]
    assert analytics["messages"] == 12
    assert analytics["rejects"]["total"] == 1
    assert analytics["errors"]["invalid"]["GENERR007"]["records"] == 1
    assert sum(analytics["volume"]["messageType"].values()) == 12
