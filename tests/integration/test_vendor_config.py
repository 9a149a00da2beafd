"""``rdss vendor config`` against the embedded runtime: the configuration it prints is what two
vendors' gateways connect with - one sends, the broker routes, the other receives."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from dataclasses import replace
from typing import Any
from urllib.parse import unquote

import boto3
import pytest

from rdss.cli import main
from rdss.gateway import Gateway
from rdss.local.emulator import Endpoint
from rdss.local.runtime import Runtime, Settings
from rdss.local.vendors import LocalVendor
from rdss.vendors import VendorAccess
from tests.support.iam import CallRecorder, allowed
from tools.workload import Workload

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


def vendor_config(runtime: Runtime, name: str, capsys: pytest.CaptureFixture[str], *options: str) -> Any:
    argv = ["vendor", "config", name, "--env", runtime.deployment.environment, *options]
    if runtime.endpoint.url:
        argv += ["--endpoint", runtime.endpoint.url]
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


def caller(gateway: Gateway, endpoint: Endpoint) -> str:
    """Whose credentials the gateway's Kinesis client signs with."""
    credentials = gateway.transport.kinesis._request_signer._credentials.get_frozen_credentials()  # type: ignore[attr-defined]
    sts = boto3.client(
        "sts",
        endpoint_url=endpoint.url,
        region_name=endpoint.region,
        aws_access_key_id=credentials.access_key,
        aws_secret_access_key=credentials.secret_key,
        aws_session_token=credentials.token,
    )
    return str(sts.get_caller_identity()["Arn"])


def test_printed_configuration_sends_and_receives(runtime: Runtime, capsys: pytest.CaptureFixture[str]) -> None:
    environment = runtime.deployment.environment
    producer = json.loads(vendor_config(runtime, PRODUCER, capsys, "--json"))
    consumer = json.loads(vendor_config(runtime, CONSUMER, capsys, "--json"))
    assert producer["writes"] == {"input": f"rdss-{environment}-input"}
    assert producer["reads"] == {"responses": f"rdss-{environment}-responses"}
    assert consumer["writes"] == {}
    assert consumer["reads"] == {
        "metadata": f"rdss-{environment}-metadata",
        "responses": f"rdss-{environment}-responses",
    }
    assert consumer["role_arn"].endswith(f":role/rdss-{environment}-vendor-{CONSUMER}")
    # the shell form exports the same URL
    shell = vendor_config(runtime, PRODUCER, capsys)
    assert re.search(r"^export RDSS_GATEWAY_URL='(.*)'$", shell, re.M)[1] == producer["url"]  # type: ignore[index]

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

    # Every call the gateways made is one their role allows (the emulator does not check IAM:
    # tests.support.iam does) - except the Local Data Repository's, which is still kept in the
    # broker's messages table; it moves to a store of the vendor's own (issue 14 item 2).
    messages = f"arn:aws:dynamodb:{runtime.endpoint.region}:"
    for vendor, recorder in calls.items():
        statements = deployed_statements(runtime, vendor)
        assert {c.action for c in recorder.calls} >= {"dynamodb:PutItem"}, recorder.calls
        denied = [c for c in recorder.calls if not allowed(statements, c)]
        ldr = [c for c in denied if (c.resource or "").startswith(messages) and c.resource.endswith("-messages")]
        assert denied == ldr, denied
    assert {c.action for c in calls[PRODUCER].calls} >= {"kinesis:PutRecords"}
    # ... and the same check refuses what the brief forbids: a consumer producing, another group's rows
    consumer_statements = deployed_statements(runtime, CONSUMER)
    put = next(c for c in calls[PRODUCER].calls if c.action == "kinesis:PutRecords")
    assert not allowed(consumer_statements, put)
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
    for name, vendor in runtime.settings.vendors.items():
        role = iam.get_role(RoleName=f"rdss-{runtime.deployment.environment}-vendor-{name}")["Role"]
        (trust,) = role["AssumeRolePolicyDocument"]["Statement"]
        assert trust["Condition"]["StringEquals"]["sts:ExternalId"]
        document = {"Statement": deployed_statements(runtime, name)}
        sids = [s["Sid"] for s in document["Statement"]]
        expected = ["ReadChannels", "DecryptChannelRecords", "OwnGroupCheckpoints"]
        if vendor.produces:
            expected = ["PutRecordsOnInput", "EncryptRecordsForInput", *expected]
        assert sids[: len(expected)] == expected


def test_an_unknown_vendor_or_stack_is_a_usage_error(runtime: Runtime, capsys: pytest.CaptureFixture[str]) -> None:
    endpoint = ["--endpoint", runtime.endpoint.url] if runtime.endpoint.url else []
    assert main(["vendor", "config", "nobody", "--env", runtime.deployment.environment, *endpoint]) == 2
    assert "AcmeRepository" in capsys.readouterr().err
    assert main(["vendor", "config", PRODUCER, "--env", "no-such-env", *endpoint]) == 2
    assert "rdss-no-such-env" in capsys.readouterr().err
