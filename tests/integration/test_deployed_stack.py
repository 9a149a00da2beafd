"""The CDK app's stack as a user deploys it, by CloudFormation (LocalStack's), its functions run by
LocalStack from their deployed assets, and then deleted.

The default synthesis - custom resources and all: the buckets' auto-delete provider (a Node
function of the CDK's) runs when the stack is created and when it is deleted - built for this
machine's architecture (``-c lambda_architecture``: LocalStack runs functions natively, see
tests/support/localstack/executor). Nothing of the processors runs in this process: the test
puts records on streams, changes what an operator or a fault could change (a schedule, a
function's configuration, a table), and reads what the deployed functions did - streams, the
on-failure queues, the functions' own log groups, whose REPORT lines it sums up at the end.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
import uuid
import warnings
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson
import pytest

from rdss.archive import entries as archive
from rdss.aws.putrecords import PutRecordsBatcher, Record
from rdss.deployment.topology import RDSS, Deployment, from_environment
from rdss.host.pointers import gateway_url
from rdss.local.accounting import read_stream
from rdss.local.emulator import Endpoint
from rdss.model.sequences import split
from rdss.model.workload import Workload, Workload4
from tests.support import cloudformation
from tests.support.deployed import FunctionLog, HangingProxy, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(2700)]

ACCOUNT = "000000000000"  # LocalStack's
ROUTED = [c.name for c in RDSS.channels_of("routed")]
#: The broker's timeout while its DynamoDB hangs (retries_a_batch_killed_at_its_timeout)
HUNG_TIMEOUT = 15
#: The summary of the functions' logs, also kept where `make test`'s logs are
SUMMARY = Path(__file__).resolve().parents[2] / "build" / "test-logs" / "deployed-functions.txt"


def unmodelled(template: dict[str, Any], endpoint: Endpoint) -> dict[str, int]:
    """Resource types whose service this endpoint does not run (CloudFormation accepts them
    without creating anything): LocalStack community has no Glue and no Athena."""
    import json
    import urllib.request

    with urllib.request.urlopen(f"{endpoint.url}/_localstack/health", timeout=5) as response:
        services = json.load(response)["services"]
    counts: Counter[str] = Counter()
    for resource in template["Resources"].values():
        kind = resource["Type"]
        if kind.startswith("Custom::"):
            continue  # run by their provider functions
        service = kind.split("::")[1].lower()
        service = {"kinesisfirehose": "firehose"}.get(service, service)
        if services.get(service) not in ("available", "running"):
            counts[kind] += 1
    return dict(counts)


class Stack:
    """The deployed stack as the test reaches it: names, clients, its functions."""

    def __init__(self, endpoint: Endpoint, config: Any, resources: list[dict[str, Any]]) -> None:
        self.endpoint = endpoint
        self.config = config
        self.resources = resources
        self.clients: dict[str, Any] = {}
        self.functions = {p.name: f"rdss-{config.name}-{p.name}" for p in RDSS.processors}
        #: what the phases measured, for the summary
        self.notes: list[str] = []
        variables = self.client("lambda").get_function_configuration(FunctionName=self.functions["broker"])
        names = from_environment(variables["Environment"]["Variables"])
        self.deployment = Deployment(config.name, RDSS, bucket_names=dict(names.buckets))

    def client(self, service: str) -> Any:
        if service not in self.clients:
            self.clients[service] = self.endpoint.client(service)
        return self.clients[service]

    def physical(self, resource_type: str, logical_prefix: str = "") -> list[str]:
        return [
            r["PhysicalResourceId"]
            for r in self.resources
            if r["ResourceType"] == resource_type and r["LogicalResourceId"].startswith(logical_prefix)
        ]

    # -- streams -------------------------------------------------------------------------------
    def publish(self, payloads: list[bytes], partition_key: str | None = None) -> None:
        stream = self.deployment.stream("input")
        records = [Record(stream, p, partition_key or uuid.uuid4().hex) for p in payloads]
        report = PutRecordsBatcher(self.client("kinesis")).put(records)
        assert report.ok, report.failed[:1]

    def read(self, channel: str) -> list[dict[str, Any]]:
        return [orjson.loads(r) for r in read_stream(self.client("kinesis"), self.deployment.stream(channel))]

    def routed_ids(self) -> set[str]:
        return {m["messageHeader"]["messageId"] for channel in ROUTED for m in self.read(channel)}

    def parts_released(self, sequence: str) -> list[int]:
        return [
            m["messageHeader"]["messageSequence"]["position"]
            for channel in ROUTED
            for m in self.read(channel)
            if m["messageHeader"].get("messageSequence", {}).get("sequence") == sequence
        ]

    def moved(self, sequence: str, channel: str = "error") -> list[dict[str, Any]]:
        return [
            m for m in self.read(channel) if m["messageHeader"].get("messageSequence", {}).get("sequence") == sequence
        ]

    # -- queues and functions ------------------------------------------------------------------
    def parked(self, processor: str) -> int:
        sqs = self.client("sqs")
        url = sqs.get_queue_url(QueueName=f"{self.functions[processor]}-on-failure")["QueueUrl"]
        attributes = sqs.get_queue_attributes(
            QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
        )["Attributes"]
        return int(attributes["ApproximateNumberOfMessages"]) + int(attributes["ApproximateNumberOfMessagesNotVisible"])

    def log(self, function: str) -> FunctionLog:
        return FunctionLog.read(self.client("logs"), function)

    def reconfigure(self, processor: str, **changes: Any) -> None:
        lambda_ = self.client("lambda")
        lambda_.update_function_configuration(FunctionName=self.functions[processor], **changes)
        lambda_.get_waiter("function_updated_v2").wait(FunctionName=self.functions[processor])


def test_the_stack_deploys_runs_its_functions_and_is_deleted(endpoint: Endpoint, tmp_path: Path) -> None:
    if endpoint.embedded:
        pytest.skip("deployed by LocalStack's CloudFormation (make test-localstack); moto's models too few types")
    from tests.cdk.conftest import synthesize

    started = time.monotonic()
    architecture = {"x86_64": "x86_64", "aarch64": "arm64"}[platform.machine()]
    synthesized = synthesize(
        "dev", tmp_path / "cdk.out", account=ACCOUNT, region=endpoint.region, lambda_architecture=architecture
    )
    stack_name = synthesized.stack.stack_name
    template = synthesized.json
    assert [r for r in template["Resources"].values() if r["Type"] == "Custom::S3AutoDeleteObjects"]
    s3, cfn = endpoint.client("s3"), endpoint.client("cloudformation")
    bucket = cloudformation.bootstrap(s3, endpoint.client("ssm"), ACCOUNT, endpoint.region)
    key = cloudformation.publish_assets(s3, synthesized.outdir, stack_name, ACCOUNT, endpoint.region)
    cfn.create_stack(
        StackName=stack_name,
        TemplateURL=f"{endpoint.url}/{bucket}/{key}",
        Capabilities=["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM"],
    )
    buckets: list[str] = []
    provider: list[str] = []
    custom_resources = 0
    problems: list[str] = []
    summary: list[str] = []
    phases: list[str] = []
    stack: Stack | None = None
    try:
        created = cloudformation.wait(cfn, stack_name, "CREATE_COMPLETE", timeout=1500)
        resources = cfn.describe_stack_resources(StackName=stack_name)["StackResources"]
        summary.append(
            f"{stack_name}: {created['StackStatus']} ({len(resources)} resources) "
            f"{time.monotonic() - started:.0f} s after synthesis began"
        )
        assert all(r["ResourceStatus"] == "CREATE_COMPLETE" for r in resources)
        stack = Stack(endpoint, synthesized.config, resources)
        buckets = stack.physical("AWS::S3::Bucket")
        provider = stack.physical("AWS::Lambda::Function", "CustomS3AutoDeleteObjectsCustomResourceProvider")
        [handler] = provider
        custom_resources = len(stack.physical("Custom::S3AutoDeleteObjects"))
        # one Create per custom resource, each logged a moment after its invocation: wait for all
        wait_for(
            "the auto-delete provider's Create of every custom resource",
            lambda: len(stack.log(handler).containing('"Create"')) >= custom_resources,
        )
        check_topology(stack)

        for phase in (
            routes_traffic,
            reassembles_a_sequence,
            sweeps_on_schedule,
            isolates_a_poison_record,
            retries_a_batch_killed_at_its_timeout,
            parks_a_batch_and_redrives_it,
            archives_input,
        ):
            began = time.monotonic()
            try:
                problems += phase(stack) or []
            finally:  # how long each took, the one that failed too: where a slow run spent its time
                phases.append(f"{phase.__name__} {time.monotonic() - began:.0f} s")
        missing = unmodelled(template, endpoint)
        assert set(missing) <= {t for t in missing if t.startswith(("AWS::Glue::", "AWS::Athena::"))}, missing
        if missing:
            summary.append(
                "LocalStack community does not model (accepted, nothing created): "
                + ", ".join(f"{t} x{n}" for t, n in sorted(missing.items()))
            )
        summary += [stack.log(stack.functions[p.name]).summary() for p in RDSS.processors]
    finally:
        try:
            cfn.delete_stack(StackName=stack_name)
            cloudformation.wait(cfn, stack_name, "DELETE_COMPLETE", timeout=900)
        finally:
            cloudformation.unbootstrap(s3, endpoint.client("ssm"), bucket)
            if provider:
                summary.append(FunctionLog.read(endpoint.client("logs"), provider[0]).summary())
            summary += problems + (stack.notes if stack else [])
            if phases:
                summary.append("phases: " + ", ".join(phases))
            SUMMARY.parent.mkdir(parents=True, exist_ok=True)
            SUMMARY.write_text("\n".join(summary) + "\n")
        warnings.warn("deployed functions:\n  " + "\n  ".join(summary), stacklevel=1)
    # the auto-delete provider emptied the buckets when the stack was deleted, so they could go
    assert not [b for b in buckets if b in {x["Name"] for x in s3.list_buckets()["Buckets"]}]
    # (LocalStack writes a function's log a moment after the invocation's result)
    wait_for(
        "the auto-delete provider's Delete of every custom resource",
        lambda: len(FunctionLog.read(endpoint.client("logs"), provider[0]).containing('"Delete"')) >= custom_resources,
        timeout=60,
    )
    assert not problems, problems


def check_topology(stack: Stack) -> None:
    """The deployed streams, tables, buckets, delivery streams, queues, topic and mappings are
    the topology's, the mappings enabled."""
    config, deployment = stack.config, stack.deployment
    kinesis, dynamodb = stack.client("kinesis"), stack.client("dynamodb")
    arns = {}
    for channel in RDSS.channels:
        summary = kinesis.describe_stream_summary(StreamName=deployment.stream(channel.name))
        description = summary["StreamDescriptionSummary"]
        assert description["StreamStatus"] == "ACTIVE"
        assert description["OpenShardCount"] == config.capacity.shards[channel.name]
        arns[channel.name] = description["StreamARN"]
    for table in RDSS.tables:
        keys = {
            k["KeyType"]: k["AttributeName"]
            for k in dynamodb.describe_table(TableName=deployment.table(table.name))["Table"]["KeySchema"]
        }
        assert keys["HASH"] == table.partition_key
        assert keys.get("RANGE") == table.sort_key
    existing = {b["Name"] for b in stack.client("s3").list_buckets()["Buckets"]}
    assert {deployment.bucket(b.name) for b in RDSS.buckets} <= existing
    # one Direct PUT delivery stream per archived channel, which the deployed archiver writes
    firehose = stack.client("firehose")
    listed = set(firehose.list_delivery_streams()["DeliveryStreamNames"])
    expected = {deployment.delivery_stream(c.name) for c in RDSS.archived()}
    assert expected <= listed
    for name in expected:
        description = firehose.describe_delivery_stream(DeliveryStreamName=name)["DeliveryStreamDescription"]
        assert description["DeliveryStreamType"] == "DirectPut"
    lambda_ = stack.client("lambda")
    for processor in RDSS.processors:
        function = lambda_.get_function_configuration(FunctionName=stack.functions[processor.name])
        assert function["Architectures"] == [stack.config.lambda_architecture]
        mappings = lambda_.list_event_source_mappings(FunctionName=stack.functions[processor.name])
        assert sorted(m["EventSourceArn"] for m in mappings["EventSourceMappings"]) == sorted(
            arns[source] for source in processor.sources
        )
        batch_size = config.archive.batch_size if processor.archives else config.event_source.batch_size
        for mapping in mappings["EventSourceMappings"]:
            assert mapping["BatchSize"] == batch_size
            assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
            assert mapping["BisectBatchOnFunctionError"] is True
            assert mapping["DestinationConfig"]["OnFailure"]["Destination"].endswith(
                f"{stack.functions[processor.name]}-on-failure"
            )
            assert mapping["State"] == "Enabled"


def routes_traffic(stack: Stack) -> None:
    """Messages put on ``input`` reach their channels: routed by the deployed broker, whatever
    their version (a 4.0.0 PreservationEvent and MetadataCreate beside 3.0.2 traffic)."""
    seed = uuid.uuid4().int % 1000
    published = Workload(seed).mix(20)
    spoken_4 = [Workload4(seed).message(t, "Event") for t in ("PreservationEvent", "MetadataCreate")]
    stack.publish([orjson.dumps(m) for m in (*published, *spoken_4)])
    ids = {m["messageHeader"]["messageId"] for m in (*published, *spoken_4)}
    wait_for("the broker routing 22 messages", lambda: ids <= stack.routed_ids())
    on_metadata = {m["messageHeader"]["messageId"]: m["messageHeader"] for m in stack.read("metadata")}
    for message in spoken_4:
        header = on_metadata[message["messageHeader"]["messageId"]]
        assert (header["version"], header["messageType"]) == ("4.0.0", message["messageHeader"]["messageType"])


def reassembles_a_sequence(stack: Stack) -> None:
    """A sequence's parts, put on ``input``, come out whole and in order: the deployed broker
    stages them on ``sequence``, the deployed sequencer releases them."""
    parts = split(Workload(uuid.uuid4().int % 1000).large(30_000), 12_000)
    sequence = parts[0]["messageHeader"]["messageSequence"]["sequence"]
    stack.publish([orjson.dumps(p) for p in parts], partition_key=sequence)
    released = wait_for("the sequencer releasing a sequence", lambda: stack.parts_released(sequence))
    assert released == list(range(1, len(parts) + 1))


def sweeps_on_schedule(stack: Stack) -> None:
    """A sequence whose message expires before its last part comes is moved to ``error``
    (GENERR003) by the deployed sweep, invoked as its EventBridge schedule invokes it (an
    asynchronous invocation with a Scheduled Event: LocalStack's scheduler keeps its own time)."""
    [rule] = stack.physical("AWS::Events::Rule")
    events, lambda_ = stack.client("events"), stack.client("lambda")
    sweep = lambda_.get_function_configuration(FunctionName=stack.functions["sweep"])["FunctionArn"]
    assert sweep in {t["Arn"] for t in events.list_targets_by_rule(Rule=rule)["Targets"]}
    parts = split(Workload(uuid.uuid4().int % 1000).large(30_000), 12_000)
    expiry = datetime.now(UTC) + timedelta(seconds=15)
    expires = expiry.isoformat(timespec="seconds").replace("+00:00", "Z")
    parts[0]["messageHeader"]["messageTimings"]["expirationTimestamp"] = expires
    sequence = parts[0]["messageHeader"]["messageSequence"]["sequence"]
    stack.publish([orjson.dumps(parts[0])], partition_key=sequence)  # the rest never comes
    staged = stack.deployment.bucket("staging")
    s3 = stack.client("s3")
    wait_for(
        "the part staged", lambda: s3.list_objects_v2(Bucket=staged, Prefix=f"sequences/{sequence}/").get("KeyCount")
    )
    time.sleep(max(0.0, (expiry - datetime.now(UTC)).total_seconds()) + 2)
    scheduled = {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": ACCOUNT,
        "time": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "region": stack.endpoint.region,
        "resources": [events.describe_rule(Name=rule)["Arn"]],
        "detail": {},
    }
    lambda_.invoke(FunctionName=sweep, InvocationType="Event", Payload=orjson.dumps(scheduled))
    moved = wait_for("the sweep moving an expired sequence", lambda: stack.moved(sequence))
    assert [m["messageHeader"]["errorCode"] for m in moved] == ["GENERR003"]


def isolates_a_poison_record(stack: Stack) -> list[str]:
    """A record whose handling raises whatever is tried - the last part of a sequence, one of
    whose staged parts is gone from S3 (``NoSuchKey`` is the record's failure, not the
    infrastructure's: each try counts an attempt) - is retried by the mapping from that record,
    then moved to ``error`` (GENERR009) after its attempts, and the records after it on its
    shard (a whole other sequence, held back meanwhile) go on: nothing is parked
    (docs/contributors.md, "The sequencer").
    Returns what did not happen (checked at the end, so the later phases still run)."""
    poison = split(Workload(uuid.uuid4().int % 1000).large(20_000), 12_000)
    neighbours = split(Workload(uuid.uuid4().int % 1000).large(20_000), 12_000)
    poisoned = poison[0]["messageHeader"]["messageSequence"]["sequence"]
    beside = neighbours[0]["messageHeader"]["messageSequence"]["sequence"]
    s3, staging = stack.client("s3"), stack.deployment.bucket("staging")
    # every part but the last, staged; then one of them lost: the last part completes the
    # sequence, and reassembling it fails for want of that part on every try
    stack.publish([orjson.dumps(p) for p in poison[:-1]], partition_key=poisoned)

    def staged() -> list[dict[str, Any]]:
        found = s3.list_objects_v2(Bucket=staging, Prefix=f"sequences/{poisoned}/").get("Contents", [])
        return found if len(found) == len(poison) - 1 else []

    lost = wait_for("the first parts staged", staged)[0]["Key"]
    s3.delete_object(Bucket=staging, Key=lost)
    # one PutRecords: the broker passes them on together, the sequencer gets them in one batch
    stack.publish([orjson.dumps(poison[-1]), *(orjson.dumps(p) for p in neighbours)], partition_key=poisoned)
    allowed = stack.config.event_source.record_attempts
    problems = []
    try:
        released = wait_for("the poison's neighbours released", lambda: stack.parts_released(beside))
        if released != list(range(1, len(neighbours) + 1)):
            problems.append(f"poison record: its neighbours released as {released}")
        moved = wait_for("the poison record moved to error", lambda: stack.moved(poisoned), timeout=180)
        codes = [m["messageHeader"]["errorCode"] for m in moved]
        description = moved[0]["messageHeader"].get("errorDescription", "")
        if codes != ["GENERR009"] or f"{allowed} times" not in description or "NoSuchKey" not in description:
            problems.append(f"poison record: moved with {codes}: {description!r}")
        if [m["messageHeader"]["messageSequence"]["position"] for m in moved] != [len(poison)]:
            problems.append("poison record: not the last part moved")
    except AssertionError as error:
        problems.append(f"poison record: {error}")
    # each attempt was an invocation of the mapping's, retried from the poison record
    tries = stack.log(stack.functions["sequencer"]).containing("NoSuchKey")
    attempts = sorted({a for a in range(1, allowed + 1) for line in tries if f"(attempt {a} of {allowed})" in line})
    if attempts != list(range(1, allowed + 1)):
        problems.append(f"poison record: the sequencer's log shows attempts {attempts} of {allowed}")
    if stack.parked("sequencer"):
        problems.append("poison record: a batch of the sequencer was parked in its on-failure queue")
    return problems


def retries_a_batch_killed_at_its_timeout(stack: Stack) -> None:
    """The broker's DynamoDB stops answering its first connection; the function is killed at its
    timeout, the mapping retries the batch, and the new runtime routes it."""
    lambda_ = stack.client("lambda")
    before = lambda_.get_function_configuration(FunctionName=stack.functions["broker"])
    address = urlsplit(stack.endpoint.url)
    proxy = HangingProxy((address.hostname or "127.0.0.1", address.port or 80))
    try:
        variables = {**before["Environment"]["Variables"], "AWS_ENDPOINT_URL_DYNAMODB": proxy.url}
        # under the processors' read timeout (20 s, rdss.aws.clients.CLIENT_CONFIG), so Lambda's timeout
        # cuts the hung call; and room for the retry: a new runtime (its init counts in the
        # invocation's duration) whose first batch loads the validators, on a loaded machine
        stack.reconfigure("broker", Timeout=HUNG_TIMEOUT, Environment={"Variables": variables})
        [message] = Workload(uuid.uuid4().int % 1000).mix(1)
        stack.publish([orjson.dumps(message)])
        try:
            wait_for("the retried batch routed", lambda: message["messageHeader"]["messageId"] in stack.routed_ids())
        finally:  # the invocations from the kill on, routed or not: what a slow retry took
            log = stack.log(stack.functions["broker"])
            reports = log.reports
            killed_at = next((i for i, r in enumerate(reports) if r.status == "timeout"), len(reports))
            taken = [f"{r.fields.get('Duration', '?')} ({r.status or 'ok'})" for r in reports[killed_at:]]
            stack.notes.append(f"broker with a hung DynamoDB, from the kill on: {', '.join(taken) or 'no kill'}")
        killed = f"Task timed out after {HUNG_TIMEOUT}.00 seconds"
        assert log.containing(killed), "the broker was not killed at its timeout"
        assert [r for r in log.reports if r.status == "timeout"]
        assert proxy.accepted >= 2  # the hung connection, then the retry's
    finally:
        stack.reconfigure("broker", Timeout=before["Timeout"], Environment=before["Environment"])
        proxy.close()
    assert not stack.parked("broker")


def parks_a_batch_and_redrives_it(stack: Stack) -> None:
    """With the ``messages`` table gone the broker cannot handle a batch: the mapping gives up
    and parks it in the on-failure queue; once the table is back, ``rdss redrive`` puts its
    records back and the broker routes them."""
    dynamodb = stack.client("dynamodb")
    table = stack.deployment.table("messages")
    description = dynamodb.describe_table(TableName=table)["Table"]
    dynamodb.delete_table(TableName=table)
    dynamodb.get_waiter("table_not_exists").wait(TableName=table)
    published = Workload(uuid.uuid4().int % 1000).mix(3)
    try:
        stack.publish([orjson.dumps(m) for m in published])
        wait_for("the batch parked", lambda: stack.parked("broker"), timeout=300)
    finally:
        dynamodb.create_table(
            TableName=table,
            KeySchema=description["KeySchema"],
            AttributeDefinitions=description["AttributeDefinitions"],
            BillingMode="PAY_PER_REQUEST",
        )
        dynamodb.get_waiter("table_exists").wait(TableName=table)
    ids = {m["messageHeader"]["messageId"] for m in published}
    assert not ids & stack.routed_ids()
    environment = {**os.environ, **stack.endpoint.environment()}
    deployment_url = gateway_url(stack.config.name, stack.endpoint.url, stack.endpoint.region)
    done = subprocess.run(
        [sys.executable, "-m", "rdss", "redrive", "--url", deployment_url, "--processor", "broker"],
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    wait_for("the redriven records routed", lambda: ids <= stack.routed_ids())
    assert not stack.parked("broker")


def archives_input(stack: Stack) -> None:
    """What was put on ``input`` reaches the audit bucket as archive entries, each record once:
    written by the deployed archiver (invoked by its mapping on ``input``) through the deployed
    Direct PUT delivery stream."""
    s3, audit = stack.client("s3"), stack.deployment.bucket("audit")
    published = [orjson.dumps(m) for m in Workload(uuid.uuid4().int % 1000).mix(15)]
    stack.publish(published)

    def entries() -> list[archive.Entry]:
        objects = [
            s3.get_object(Bucket=audit, Key=o["Key"])["Body"].read()
            for page in s3.get_paginator("list_objects_v2").paginate(Bucket=audit)
            for o in page.get("Contents", [])
        ]
        return [e for e in archive.unique(e for data in objects for e in archive.read(data)) if e.payload in published]

    def every_one() -> list[archive.Entry] | None:
        found = entries()
        return found if len(found) >= len(published) else None

    archived = wait_for("the deployed archiver archiving every record put on input", every_one, timeout=300)
    assert sorted(e.payload for e in archived) == sorted(published)  # each record's bytes, once
