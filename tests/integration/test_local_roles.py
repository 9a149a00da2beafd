"""The local runtime holds a vendor's gateway to its role, as AWS does: a produces-only vendor
reading ``metadata`` and a consumes-only vendor putting on ``input`` are refused on the first
day, in one line (AccessDeniedException naming the action and the stream) and exit 2, while
what each role allows works and the runtime's own processors are untouched. A wrong external ID,
or a role that is not there, is refused when the gateway opens.

The embedded emulator's authoriser (rdss.local.authorise) is under test: against another
endpoint (LocalStack's community edition evaluates no IAM) these tests do not apply.
"""

from __future__ import annotations

import contextlib
import io
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from botocore.exceptions import ClientError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rdss.cli import main
from rdss.gateway import Gateway, SendFailed
from rdss.local.accounting import read_channel
from rdss.local.emulator import Endpoint
from rdss.local.runtime import Runtime, Settings
from rdss.local.vendor_stack import LocalVendor
from rdss.model import replay as replays
from rdss.model.workload import Workload
from tests.integration.test_vendor_config import caller, deployed_statements, deployment_url
from tests.support.iam import Call, allowed

pytestmark = pytest.mark.integration

PRODUCER, CONSUMER = "acme", "archive"


@pytest.fixture(scope="module")
def runtime(endpoint: Endpoint) -> Iterator[Runtime]:
    if not endpoint.embedded:
        pytest.skip("the embedded emulator's authoriser is under test; this endpoint evaluates IAM its own way")
    vendors = {PRODUCER: LocalVendor(produces=True), CONSUMER: LocalVendor(consumes=("metadata",))}
    runtime = Runtime(endpoint, Settings(environment=f"r{uuid.uuid4().hex[:8]}", shards=1, vendors=vendors))
    runtime.provision()
    with pytest.MonkeyPatch.context() as patch:
        # the vendors' own credentials, in the default chain: they only serve to assume the roles
        for name, value in endpoint.environment().items():
            patch.setenv(name, value)
        yield runtime
    runtime.deprovision()


@pytest.fixture(scope="module")
def urls(runtime: Runtime) -> dict[str, str]:
    """Each vendor's gateway URL, as ``rdss vendor config --json`` prints it."""
    found = {}
    for vendor in (PRODUCER, CONSUMER):
        argv = ["vendor", "config", vendor, "--url", deployment_url(runtime), "--json"]
        found[vendor] = json.loads(_output(argv))["url"]
    return found


@pytest.fixture(scope="module")
def gateways(urls: dict[str, str]) -> Iterator[dict[str, Gateway]]:
    """One gateway per vendor, for the property test's many calls."""
    opened = {vendor: Gateway(url, application=vendor) for vendor, url in urls.items()}
    yield opened
    for gateway in opened.values():
        gateway.close()


def _output(argv: list[str]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(argv) == 0
    return out.getvalue()


def denied(error: ClientError) -> bool:
    return error.response.get("Error", {}).get("Code") in ("AccessDeniedException", "AccessDenied")


def last_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert lines, err
    return lines[-1]


def test_a_produces_only_vendor_reading_metadata_is_refused(
    runtime: Runtime, urls: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    stream = runtime.deployment.stream("metadata")
    code = main(["tail", "metadata", "--url", urls[PRODUCER], "--application", PRODUCER, "--idle", "1"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1, err
    assert "Traceback" not in err
    assert err.startswith("rdss tail: AccessDeniedException: User: "), err
    assert f"rdss-{runtime.deployment.environment}-vendor-{PRODUCER}/" in err
    assert f"kinesis:ListShards on resource: arn:aws:kinesis:{runtime.endpoint.region}:" in err
    assert err.rstrip().endswith(
        f"stream/{stream} because no identity-based policy allows the kinesis:ListShards action"
    )

    with Gateway(urls[PRODUCER], application=PRODUCER) as gateway:
        with pytest.raises(ClientError) as raised:  # the SDK: at once, not a receiver waiting for ever
            gateway.receiver("metadata").receive(timeout=1)
        assert denied(raised.value)
        # by the stream named, and by an iterator of it obtained elsewhere
        kinesis = gateway.transport.kinesis  # type: ignore[attr-defined]
        own = runtime.endpoint.client("kinesis")
        [shard] = own.list_shards(StreamName=stream)["Shards"]
        with pytest.raises(ClientError) as raised:
            kinesis.get_shard_iterator(StreamName=stream, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON")
        assert denied(raised.value)
        iterator = own.get_shard_iterator(StreamName=stream, ShardId=shard["ShardId"], ShardIteratorType="LATEST")
        with pytest.raises(ClientError) as raised:
            kinesis.get_records(ShardIterator=iterator["ShardIterator"])
        assert denied(raised.value)
        assert f"stream/{stream}" in str(raised.value)


def test_a_consumes_only_vendor_putting_on_input_is_refused(
    runtime: Runtime, urls: dict[str, str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    message = Workload(41).message("MetadataCreate", "Event")
    before = len(read_channel(runtime, "input"))
    path = tmp_path / "create.json"
    path.write_bytes(orjson.dumps(message))
    code = main(["send", str(path), "--url", urls[CONSUMER], "--application", CONSUMER, "--log-format", "json"])
    err = capsys.readouterr().err
    assert code == 2, err
    said = last_line(err)
    assert said.startswith("rdss send: GENERR006: 1 message(s) not sent, e.g. "), err
    assert "(AccessDeniedException: User: " in said
    assert "kinesis:PutRecords on resource: " in said
    assert f"stream/{runtime.deployment.stream('input')} because no identity-based policy allows" in said
    assert "Traceback" not in err

    with Gateway(urls[CONSUMER], application=CONSUMER) as gateway, pytest.raises(SendFailed) as raised:
        gateway.send(message)
    assert [u.error_code for u in raised.value.failed] == ["AccessDeniedException"]
    # accounted for: refused, kept TO_SEND in the vendor's repository, nothing on input
    assert gateway.repository.entry(message["messageHeader"]["messageId"]).status == "TO_SEND"  # type: ignore[union-attr]
    assert len(read_channel(runtime, "input")) == before


def test_what_each_role_allows_works_end_to_end(runtime: Runtime, urls: dict[str, str]) -> None:
    """The producer sends on input, the broker (the runtime's own credentials) routes it to
    metadata, the consumer reads it there and checkpoints its group's rows: every message sent
    is received once."""
    workload = Workload(42)
    messages = [workload.message("MetadataCreate", "Event") for _ in range(3)]
    with Gateway(urls[PRODUCER], application=PRODUCER) as sender:
        sender.send_all(messages)
    runtime.drain(timeout=120)
    received = []
    with (
        Gateway(urls[CONSUMER], application=CONSUMER, lease_duration=1.0) as receiver,
        receiver.receiver("metadata", poll_interval=0.05) as inbox,
    ):
        while (got := inbox.receive(timeout=2)) is not None:
            received.append(got.message_id)
            inbox.ack(got)
    assert sorted(received) == sorted(m["messageHeader"]["messageId"] for m in messages)


def test_a_wrong_external_id_or_a_role_not_there_is_refused_when_the_gateway_opens(
    runtime: Runtime, urls: dict[str, str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "create.json"
    path.write_bytes(orjson.dumps(Workload(43).message("MetadataCreate", "Event")))
    url = urls[PRODUCER]
    wrong = url.replace("external_id=", "external_id=x")
    missing = url.replace(f"vendor-{PRODUCER}", "vendor-nobody")
    for bad in (wrong, missing):
        with pytest.raises(ClientError) as raised:
            Gateway(bad, application=PRODUCER)
        assert denied(raised.value)
        assert "sts:AssumeRole" in str(raised.value)
        assert main(["send", str(path), "--url", bad]) == 2
        err = capsys.readouterr().err
        assert err.startswith("rdss send: AccessDenied: User: "), err
        assert err.count("\n") == 1, err


def test_other_groups_rows_and_the_brokers_tables_are_refused(runtime: Runtime, urls: dict[str, str]) -> None:
    deployment = runtime.deployment
    with Gateway(urls[CONSUMER], application=CONSUMER) as gateway:
        dynamodb = gateway.transport.dynamodb  # type: ignore[attr-defined]
        checkpoints = deployment.table("checkpoints")
        theirs = {"lease": {"S": f"{PRODUCER}#{deployment.stream('responses')}"}, "shardId": {"S": "x"}}
        for call in (
            lambda: dynamodb.put_item(TableName=checkpoints, Item=theirs),
            lambda: dynamodb.scan(TableName=checkpoints),
            lambda: dynamodb.get_item(TableName=deployment.table("messages"), Key={"messageId": {"S": "m"}}),
            lambda: dynamodb.transact_write_items(TransactItems=[{"Put": {"TableName": checkpoints, "Item": theirs}}]),
        ):
            with pytest.raises(ClientError) as raised:
                call()
            assert denied(raised.value)
        # nothing of theirs was written
        assert "Item" not in runtime.endpoint.client("dynamodb").get_item(TableName=checkpoints, Key=theirs)
        # who the caller is, is always answered
        assert f":assumed-role/rdss-{deployment.environment}-vendor-{CONSUMER}/" in caller(gateway, runtime.endpoint)


def test_no_vendor_can_grant_a_replay_or_write_a_replays_progress(runtime: Runtime, urls: dict[str, str]) -> None:
    """A replay's grants (the broker's table) and progress (rows no group's lease key names) are an
    operator's writes: a vendor cannot make the broker route a message again, nor mark a replay
    done or cancelled (rdss.processors.replay)."""
    deployment = runtime.deployment
    checkpoints, messages = deployment.table("checkpoints"), deployment.table("messages")
    for vendor in (PRODUCER, CONSUMER):
        with Gateway(urls[vendor], application=vendor) as gateway:
            dynamodb = gateway.transport.dynamodb  # type: ignore[attr-defined]
            grant = {"messageId": {"S": replays.grant_key("fix", str(uuid.uuid4()))}, "digest": {"S": "d"}}
            replay_row = {"lease": {"S": "replays"}, "shardId": {"S": "fix"}, "status": {"S": "cancelled"}}
            sent_row = {"lease": {"S": "replay:fix"}, "shardId": {"S": "rdss-x-input/shardId-0/1"}}
            cancel = {
                "Key": {"lease": {"S": "replays"}, "shardId": {"S": "fix"}},
                "UpdateExpression": "SET #s = :s",
                "ExpressionAttributeNames": {"#s": "status"},
                "ExpressionAttributeValues": {":s": {"S": "cancelled"}},
            }
            for action, arguments in (
                ("put_item", {"TableName": messages, "Item": grant}),
                ("put_item", {"TableName": checkpoints, "Item": replay_row}),
                ("put_item", {"TableName": checkpoints, "Item": sent_row}),
                ("update_item", {"TableName": checkpoints, **cancel}),
            ):
                with pytest.raises(ClientError) as raised:
                    getattr(dynamodb, action)(**arguments)
                assert denied(raised.value)


PROBES = {
    "kinesis:PutRecords": "puts",
    "kinesis:PutRecord": "puts",
    "kinesis:ListShards": "reads",
    "kinesis:GetShardIterator": "reads",
    "kinesis:GetRecords": "reads",
    "dynamodb:GetItem": "items",
    "dynamodb:PutItem": "items",
    "dynamodb:UpdateItem": "items",
    "dynamodb:DeleteItem": "items",
    "dynamodb:Query": "items",
}


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_the_emulator_answers_every_call_as_the_deployed_policy_does(
    runtime: Runtime, gateways: dict[str, Gateway], data: st.DataObject
) -> None:
    """Any vendor, any of the calls a gateway makes, on any channel or table, with its own group's
    key or another's: the call made under the role is refused exactly when the role's deployed
    policy does not allow it, and succeeds otherwise."""
    deployment = runtime.deployment
    vendor = data.draw(st.sampled_from([PRODUCER, CONSUMER]))
    action = data.draw(st.sampled_from(sorted(PROBES)))
    gateway = gateways[vendor]
    statements = deployed_statements(runtime, vendor)
    account = runtime.endpoint.client("sts").get_caller_identity()["Account"]
    region = runtime.endpoint.region
    if PROBES[action] == "items":
        table = data.draw(st.sampled_from(list(deployment.topology.tables)))
        group = data.draw(st.sampled_from([PRODUCER, CONSUMER]))
        channel = data.draw(st.sampled_from(["metadata", "responses"]))
        value = f"{group}#{deployment.stream(channel)}"
        key = {table.partition_key: {"S": value}} | ({table.sort_key: {"S": "probe"}} if table.sort_key else {})
        call = Call(action, f"arn:aws:dynamodb:{region}:{account}:table/{deployment.table(table.name)}", (value,))
        made = _item_call(gateway.transport.dynamodb, action, deployment.table(table.name), table.partition_key, key)  # type: ignore[attr-defined]
    else:
        channel = data.draw(st.sampled_from([c.name for c in deployment.topology.channels]))
        stream = deployment.stream(channel)
        call = Call(action, f"arn:aws:kinesis:{region}:{account}:stream/{stream}")
        made = _stream_call(gateway.transport.kinesis, runtime.endpoint.client("kinesis"), action, stream)  # type: ignore[attr-defined]
    refused: ClientError | None = None
    try:
        made()
    except ClientError as error:
        refused = error
    if refused is None:
        assert allowed(statements, call), call
    else:
        assert denied(refused), refused
        assert not allowed(statements, call), call


def _item_call(dynamodb: Any, action: str, table: str, partition_key: str, key: dict[str, Any]) -> Any:
    if action == "dynamodb:GetItem":
        return lambda: dynamodb.get_item(TableName=table, Key=key)
    if action == "dynamodb:PutItem":
        return lambda: dynamodb.put_item(TableName=table, Item=key)
    if action == "dynamodb:UpdateItem":
        return lambda: dynamodb.update_item(
            TableName=table, Key=key, UpdateExpression="SET probed = :p", ExpressionAttributeValues={":p": {"N": "1"}}
        )
    if action == "dynamodb:DeleteItem":
        return lambda: dynamodb.delete_item(TableName=table, Key=key)
    return lambda: dynamodb.query(
        TableName=table,
        KeyConditionExpression="#k = :v",
        ExpressionAttributeNames={"#k": partition_key},
        ExpressionAttributeValues={":v": key[partition_key]},
    )


def _stream_call(kinesis: Any, own: Any, action: str, stream: str) -> Any:
    [shard] = own.list_shards(StreamName=stream)["Shards"]
    if action == "kinesis:PutRecords":
        return lambda: kinesis.put_records(StreamName=stream, Records=[{"Data": b"a probe", "PartitionKey": "p"}])
    if action == "kinesis:PutRecord":
        return lambda: kinesis.put_record(StreamName=stream, Data=b"a probe", PartitionKey="p")
    if action == "kinesis:ListShards":
        return lambda: kinesis.list_shards(StreamName=stream)
    if action == "kinesis:GetShardIterator":
        return lambda: kinesis.get_shard_iterator(
            StreamName=stream, ShardId=shard["ShardId"], ShardIteratorType="LATEST"
        )
    iterator = own.get_shard_iterator(StreamName=stream, ShardId=shard["ShardId"], ShardIteratorType="LATEST")
    return lambda: kinesis.get_records(ShardIterator=iterator["ShardIterator"], Limit=1)


def test_every_other_service_refuses_a_vendor_in_its_own_form(runtime: Runtime, gateways: dict[str, Gateway]) -> None:
    """Buckets (S3's REST and XML), IAM and CloudFormation (the query protocol), KMS and
    Firehose (JSON): nothing a vendor's role does not grant, each refusal read by boto3 as
    AccessDenied(Exception) - and who the caller is stays answered."""
    import boto3

    signer = gateways[CONSUMER].transport.kinesis._request_signer  # type: ignore[attr-defined]
    frozen = signer._credentials.get_frozen_credentials()
    session = boto3.Session(
        aws_access_key_id=frozen.access_key,
        aws_secret_access_key=frozen.secret_key,
        aws_session_token=frozen.token,
        region_name=runtime.endpoint.region,
    )

    def client(service: str) -> Any:
        return session.client(service, endpoint_url=runtime.endpoint.url)

    bucket = runtime.deployment.bucket("audit")
    for call in (
        lambda: client("s3").list_objects_v2(Bucket=bucket),
        lambda: client("s3").put_object(Bucket=bucket, Key="k", Body=b"x"),
        lambda: client("iam").list_roles(),
        lambda: client("cloudformation").describe_stacks(),
        lambda: client("kms").list_keys(),
        lambda: client("firehose").list_delivery_streams(),
        lambda: client("sts").assume_role(RoleArn="arn:aws:iam::123456789012:role/any", RoleSessionName="chained"),
    ):
        with pytest.raises(ClientError) as raised:
            call()
        assert denied(raised.value), raised.value
    kept = runtime.endpoint.client("s3").list_objects_v2(Bucket=bucket, Prefix="k").get("Contents", [])
    assert [o["Key"] for o in kept if o["Key"] == "k"] == []  # the refused put wrote nothing
    assert f"vendor-{CONSUMER}/" in client("sts").get_caller_identity()["Arn"]
