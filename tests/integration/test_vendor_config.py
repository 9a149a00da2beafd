"""``rdss vendor config`` against the embedded runtime: the configuration it prints is what two
vendors' gateways connect with - one sends, the broker routes, the other receives and moves what
it cannot accept to ``invalid``/``error`` itself - and each role permits exactly the calls its
part needs (every permitted call is made under the role and succeeds - the embedded emulator
enforces the role's policies, tests/integration/test_local_roles.py - and the deployed policy is
evaluated here for it and for every other call of those kinds, on any endpoint)."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import boto3
import orjson
import pytest

from rdss.cli import main
from rdss.deployment.vendors import VendorAccess
from rdss.gateway import Gateway, Received
from rdss.gateway.url import URLError, parse
from rdss.local.accounting import StreamRecord, read_channel, read_stream_records
from rdss.local.emulator import Endpoint
from rdss.local.runtime import Runtime, Settings
from rdss.local.vendor_stack import LocalVendor
from rdss.model import decoration
from rdss.model.retry import Backoff
from rdss.model.workload import Workload
from rdss.repository.dynamodb import create_table
from tests.support.iam import Call, CallRecorder, allowed
from tests.support.listening import listen_until

pytestmark = pytest.mark.integration

PRODUCER, CONSUMER = "acme-repository", "acme-preservation"


@pytest.fixture
def runtime(endpoint: Endpoint, monkeypatch: pytest.MonkeyPatch) -> Iterator[Runtime]:
    vendors = {PRODUCER: LocalVendor(produces=True), CONSUMER: LocalVendor(consumes=("metadata",))}
    runtime = Runtime(endpoint, Settings(environment=f"v{uuid.uuid4().hex[:8]}", shards=1, vendors=vendors))
    runtime.provision()
    # a vendor's own credentials, in the default chain: they only serve to assume its role
    for name, value in endpoint.environment().items():
        monkeypatch.setenv(name, value)
    yield runtime
    runtime.deprovision()


def deployment_url(runtime: Runtime) -> str:
    """The deployment as the commands take it (``--url``)."""
    endpoint = f"?endpoint={runtime.endpoint.url}" if runtime.endpoint.url else ""
    return f"kinesis://{runtime.deployment.environment}{endpoint}"


def vendor_config(runtime: Runtime, name: str, capsys: pytest.CaptureFixture[str], *options: str) -> Any:
    argv = ["vendor", "config", name, "--url", deployment_url(runtime), *options]
    assert main(argv) == 0, capsys.readouterr().err
    return capsys.readouterr().out


def deployed_statements(runtime: Runtime, vendor: str) -> list[dict[str, Any]]:
    """The statements of the managed policy attached to the vendor's role in the emulator."""
    iam = runtime.endpoint.client("iam")
    role = f"rdss-{runtime.deployment.environment}-vendor-{vendor}"
    (attached,) = iam.list_attached_role_policies(RoleName=role)["AttachedPolicies"]
    policy = iam.get_policy(PolicyArn=attached["PolicyArn"])["Policy"]
    version = iam.get_policy_version(PolicyArn=policy["Arn"], VersionId=policy["DefaultVersionId"])
    document = version["PolicyVersion"]["Document"]
    if isinstance(document, str):  # IAM stores documents URL-encoded
        document = json.loads(unquote(document))
    return list(document["Statement"])


def recorded(gateway: Gateway, runtime: Runtime) -> CallRecorder:
    """Records every call the gateway's clients make from now on."""
    account = runtime.endpoint.client("sts").get_caller_identity()["Account"]
    recorder = CallRecorder(account, runtime.endpoint.region)
    recorder.attach(gateway.transport.kinesis)
    recorder.attach(gateway.transport.dynamodb)
    return recorder


def header(message: dict[str, Any]) -> tuple[str, str]:
    return message["messageHeader"]["messageType"], message["messageHeader"]["messageClass"]


def caller(gateway: Gateway, endpoint: Endpoint, client: Any = None) -> str:
    """Whose credentials the gateway's Kinesis client (or ``client``) signs with."""
    signer = (client or gateway.transport.kinesis)._request_signer  # type: ignore[attr-defined]
    credentials = signer._credentials.get_frozen_credentials()
    sts = boto3.client(
        "sts",
        endpoint_url=endpoint.url,
        region_name=endpoint.region,
        aws_access_key_id=credentials.access_key,
        aws_secret_access_key=credentials.secret_key,
        aws_session_token=credentials.token,
    )
    return str(sts.get_caller_identity()["Arn"])


def test_printed_configuration_sends_and_receives(
    runtime: Runtime, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    environment = runtime.deployment.environment
    monkeypatch.setenv("HOME", str(tmp_path))  # the printed ldr= is a file under the gateway host's home
    producer = json.loads(vendor_config(runtime, PRODUCER, capsys, "--json"))
    consumer = json.loads(vendor_config(runtime, CONSUMER, capsys, "--json"))
    assert producer["writes"] == {"input": f"rdss-{environment}-input"}
    assert producer["reads"] == {"responses": f"rdss-{environment}-responses"}
    # a consumer's moves go to invalid and error, put there by itself; it writes nothing else
    assert consumer["writes"] == {"invalid": f"rdss-{environment}-invalid", "error": f"rdss-{environment}-error"}
    assert consumer["reads"] == {
        "metadata": f"rdss-{environment}-metadata",
        "responses": f"rdss-{environment}-responses",
    }
    assert consumer["role_arn"].endswith(f":role/rdss-{environment}-vendor-{CONSUMER}")
    # the Local Data Repository: a SQLite file of the gateway's host, in the URL
    ldr = f"sqlite://~/.local/state/rdss/kinesis-rdss-{environment}.sqlite"
    assert producer["ldr"] == consumer["ldr"] == ldr
    assert parse(producer["url"]).param("ldr") == ldr
    # the shell form exports the same URL, and says what a gateway in AWS names instead
    shell = vendor_config(runtime, PRODUCER, capsys)
    assert re.search(r"^export RDSS_GATEWAY_URL='(.*)'$", shell, re.M)[1] == producer["url"]  # type: ignore[index]
    assert f"# Local Data Repository: ldr={ldr}\n" in shell
    assert "--ldr dynamodb://TABLE" in shell

    messages = Workload(7).mix(12)
    metadata = [
        m
        for m in messages
        if runtime.deployment.topology.route(
            m["messageHeader"]["messageType"], m["messageHeader"]["messageClass"]
        ).channel
        == "metadata"
    ]  # type: ignore[union-attr]
    assert metadata
    with Gateway(producer["url"], application=producer["application"]) as sender:
        assert f":assumed-role/rdss-{environment}-vendor-{PRODUCER}/" in caller(sender, runtime.endpoint)
        calls = {PRODUCER: recorded(sender, runtime)}
        sender.send_all(metadata)
    runtime.drain(timeout=120)

    received = []
    with (
        Gateway(consumer["url"], application=consumer["application"], lease_duration=1.0) as receiver,
        receiver.receiver("metadata", poll_interval=0.05) as inbox,
    ):
        assert f":assumed-role/rdss-{environment}-vendor-{CONSUMER}/" in caller(receiver, runtime.endpoint)
        calls[CONSUMER] = recorded(receiver, runtime)
        while (message := inbox.receive(timeout=2)) is not None:
            received.append(message.message_id)
            inbox.ack(message)
    assert sorted(received) == sorted(m["messageHeader"]["messageId"] for m in metadata)

    # the gateways kept their repositories in the printed file, not in the deployment
    stored = tmp_path / ".local" / "state" / "rdss" / f"kinesis-rdss-{environment}.sqlite"
    assert stored.is_file()
    assert sender.repository.entry(metadata[0]["messageHeader"]["messageId"]).status == "SENT"  # type: ignore[union-attr]
    assert receiver.repository.entry(received[0]).status == "RECEIVED"  # type: ignore[union-attr]

    # Every call the gateways made is one their role allows (by tests.support.iam's reading of the
    # deployed policy, on any endpoint), with no exception: nothing touches the broker's messages table.
    for vendor, recorder in calls.items():
        statements = deployed_statements(runtime, vendor)
        denied = [c for c in recorder.calls if not allowed(statements, c)]
        assert denied == [], denied
        assert not [c for c in recorder.calls if (c.resource or "").endswith(("-messages", "-sequences"))]
    assert {c.action for c in calls[PRODUCER].calls} >= {"kinesis:PutRecords"}
    # ... and the same check refuses another group's rows
    consumer_statements = deployed_statements(runtime, CONSUMER)
    query = next(c for c in calls[CONSUMER].calls if c.action == "dynamodb:Query")
    assert allowed(consumer_statements, query)
    assert not allowed(consumer_statements, replace(query, leading_keys=(f"{PRODUCER}#rdss-{environment}-metadata",)))
    assert {c.action for c in calls[CONSUMER].calls} >= {"kinesis:GetRecords", "dynamodb:Query", "dynamodb:UpdateItem"}

    # the group's rows are exactly the keys the role's dynamodb:LeadingKeys condition admits
    dynamodb = runtime.endpoint.client("dynamodb")
    rows = dynamodb.scan(TableName=runtime.deployment.table("checkpoints"))["Items"]
    access = VendorAccess(CONSUMER, False, ("metadata",), runtime.deployment)
    assert rows
    assert {row["lease"]["S"] for row in rows} <= set(access.lease_keys)


def test_the_roles_carry_the_topology_policy(runtime: Runtime) -> None:
    iam = runtime.endpoint.client("iam")
    for name in runtime.settings.vendors:
        role = iam.get_role(RoleName=f"rdss-{runtime.deployment.environment}-vendor-{name}")["Role"]
        (trust,) = role["AssumeRolePolicyDocument"]["Statement"]
        assert trust["Condition"]["StringEquals"]["sts:ExternalId"]
        document = {"Statement": deployed_statements(runtime, name)}
        sids = [s["Sid"] for s in document["Statement"]]
        # a producer writes input (its messages), a consumer invalid and error (its moves)
        writes = (
            ["PutRecordsOnInput", "EncryptRecordsForInput"]
            if runtime.settings.vendors[name].produces
            else ["MoveRecordsToInvalidAndError", "EncryptMovedRecords"]
        )
        expected = [*writes, "ReadChannels", "DecryptChannelRecords"]
        assert sids[: len(expected)] == expected


def test_an_unknown_vendor_or_stack_is_a_usage_error(runtime: Runtime, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["vendor", "config", "nobody", "--url", deployment_url(runtime)]) == 2
    # the vendors named as vendor config takes them (their Group outputs), not as output keys spell them
    assert "(its vendors: acme-preservation, acme-repository)" in capsys.readouterr().err
    endpoint = f"?endpoint={runtime.endpoint.url}" if runtime.endpoint.url else ""
    assert main(["vendor", "config", PRODUCER, "--url", f"kinesis://no-such-env{endpoint}"]) == 2
    assert "rdss-no-such-env" in capsys.readouterr().err


def test_a_consumer_under_its_role_moves_what_it_cannot_accept(
    runtime: Runtime, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A malformed-messageId record written straight onto ``metadata`` and a message its handler
    always fails on: the consumer, under its role, puts both itself, decorated once, on ``invalid``
    and ``error``, keyed as its group's moves; nothing of it enters ``input``."""
    monkeypatch.setenv("HOME", str(tmp_path))
    producer = json.loads(vendor_config(runtime, PRODUCER, capsys, "--json"))
    consumer = json.loads(vendor_config(runtime, CONSUMER, capsys, "--json"))
    workload = Workload(8)
    poison, fine = workload.message("MetadataCreate", "Event"), workload.message("MetadataUpdate", "Event")
    broken = workload.message("MetadataDelete", "Event")
    broken["messageHeader"]["messageId"] = "not-a-uuid"
    written = orjson.dumps(broken)
    # past the broker, with the deployment's own credentials: no vendor may do this
    runtime.endpoint.client("kinesis").put_record(
        StreamName=runtime.deployment.stream("metadata"), Data=written, PartitionKey="direct"
    )
    with Gateway(producer["url"], application=producer["application"]) as sender:
        sender.send_all([poison, fine])
    runtime.drain(timeout=120)

    poisoned = poison["messageHeader"]["messageId"]
    handled: list[str] = []

    def handler(received: Received) -> None:
        if received.message_id == poisoned:
            raise ValueError("cannot map it to the repository's schema")
        handled.append(received.message_id)

    with Gateway(consumer["url"], application=consumer["application"], lease_duration=1.0) as receiver:
        calls = recorded(receiver, runtime)
        stats = listen_until(
            receiver,
            "metadata",
            handler,
            lambda stats: bool(handled) and (stats.invalid, stats.poison) == (1, 1),
            max_attempts=2,
            backoff=Backoff(base=0.01),
            poll_interval=0.05,
        )
    assert handled == [fine["messageHeader"]["messageId"]]
    assert (stats.invalid, stats.poison) == (1, 1)
    runtime.drain(timeout=120)

    [invalid] = read_records(runtime, "invalid")
    assert orjson.loads(invalid.data)["messageHeader"]["errorCode"] == "GENERR010"
    assert decoration.original(invalid.data) == written  # decorated once: the bytes written, inside
    [error] = read_records(runtime, "error")
    header = orjson.loads(error.data)["messageHeader"]
    assert (header["messageId"], header["errorCode"]) == (poisoned, "GENERR009")
    assert "ValueError: cannot map" in header["errorDescription"]
    assert invalid.partition_key == error.partition_key == f"moved:{CONSUMER}"
    # nothing of the consumer's entered input: only the producer's two messages are there
    assert len(read_channel(runtime, "input")) == 2
    # and every call the consumer made is one its role allows
    statements = deployed_statements(runtime, CONSUMER)
    assert [c for c in calls.calls if not allowed(statements, c)] == []
    assert {c.resource for c in calls.calls if c.action == "kinesis:PutRecords"} == {
        stream_arn(runtime, "invalid"),
        stream_arn(runtime, "error"),
    }


def read_records(runtime: Runtime, channel: str) -> list[StreamRecord]:
    return read_stream_records(runtime.endpoint.client("kinesis"), runtime.deployment.stream(channel))


def stream_arn(runtime: Runtime, channel: str) -> str:
    return f"arn:aws:kinesis:{runtime.endpoint.region}:{account(runtime)}:stream/{runtime.deployment.stream(channel)}"


#: What each vendor's part needs, spelt out here rather than read from rdss.deployment.vendors: PutRecord(s)
#: on input for the producer (its messages), on invalid and error for the consumer (its moves);
#: reads of what it consumes and of responses.
NEEDS = {
    PRODUCER: {"puts": ("input",), "reads": ("responses",)},
    CONSUMER: {"puts": ("invalid", "error"), "reads": ("metadata", "responses")},
}
PUT_ACTIONS = ("kinesis:PutRecord", "kinesis:PutRecords")
READ_ACTIONS = ("kinesis:GetRecords", "kinesis:GetShardIterator", "kinesis:ListShards")
ITEM_ACTIONS = ("dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query", "dynamodb:UpdateItem", "dynamodb:DeleteItem")
CHECKPOINT_ACTIONS = ("dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query", "dynamodb:UpdateItem")


@pytest.mark.parametrize("vendor", [PRODUCER, CONSUMER])
def test_each_role_permits_exactly_the_calls_its_part_needs(
    runtime: Runtime, capsys: pytest.CaptureFixture[str], vendor: str
) -> None:
    """Under the vendor's role, every call its part needs is made on the emulator and succeeds,
    and the deployed policy allows it; every other call of those kinds - a put on any other
    channel (a routed one, ``sequence``; ``input`` for a consumer, ``invalid``/``error`` for a
    producer), a read of any other channel, any item call on any other table or another group's
    rows - the policy denies."""
    config = json.loads(vendor_config(runtime, vendor, capsys, "--json"))
    statements = deployed_statements(runtime, vendor)
    deployment = runtime.deployment
    needs = NEEDS[vendor]
    own = {f"{vendor}#{deployment.stream(channel)}" for channel in needs["reads"]}
    checkpoints = deployment.table("checkpoints")
    with Gateway(config["url"], application=config["application"]) as gateway:
        assert f":assumed-role/rdss-{deployment.environment}-vendor-{vendor}/" in caller(gateway, runtime.endpoint)
        kinesis, dynamodb = gateway.transport.kinesis, gateway.transport.dynamodb  # type: ignore[attr-defined]
        calls = recorded(gateway, runtime)
        for channel in needs["puts"]:
            stream = deployment.stream(channel)
            kinesis.put_record(StreamName=stream, Data=b"a probe", PartitionKey=f"moved:{vendor}")
            kinesis.put_records(StreamName=stream, Records=[{"Data": b"a probe", "PartitionKey": f"moved:{vendor}"}])
        for channel in needs["reads"]:
            stream = deployment.stream(channel)
            [shard, *_] = kinesis.list_shards(StreamName=stream)["Shards"]
            iterator = kinesis.get_shard_iterator(
                StreamName=stream, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
            )["ShardIterator"]
            kinesis.get_records(ShardIterator=iterator, Limit=1)
        for lease in sorted(own):
            key = {"lease": {"S": lease}, "shardId": {"S": "probe"}}
            dynamodb.put_item(TableName=checkpoints, Item=key)
            dynamodb.get_item(TableName=checkpoints, Key=key)
            dynamodb.update_item(
                TableName=checkpoints,
                Key=key,
                UpdateExpression="SET probed = :yes",
                ExpressionAttributeValues={":yes": {"BOOL": True}},
            )
            dynamodb.query(
                TableName=checkpoints,
                KeyConditionExpression="lease = :lease",
                ExpressionAttributeValues={":lease": {"S": lease}},
            )
    made = {(c.action, c.resource, c.leading_keys) for c in calls.calls}
    # every permitted call was made, and succeeded (the client raised on none); the policy allows each
    assert [c for c in calls.calls if not allowed(statements, c)] == []
    assert {a for a, _, _ in made} == {*PUT_ACTIONS, *READ_ACTIONS, *CHECKPOINT_ACTIONS}

    # every other call of those kinds is denied
    others = {f"{other}#{deployment.stream(c)}" for other in NEEDS if other != vendor for c in NEEDS[other]["reads"]}
    for channel in (c.name for c in deployment.topology.channels):
        arn = stream_arn(runtime, channel)
        for action in PUT_ACTIONS:
            assert allowed(statements, Call(action, arn)) == (channel in needs["puts"]), (action, channel)
        for action in READ_ACTIONS:
            assert allowed(statements, Call(action, arn)) == (channel in needs["reads"]), (action, channel)
    for table in (deployment.table(t.name) for t in deployment.topology.tables):
        arn = f"arn:aws:dynamodb:{runtime.endpoint.region}:{account(runtime)}:table/{table}"
        for action in ITEM_ACTIONS:
            for lease in sorted(own | others):
                permitted = table == checkpoints and action in CHECKPOINT_ACTIONS and lease in own
                assert allowed(statements, Call(action, arn, (lease,))) == permitted, (action, table, lease)
            assert not allowed(statements, Call(action, arn, ())), (action, table)  # no key: never


def account(runtime: Runtime) -> str:
    return str(runtime.endpoint.client("sts").get_caller_identity()["Account"])


def test_a_gateway_in_aws_keeps_its_repository_in_a_table_of_its_own(
    runtime: Runtime,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    """In AWS a gateway has no lasting disk: it names a DynamoDB table of the vendor's own, which
    it reaches with the vendor's own credentials - the deployment's role reaches no table but the
    group's checkpoints."""
    table = f"acme-{runtime.deployment.environment}-ldr"
    create_table(runtime.endpoint.client("dynamodb"), table)
    request.addfinalizer(lambda: runtime.endpoint.client("dynamodb").delete_table(TableName=table))
    producer = json.loads(vendor_config(runtime, PRODUCER, capsys, "--json", "--ldr", f"dynamodb://{table}"))
    assert producer["ldr"] == f"dynamodb://{table}"
    monkeypatch.setenv("AWS_EXECUTION_ENV", "AWS_ECS_FARGATE")  # in AWS: SQLite is no default there
    message = Workload(9).message("MetadataCreate", "Event")
    with Gateway(producer["url"], application=producer["application"]) as sender:
        calls = recorded(sender, runtime)
        sender.send(message)
        store = sender.repository.table.client  # type: ignore[attr-defined]
        assert ":assumed-role/" not in caller(sender, runtime.endpoint, store)
        assert ":assumed-role/" in caller(sender, runtime.endpoint)
    key = f"gateway:{PRODUCER}:{message['messageHeader']['messageId']}"
    item = runtime.endpoint.client("dynamodb").get_item(TableName=table, Key={"messageId": {"S": key}})["Item"]
    assert item["status"] == {"S": "SENT"}
    statements = deployed_statements(runtime, PRODUCER)
    assert [c for c in calls.calls if not allowed(statements, c)] == []
    # without ldr= a gateway in AWS is told to name one
    with pytest.raises(URLError, match="ldr=dynamodb://TABLE"):
        Gateway(producer["url"].replace(f"&ldr=dynamodb://{table}", ""), application=PRODUCER)
