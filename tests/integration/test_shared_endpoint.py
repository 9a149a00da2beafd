"""Commands pointed at an endpoint someone else runs (``AWS_ENDPOINT_URL``: LocalStack, an
account) leave nothing there: a stream left behind holds shards of the account's quota, and
costs money, long after the command is forgotten.

Each test gives the command a fresh moto server of its own, in that role: what is there after
the command is exactly what the command left, whatever else runs beside the test.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from rdss.cli import main
from rdss.local.emulator import Endpoint, start_embedded
from rdss.local.runtime import Runtime, Settings
from rdss.local.vendors import LocalVendor, provision_vendors
from rdss.workload import Workload


@pytest.fixture
def shared(monkeypatch: pytest.MonkeyPatch) -> Iterator[Endpoint]:
    endpoint = start_embedded()
    for name, value in endpoint.environment().items():
        monkeypatch.setenv(name, value)
    yield endpoint
    endpoint.stop()


def left_on(endpoint: Endpoint) -> dict[str, list[str]]:
    return {
        "streams": endpoint.client("kinesis").list_streams()["StreamNames"],
        "tables": endpoint.client("dynamodb").list_tables()["TableNames"],
        "buckets": [b["Name"] for b in endpoint.client("s3").list_buckets()["Buckets"]],
        "queues": endpoint.client("sqs").list_queues().get("QueueUrls", []),
        "stacks": [
            s["StackName"]
            for s in endpoint.client("cloudformation").list_stacks()["StackSummaries"]
            if s["StackStatus"] != "DELETE_COMPLETE"
        ],
        "aliases": [
            a["AliasName"]
            for a in endpoint.client("kms").list_aliases()["Aliases"]
            if not a["AliasName"].startswith("alias/aws/")
        ],
    }


def outputs(endpoint: Endpoint, stack: str) -> dict[str, str]:
    found = endpoint.client("cloudformation").describe_stacks(StackName=stack)["Stacks"][0]["Outputs"]
    return {o["OutputKey"]: o["OutputValue"] for o in found}


NOTHING: dict[str, list[str]] = {"streams": [], "tables": [], "buckets": [], "queues": [], "stacks": [], "aliases": []}


def test_the_send_benchmark_deletes_its_streams_and_tables(shared: Endpoint, capsys: pytest.CaptureFixture[str]):
    assert main(["bench", "send", "--messages", "50", "--json"]) == 0
    figures = orjson.loads(capsys.readouterr().out)
    assert figures["aws"] == shared.url  # it ran there, not on an embedded server of its own
    assert left_on(shared) == NOTHING


def test_the_demo_deletes_its_deployment(shared: Endpoint, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    directory = tmp_path / "messages"
    directory.mkdir()
    workload = Workload(17)
    for index in range(3):
        (directory / f"{index}.json").write_bytes(orjson.dumps(workload.message("MetadataCreate", "Event")))
    (directory / "broken.json").write_bytes(b"{not json")
    report = tmp_path / "report.json"
    code = main(["local", "demo", "--messages", str(directory), "--report", str(report), "--no-analytics"])
    out = capsys.readouterr().out
    assert code == 0, out[-3000:]
    assert f"AWS_ENDPOINT_URL at {shared.url}" in out  # it ran there, not on an embedded server of its own
    body = orjson.loads(report.read_bytes())
    assert body["channels"]["input"] == 4
    assert left_on(shared) == NOTHING


def test_a_runtime_with_vendors_deletes_their_stack_and_key_alias(shared: Endpoint):
    vendors = {"producer": LocalVendor(produces=True), "consumer": LocalVendor(consumes=("metadata",))}
    runtime = Runtime(shared, Settings(environment="gone", vendors=vendors))
    runtime.provision()
    before = outputs(shared, "rdss-gone")
    provision_vendors(shared, runtime.deployment, vendors)  # replaces the stack, as a restart does
    after = outputs(shared, "rdss-gone")
    assert after["VendorProducerExternalId"] == before["VendorProducerExternalId"]  # its config still works
    assert after["VendorConsumerExternalId"] == before["VendorConsumerExternalId"]
    made = left_on(shared)
    assert made["stacks"] == ["rdss-gone"]
    assert made["aliases"] == ["alias/rdss-gone-messaging"]
    runtime.deprovision()
    assert left_on(shared) == NOTHING
    keys = [
        shared.client("kms").describe_key(KeyId=k["KeyId"])["KeyMetadata"]
        for k in shared.client("kms").list_keys()["Keys"]
    ]
    assert {k["KeyState"] for k in keys if k["KeyManager"] == "CUSTOMER"} == {"PendingDeletion"}
