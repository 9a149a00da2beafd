"""Commands pointed at an endpoint someone else runs (``AWS_ENDPOINT_URL``: LocalStack, an
account) leave nothing there: a stream left behind holds shards of the account's quota, and
costs money, long after the command is forgotten.

Each test gives the command a moto server of its own in that role, and compares what is there
after the command with what was there before it. (moto's state is per process, not per server:
earlier tests of the same process show in both, and a test runs alone in its process.)
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from rdss.cli import main
from rdss.local.emulator import Endpoint, start_embedded
from rdss.local.runtime import Runtime, Settings
from rdss.local.vendor_stack import LocalVendor, provision_vendors
from rdss.model.workload import Workload


@pytest.fixture
def shared(monkeypatch: pytest.MonkeyPatch) -> Iterator[Endpoint]:
    endpoint = start_embedded()
    for name, value in endpoint.environment().items():
        monkeypatch.setenv(name, value)
    yield endpoint
    endpoint.stop()


def on(endpoint: Endpoint) -> dict[str, set[str]]:
    """What is on the endpoint, by kind (a stack once deleted, and AWS's own key aliases, are not)."""
    return {
        "streams": set(endpoint.client("kinesis").list_streams()["StreamNames"]),
        "tables": set(endpoint.client("dynamodb").list_tables()["TableNames"]),
        "buckets": {b["Name"] for b in endpoint.client("s3").list_buckets()["Buckets"]},
        "queues": set(endpoint.client("sqs").list_queues().get("QueueUrls", [])),
        "stacks": {
            s["StackName"]
            for s in endpoint.client("cloudformation").list_stacks()["StackSummaries"]
            if s["StackStatus"] != "DELETE_COMPLETE"
        },
        "aliases": {
            a["AliasName"]
            for a in endpoint.client("kms").list_aliases()["Aliases"]
            if not a["AliasName"].startswith("alias/aws/")
        },
    }


def added(endpoint: Endpoint, before: dict[str, set[str]]) -> dict[str, set[str]]:
    """What is on the endpoint now and was not in ``before``, kinds with nothing new left out."""
    now = on(endpoint)
    return {kind: now[kind] - before[kind] for kind in now if now[kind] - before[kind]}


def outputs(endpoint: Endpoint, stack: str) -> dict[str, str]:
    found = endpoint.client("cloudformation").describe_stacks(StackName=stack)["Stacks"][0]["Outputs"]
    return {o["OutputKey"]: o["OutputValue"] for o in found}


def test_the_send_benchmark_deletes_its_streams_and_tables(shared: Endpoint, capsys: pytest.CaptureFixture[str]):
    before = on(shared)
    assert main(["bench", "send", "--messages", "50", "--json"]) == 0
    figures = orjson.loads(capsys.readouterr().out)
    assert figures["aws"] == shared.url  # it ran there, not on an embedded server of its own
    assert added(shared, before) == {}


def test_the_demo_deletes_its_deployment(shared: Endpoint, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    directory = tmp_path / "messages"
    directory.mkdir()
    workload = Workload(17)
    for index in range(3):
        (directory / f"{index}.json").write_bytes(orjson.dumps(workload.message("MetadataCreate", "Event")))
    (directory / "broken.json").write_bytes(b"{not json")
    report = tmp_path / "report.json"
    before = on(shared)
    code = main(["local", "demo", "--messages", str(directory), "--report", str(report), "--no-analytics"])
    out = capsys.readouterr().out
    assert code == 0, out[-3000:]
    assert f"AWS_ENDPOINT_URL at {shared.url}" in out  # it ran there, not on an embedded server of its own
    body = orjson.loads(report.read_bytes())
    assert body["channels"]["input"] == 4
    assert added(shared, before) == {}


def test_a_runtime_with_vendors_deletes_their_stack_and_key_alias(shared: Endpoint):
    vendors = {"producer": LocalVendor(produces=True), "consumer": LocalVendor(consumes=("metadata",))}
    environment = f"gone{uuid.uuid4().hex[:8]}"
    before = on(shared)
    runtime = Runtime(shared, Settings(environment=environment, vendors=vendors))
    runtime.provision()
    first = outputs(shared, f"rdss-{environment}")
    provision_vendors(shared, runtime.deployment, vendors)  # replaces the stack, as a restart does
    second = outputs(shared, f"rdss-{environment}")
    assert second["VendorProducerExternalId"] == first["VendorProducerExternalId"]  # its config still works
    assert second["VendorConsumerExternalId"] == first["VendorConsumerExternalId"]
    made = added(shared, before)
    assert made["stacks"] == {f"rdss-{environment}"}
    assert made["aliases"] == {f"alias/rdss-{environment}-messaging"}
    kms = shared.client("kms")
    [key] = [a["TargetKeyId"] for a in kms.list_aliases()["Aliases"] if a["AliasName"] in made["aliases"]]
    runtime.deprovision()
    assert added(shared, before) == {}
    assert kms.describe_key(KeyId=key)["KeyMetadata"]["KeyState"] == "PendingDeletion"
