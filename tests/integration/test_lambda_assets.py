"""The Lambda assets as Lambda's Python 3.12 runs them: each function's x86_64 twin (the same
files as its arm64 asset, x86_64 wheels) imported by a fresh Python 3.12 with the asset alone
first on ``sys.path``, its handler called with a real event-source-mapping event against the
emulator. A module the asset lacks fails the import, as it would in Lambda.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pytest

from rdss.deployment.topology import RDSS
from rdss.local.events import esm_event
from rdss.model.sequences import split
from rdss.model.workload import Workload
from stacks import lambda_python
from stacks.bundling import PYTHON_312_ARM64, PYTHON_312_X86_64, built
from tests.support.system import System

pytestmark = [pytest.mark.integration, pytest.mark.slow]

HANDLERS = {processor.name: processor.handler for processor in RDSS.processors}


def twin(name: str) -> Path:
    return built(HANDLERS[name], PYTHON_312_X86_64)


def environment(system: System, **extra: str) -> dict[str, str]:
    return {
        **system.deployment.environment_variables(),
        **system.endpoint.environment(),
        "AWS_ACCESS_KEY_ID": system.endpoint.credentials.get("AWS_ACCESS_KEY_ID", "test"),
        "AWS_SECRET_ACCESS_KEY": system.endpoint.credentials.get("AWS_SECRET_ACCESS_KEY", "test"),
        "POWERTOOLS_SERVICE_NAME": "asset-test",
        "POWERTOOLS_METRICS_NAMESPACE": "rdss-test",
        "POWERTOOLS_TRACE_DISABLED": "true",
        "POWERTOOLS_LOG_LEVEL": "WARNING",
        **extra,
    }


def event(system: System, channel: str) -> dict[str, Any]:
    """Everything on ``channel`` as the event source mapping hands it to the function."""
    kinesis = system.client("kinesis")
    stream = system.deployment.stream(channel)
    arn = kinesis.describe_stream_summary(StreamName=stream)["StreamDescriptionSummary"]["StreamARN"]
    [shard] = [s["ShardId"] for s in kinesis.list_shards(StreamName=stream)["Shards"]]
    iterator = kinesis.get_shard_iterator(StreamName=stream, ShardId=shard, ShardIteratorType="TRIM_HORIZON")
    records = kinesis.get_records(ShardIterator=iterator["ShardIterator"], Limit=1000)["Records"]
    return esm_event(arn, shard, records, system.endpoint.region)


def call(system: System, name: str, payload: Any, **env: str) -> Any:
    report = lambda_python.run(twin(name), "handler.handler", event=payload, environment=environment(system, **env))
    assert report["outside"] == [], f"{name}: imported from outside its asset: {report['outside']}"
    return report["result"]


def normalised(asset: Path) -> set[str]:
    """An asset's files with the machine's name taken out of native-code file names."""
    names = set()
    for path in asset.rglob("*"):
        if path.is_file():
            names.add(re.sub(r"(aarch64|x86_64|arm64|amd64)", "<arch>", path.relative_to(asset).as_posix()))
    return names


@pytest.mark.parametrize("name", sorted(HANDLERS))
def test_the_x86_64_twin_holds_the_same_files_as_the_arm64_asset(name: str) -> None:
    arm, intel = built(HANDLERS[name], PYTHON_312_ARM64), twin(name)
    assert normalised(arm) == normalised(intel)
    assert any("x86_64" in p.name for p in intel.rglob("*.so"))
    assert not any("aarch64" in p.name for p in intel.rglob("*.so"))
    # only what the handler imports: none of the gateway, the local runtime or the benchmarks
    shipped = {p.relative_to(intel).as_posix() for p in (intel / "rdss").rglob("*.py")}
    assert not [p for p in shipped if p.startswith(("rdss/gateway/", "rdss/local/", "tools/", "rdss/adaptors/"))]


def test_the_broker_asset_routes_an_esm_batch(system: System) -> None:
    workload = Workload(12)
    messages = [workload.message("MetadataCreate", "Event"), workload.message("VocabularyRead", "Command")]
    system.publish([orjson.dumps(m) for m in messages] + [b"not json"])
    assert call(system, "broker", event(system, "input")) == {"batchItemFailures": []}
    assert [orjson.loads(r)["messageHeader"]["messageId"] for r in system.read("metadata")] == [
        messages[0]["messageHeader"]["messageId"]
    ]
    assert len(system.read("vocabulary")) == 1
    [invalid] = system.read("invalid")
    assert orjson.loads(invalid)["messageHeader"]["errorCode"] == "GENERR007"


def test_the_sequencer_asset_releases_a_sequence_the_broker_asset_staged(system: System) -> None:
    whole = Workload(13).large(30_000)
    parts = split(whole, 12_000)
    system.publish(
        [orjson.dumps(p) for p in parts], partition_key=parts[0]["messageHeader"]["messageSequence"]["sequence"]
    )
    assert call(system, "broker", event(system, "input")) == {"batchItemFailures": []}
    assert len(system.read("sequence")) == len(parts)
    assert call(system, "sequencer", event(system, "sequence")) == {"batchItemFailures": []}
    released = [orjson.loads(r) for r in system.read("metadata")]
    assert [p["messageHeader"]["messageSequence"]["position"] for p in released] == list(range(1, len(parts) + 1))


def test_the_sweep_asset_moves_a_stale_sequence_to_the_error_channel(system: System) -> None:
    parts = split(Workload(14).large(30_000), 12_000)
    system.publish([orjson.dumps(p) for p in parts[:-1]])  # the last part never comes
    call(system, "broker", event(system, "input"))
    call(system, "sequencer", event(system, "sequence"))
    assert system.read("error") == []
    scheduled = {"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}}
    call(system, "sweep", scheduled, RDSS_SEQUENCE_TIMEOUT_SECONDS="0")
    moved = [orjson.loads(r) for r in system.read("error")]
    assert len(moved) == len(parts) - 1
    assert {m["messageHeader"]["errorCode"] for m in moved} == {"GENERR006"}  # incomplete at its timeout
