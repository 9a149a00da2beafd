"""``rdss redrive`` against the local runtime on the emulator: batches the broker's event source
mapping parked (Lambda's invocation records in the SQS on-failure queue) go back on ``input`` as
new records (the claims their first delivery left released), are routed once, and the pointers
are deleted; a repeated redrive puts nothing back twice; what cannot be recovered is reported
with why, and the command exits 1."""

from __future__ import annotations

import base64
import re
import time
import uuid
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from rdss.archive import entries as archive
from rdss.cli import main
from rdss.deployment.topology import RDSS
from rdss.local.accounting import Input, account, read_channel
from rdss.local.emulator import Endpoint
from rdss.local.runtime import Runtime, Settings
from rdss.model.retry import Backoff
from rdss.model.workload import Workload
from rdss.processors.redrive import Redriver
from rdss.trace.tracer import Tracer
from tests.support.faults import Proxy, client_error

pytestmark = pytest.mark.integration


class Crash(BaseException):
    """The function dies (a timeout, out of memory) whenever it is given a poisoned record."""


class Poisoned:
    """Wraps the broker's Lambda handler: batches holding a poisoned messageId crash it."""

    def __init__(self, handler: Any) -> None:
        self.handler = handler
        self.ids: set[str] = set()

    def __call__(self, event: dict[str, Any], context: Any) -> Any:
        for record in event["Records"]:
            data = base64.b64decode(record["kinesis"]["data"])
            if any(i.encode() in data for i in self.ids):
                raise Crash("the broker died on a poisoned record")
        return self.handler(event, context)


@pytest.fixture
def runtime(endpoint: Endpoint, monkeypatch: pytest.MonkeyPatch) -> Iterator[Runtime]:
    for name, value in endpoint.environment().items():  # what `rdss local up` tells operators to export
        monkeypatch.setenv(name, value)
    settings = Settings(environment=f"r{uuid.uuid4().hex[:8]}", shards=2, max_retries=1, sweep_interval=3600)
    runtime = Runtime(endpoint, settings)
    runtime.provision()
    yield runtime
    runtime.deprovision()


def poison(runtime: Runtime) -> Poisoned:
    mapping = runtime.mappings["broker"]
    wrapper = Poisoned(mapping.handler)
    mapping.handler = wrapper
    return wrapper


def redrive(runtime: Runtime, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, list[str]]:
    code = main(["redrive", "--url", f"kinesis://{runtime.deployment.environment}", *extra])
    return code, capsys.readouterr().out.strip().splitlines()


def test_parked_batches_are_redriven_once_and_a_repeat_routes_nothing_twice(
    runtime: Runtime, capsys: pytest.CaptureFixture[str]
):
    workload = Workload(12)
    messages = workload.mix(40)
    invalid = workload.message("MetadataDelete", "Event")
    invalid["messageHeader"]["generator"] = ""  # GENERR004: invalid records are redriven too
    payloads = [orjson.dumps(m) for m in [*messages, invalid]]
    wrapper = poison(runtime)
    stuck = [m["messageHeader"]["messageId"] for m in messages[5:8]] + [invalid["messageHeader"]["messageId"]]
    wrapper.ids.update(stuck)
    published = runtime.publish(payloads)
    runtime.drain()
    parked = runtime.failed_batches()["broker"]
    assert parked >= 1
    before = account(runtime, [Input(str(i), [p]) for i, p in enumerate(published)])
    assert before.outcomes()["unaccounted"] == len(stuck)

    # the dry run lists them and changes nothing
    code, lines = redrive(runtime, capsys, "--dry-run")
    assert code == 0, lines
    assert lines[-1] == f"would redrive {parked} parked batch(es), {len(stuck)} record(s)"
    assert all("would put back" in line for line in lines[:-1])
    assert runtime.failed_batches()["broker"] == parked

    # fixed: redrive puts them back, the broker routes them, the pointers are gone
    wrapper.ids.clear()
    code, lines = redrive(runtime, capsys)
    assert code == 0, lines
    assert lines[-1] == f"redrove {parked} parked batch(es), {len(stuck)} record(s)"
    runtime.drain()
    assert runtime.failed_batches() == {"broker": 0, "sequencer": 0, "archiver": 0}
    after = account(runtime, [Input(str(i), [p]) for i, p in enumerate(published)])
    assert after.outcomes() == {"routed": len(messages), "invalid": 1}
    assert max(after.routed_ids.values()) == 1
    # rdss trace follows a parked record to the record it went back as
    tracer = Tracer(runtime.deployment, runtime.endpoint.client)
    timeline = tracer.trace(stuck[0])
    assert [d.outcome for d in timeline.dispatches] == ["redriven", "routed"], timeline.lines()
    assert timeline.dispatches[0].redriven_as == timeline.dispatches[1].record
    assert timeline.summary().endswith("; 1 parked record(s) put back by rdss redrive"), timeline.summary()
    stuck_invalid = published[-1].record
    by_record = tracer.trace(stuck_invalid)
    assert [d.outcome for d in by_record.dispatches] == ["redriven"], by_record.lines()
    assert [d.outcome for d in tracer.trace(str(by_record.dispatches[0].redriven_as)).dispatches] == ["invalid"]

    # the same pointers again (an operator re-running an old script): each record was noted with
    # the record it went back as, so nothing is put back, nothing routed twice
    sqs = runtime.endpoint.client("sqs")
    queue = sqs.get_queue_url(QueueName=runtime.deployment.on_failure_queue("broker"))["QueueUrl"]
    for failed in runtime.mappings["broker"].stats.failed_batches:
        sqs.send_message(QueueUrl=queue, MessageBody=orjson.dumps(failed.as_dict()).decode())
    code, lines = redrive(runtime, capsys)
    assert code == 0, lines
    assert all("put back 0 record(s)" in line and "left alone" in line for line in lines[:-1]), lines
    runtime.drain()
    again = account(runtime, [Input(str(i), [p]) for i, p in enumerate(published)])
    assert again.channels == after.channels
    assert again.outcomes() == after.outcomes()

    code, lines = redrive(runtime, capsys)
    assert (code, lines) == (0, ["no parked batches"])


def park_and_trim(runtime: Runtime) -> tuple[list[Any], str, list[Any], Redriver]:
    """Two batches parked (a valid message's and an invalid one's), then trimmed from the
    stream: only the archive and the repository remain. Returns the messages, the stuck valid
    messageId, what was published and a Redriver that finds the stream trimmed."""
    workload = Workload(13)
    messages = workload.mix(12)
    invalid = workload.message("MetadataDelete", "Event")
    invalid["messageHeader"]["messageId"] = "not-a-uuid"  # GENERR010: no messageId to match it by
    wrapper = poison(runtime)
    stuck_valid = messages[3]["messageHeader"]["messageId"]
    wrapper.ids.update({stuck_valid, "not-a-uuid"})
    published = runtime.publish([orjson.dumps(m) for m in [*messages, invalid]])
    runtime.drain()
    assert runtime.failed_batches()["broker"] == 2
    wrapper.ids.clear()

    def trimmed(real: Any, **kwargs: Any) -> Any:
        if kwargs.get("ShardIteratorType") == "AT_SEQUENCE_NUMBER":
            raise client_error("InvalidArgumentException", "GetShardIterator")
        return real(**kwargs)

    endpoint = runtime.endpoint
    redriver = Redriver(
        runtime.deployment,
        sqs=endpoint.client("sqs"),
        kinesis=Proxy(endpoint.client("kinesis"), get_shard_iterator=trimmed),
        s3=endpoint.client("s3"),
        dynamodb=endpoint.client("dynamodb"),
        wait_seconds=0,
    )
    return messages, stuck_valid, published, redriver


def test_past_the_streams_retention_the_archive_gives_each_record_exactly(
    runtime: Runtime, capsys: pytest.CaptureFixture[str]
):
    messages, stuck_valid, published, redriver = park_and_trim(runtime)
    report = redriver.run()
    # the archive's entries name their records: each parked range is found whole, the record
    # with no valid messageId too, and put back as the record it was
    assert report.ok, report.lines()
    assert all(b.source == "archive" for b in report.batches)
    assert sorted(b.records for b in report.batches) == [1, 1]
    runtime.drain()
    result = account(runtime, [Input(str(i), [p]) for i, p in enumerate(published)])
    assert result.outcomes() == {"routed": len(messages), "invalid": 1}
    assert result.routed_ids[stuck_valid] == 1
    assert max(result.routed_ids.values()) == 1
    assert runtime.failed_batches()["broker"] == 0
    code, lines = redrive(runtime, capsys)
    assert (code, lines) == (0, ["no parked batches"])


def as_legacy(runtime: Runtime) -> int:
    """Rewrite the audit archive as Firehose wrote it before entries (raw records, one a line)."""
    s3, bucket = runtime.endpoint.client("s3"), runtime.deployment.bucket("audit")
    rewritten = 0
    for item in s3.list_objects_v2(Bucket=bucket, Prefix="audit/").get("Contents", []):
        entries = archive.read(s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read())
        body = archive.encode_legacy([entry.payload for entry in archive.unique(entries)])
        s3.put_object(Bucket=bucket, Key=item["Key"], Body=body)
        rewritten += 1
    return rewritten


def test_past_the_streams_retention_a_legacy_archive_is_matched_by_messageid(
    runtime: Runtime, capsys: pytest.CaptureFixture[str]
):
    messages, stuck_valid, published, redriver = park_and_trim(runtime)
    assert as_legacy(runtime) >= 1  # an archive written before entries: bytes, no sequence numbers
    report = redriver.run()
    assert not report.ok
    assert all(b.source == "archive" for b in report.batches)
    # the unprocessed message is found and put back, but which batch it was in cannot be told,
    # and one batch's record (no valid messageId) cannot be found at all: both pointers stay
    assert sorted(b.records for b in report.batches) == [0, 1]
    assert all(not b.recovered for b in report.batches)
    assert "matched 1 unprocessed record(s) to the 2 missing from 2 batch(es)" in (report.batches[0].problem or "")
    runtime.drain()
    inputs = [Input(str(i), [p]) for i, p in enumerate(published)]
    result = account(runtime, inputs)
    # the archive gives bytes, not sequence numbers: the never-claimed message went back as a new
    # record, so the record-by-record account calls the parked one a duplicate of it - and its
    # message is routed exactly once
    assert result.outcomes() == {"routed": len(messages) - 1, "duplicate": 1, "unaccounted": 1}
    assert result.routed_ids[stuck_valid] == 1
    assert max(result.routed_ids.values()) == 1
    assert runtime.failed_batches()["broker"] == 2  # both pointers stay parked

    # the stream still has them after all: the kept pointers are honoured by the next run
    code, lines = redrive(runtime, capsys)
    assert code == 0, lines
    assert lines[-1] == "redrove 2 parked batch(es), 2 record(s)"
    runtime.drain()
    final = account(runtime, inputs)
    assert final.outcomes() == {"routed": len(messages) - 1, "duplicate": 1, "invalid": 1}
    assert max(final.routed_ids.values()) == 1
    assert runtime.failed_batches()["broker"] == 0


def test_claimed_records_past_retention_are_recovered_whole_from_the_archive(
    endpoint: Endpoint, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    """The broker claimed the records, then died before sending anything: the claims name the
    records, so the archive's copies go back as those very records, routed once."""
    for name, value in endpoint.environment().items():
        monkeypatch.setenv(name, value)
    poisoned: set[str] = set()

    def put_item(real: Any, **kwargs: Any) -> Any:
        try:
            return real(**kwargs)
        finally:  # claimed (or found its own claim), then died
            if "ConditionExpression" in kwargs and kwargs["Item"]["messageId"]["S"] in poisoned:
                raise Crash("the broker died after claiming")

    def clients(processor: str, service: str) -> Any:
        client = endpoint.client(service)
        if (processor, service) == ("broker", "dynamodb"):
            return Proxy(client, put_item=put_item)
        return client

    settings = Settings(environment=f"r{uuid.uuid4().hex[:8]}", shards=1, max_retries=1, sweep_interval=3600)
    runtime = Runtime(endpoint, settings, clients=clients)
    runtime.provision()
    try:
        messages = Workload(14).mix(10)
        poisoned.update(m["messageHeader"]["messageId"] for m in messages[4:6])
        published = runtime.publish([orjson.dumps(m) for m in messages])
        runtime.drain()
        assert runtime.failed_batches()["broker"] >= 1
        poisoned.clear()

        def trimmed(real: Any, **kwargs: Any) -> Any:
            if kwargs.get("ShardIteratorType") == "AT_SEQUENCE_NUMBER":
                raise client_error("InvalidArgumentException", "GetShardIterator")
            return real(**kwargs)

        report = Redriver(
            runtime.deployment,
            sqs=endpoint.client("sqs"),
            kinesis=Proxy(endpoint.client("kinesis"), get_shard_iterator=trimmed),
            s3=endpoint.client("s3"),
            dynamodb=endpoint.client("dynamodb"),
            wait_seconds=0,
        ).run()
        assert report.ok, report.lines()
        assert report.records == 2
        runtime.drain()
        result = account(runtime, [Input(str(i), [p]) for i, p in enumerate(published)])
        assert result.outcomes() == {"routed": len(messages)}
        assert max(result.routed_ids.values()) == 1
        assert runtime.failed_batches()["broker"] == 0
    finally:
        runtime.deprovision()


def test_records_whose_outputs_went_out_are_left_alone_and_the_others_go_back_once(
    endpoint: Endpoint, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    """One message's routed copy is refused by the stream every time: the broker nacks its record,
    the mapping retries from it and parks the range - which holds records whose outputs went out
    (the batch ledger lists them) besides that one. Redrive leaves those alone and puts back the
    one that never went, after releasing its claim: every message routed exactly once."""
    for name, value in endpoint.environment().items():
        monkeypatch.setenv(name, value)
    refused: set[bytes] = set()

    def put_records(real: Any, **kwargs: Any) -> Any:
        records = kwargs["Records"]
        failing = [any(i in bytes(r["Data"]) for i in refused) for r in records]
        kept = [r for r, fails in zip(records, failing, strict=True) if not fails]
        answer = real(**{**kwargs, "Records": kept}) if kept else {"Records": [], "FailedRecordCount": 0}
        accepted = iter(answer["Records"])
        refusal = {"ErrorCode": "ProvisionedThroughputExceededException", "ErrorMessage": "Rate exceeded"}
        results = [refusal if fails else next(accepted) for fails in failing]
        return {**answer, "Records": results, "FailedRecordCount": answer["FailedRecordCount"] + sum(failing)}

    def clients(processor: str, service: str) -> Any:
        client = endpoint.client(service)
        if (processor, service) == ("broker", "kinesis"):
            return Proxy(client, put_records=put_records)
        return client

    settings = Settings(
        environment=f"r{uuid.uuid4().hex[:8]}", shards=1, max_retries=1, bisect_on_error=False, sweep_interval=3600
    )
    runtime = Runtime(endpoint, settings, clients=clients)
    runtime.provision()
    try:
        messages = Workload(15).mix(10)
        stuck = messages[3]["messageHeader"]["messageId"]
        refused.add(stuck.encode())
        published = runtime.publish([orjson.dumps(m) for m in messages])
        runtime.drain()
        assert runtime.failed_batches()["broker"] == 1
        refused.clear()
        code, lines = redrive(runtime, capsys)
        assert code == 0, lines
        [line, summary] = lines
        found = re.match(r"broker: put back 1 record\(s\) of input from the stream \((\d+) of them processed", line)
        assert found is not None, line
        left = int(found.group(1))
        assert left >= 1, line  # records after it in the range, whose outputs went out
        assert summary == f"redrove 1 parked batch(es), {left + 1} record(s)"
        runtime.drain()
        result = account(runtime, [Input(str(i), [p]) for i, p in enumerate(published)])
        assert result.outcomes() == {"routed": len(messages)}
        assert max(result.routed_ids.values()) == 1
        assert result.routed_ids[stuck] == 1
        assert runtime.failed_batches()["broker"] == 0
    finally:
        runtime.deprovision()


def test_a_queue_message_that_is_not_a_pointer_is_reported_and_kept(
    runtime: Runtime, capsys: pytest.CaptureFixture[str]
):
    sqs = runtime.endpoint.client("sqs")
    queue = sqs.get_queue_url(QueueName=runtime.deployment.on_failure_queue("sequencer"))["QueueUrl"]
    sqs.send_message(QueueUrl=queue, MessageBody='{"hello": "operator"}')
    code, lines = redrive(runtime, capsys, "--processor", "sequencer")
    assert code == 1
    assert "NOT RECOVERED queue message" in lines[0]
    assert "not a Kinesis batch record" in lines[0]
    assert lines[-1] == "redrove 0 parked batch(es), 0 record(s); 1 batch(es) NOT recovered (left in the queue)"
    assert runtime.failed_batches()["sequencer"] == 1


def test_an_unknown_deployment_is_a_usage_error(runtime: Runtime, capsys: pytest.CaptureFixture[str]):
    assert main(["redrive", "--url", f"kinesis://missing{uuid.uuid4().hex[:6]}"]) == 2
    assert "no on-failure queue" in capsys.readouterr().err


def test_the_archivers_parked_batches_are_archived_not_put_back(runtime: Runtime, capsys: pytest.CaptureFixture[str]):
    """Firehose refused everything for a while: the archiver's mapping parked its batches. Redrive
    archives them from the stream, each with its identity, through the channel's delivery stream
    (here the endpoint's own Firehose API) - and puts nothing back on the channel, whose
    consumers would get the records twice."""
    endpoint = runtime.endpoint
    archiver = runtime.handlers["archiver"].app
    archiver.writer.backoff = Backoff(max_retries=1, base=0.001)

    def unavailable(real: Any, **kwargs: Any) -> Any:
        raise client_error("ServiceUnavailableException", "PutRecordBatch")

    archiver.writer.client = Proxy(runtime.firehose, put_record_batch=unavailable)
    payloads = [orjson.dumps(m) for m in Workload(14).mix(8)] + [b"", b"\xff not UTF-8"]
    published = runtime.publish(payloads)
    runtime.drain()
    parked = runtime.failed_batches()["archiver"]
    assert parked >= 1
    input_records = len(read_channel(runtime, "input"))

    firehose, s3 = endpoint.client("firehose"), endpoint.client("s3")
    bucket = runtime.deployment.bucket("audit")
    names = [runtime.deployment.delivery_stream(c.name) for c in RDSS.archived()]
    for channel in RDSS.archived():  # the channels' delivery streams, as the stack makes them
        firehose.create_delivery_stream(
            DeliveryStreamName=runtime.deployment.delivery_stream(channel.name),
            DeliveryStreamType="DirectPut",
            ExtendedS3DestinationConfiguration={
                "BucketARN": f"arn:aws:s3:::{runtime.deployment.bucket(RDSS.archive_bucket(channel.name))}",
                "RoleARN": "arn:aws:iam::000000000000:role/rdss-archive",
                "Prefix": channel.archive,
                "CompressionFormat": "UNCOMPRESSED",
            },
        )
    try:
        code, lines = redrive(runtime, capsys, "--processor", "archiver")
        assert code == 0, lines
        assert all(line.startswith("archiver: archived") for line in lines[:-1]), lines
        deadline = time.monotonic() + 120
        entries: list[archive.Entry] = []
        while len({e.identity for e in entries}) < len(published):
            assert time.monotonic() < deadline, f"{len(entries)} entries archived"
            time.sleep(0.5)
            keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="audit/").get("Contents", [])]
            entries = [e for key in keys for e in archive.read(s3.get_object(Bucket=bucket, Key=key)["Body"].read())]
        assert {e.record: e.payload for e in archive.unique(entries)} == {p.record: p.payload for p in published}
    finally:
        for name in names:
            firehose.delete_delivery_stream(DeliveryStreamName=name)
    assert runtime.failed_batches()["archiver"] == 0
    assert len(read_channel(runtime, "input")) == input_records == len(published)  # nothing put back on input
