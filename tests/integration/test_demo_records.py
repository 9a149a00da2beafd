"""``rdss local demo`` accounts for each stream record by its own identity: records sharing one
messageId (a valid message and broken copies of it) are each reported where the broker put them,
and a file Kinesis will not take is reported refused while the demo carries on."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from rdss.cli import main
from rdss.model.workload import Workload
from tests.support.mutations import mutations

pytestmark = pytest.mark.integration


def broken_copies(message: dict, count: int) -> list[tuple[bytes, str]]:
    """``count`` copies of ``message``, each breaking one rule, all keeping its messageId."""
    copies = []
    for mutation in mutations(message):
        if mutation.path[:2] == ("messageHeader", "messageId"):
            continue
        header = mutation.message.get("messageHeader")
        if not isinstance(header, dict) or header.get("messageId") != message["messageHeader"]["messageId"]:
            continue
        copies.append((orjson.dumps(mutation.message), mutation.expected_code))
        if len(copies) == count:
            return copies
    raise AssertionError(f"fewer than {count} mutations keep the messageId")


def test_every_record_is_reported_where_the_broker_put_it(tmp_path: Path, capsys):
    workload = Workload(91)
    valid = workload.message("MetadataCreate", "Event")
    copies = broken_copies(valid, 32)
    directory = tmp_path / "messages"
    directory.mkdir()
    (directory / "00-valid.json").write_bytes(orjson.dumps(valid))
    for index, (payload, _) in enumerate(copies, 1):
        (directory / f"{index:02d}-broken.json").write_bytes(payload)
    big = orjson.dumps(workload.large(1_200_000))
    assert len(big) > 1024 * 1024
    (directory / "99-too-big.json").write_bytes(big)
    report = tmp_path / "report.json"
    code = main(["local", "demo", "--messages", str(directory), "--report", str(report), "--no-analytics"])
    body = orjson.loads(report.read_bytes())
    assert code == 0, capsys.readouterr().out[-3000:]
    inputs = {item["file"]: item for item in body["inputs"]}
    assert (inputs["00-valid.json"]["outcome"], inputs["00-valid.json"]["channels"]) == ("routed", ["metadata"])
    for index, (_, expected) in enumerate(copies, 1):
        item = inputs[f"{index:02d}-broken.json"]
        channel = "error" if expected in ("GENERR003", "GENERR006") else "invalid"
        assert (item["outcome"], item["channels"], item["errorCode"]) == (channel, [channel], expected), item
        assert item["messageId"] == valid["messageHeader"]["messageId"]
    refused = inputs["99-too-big.json"]
    assert (refused["outcome"], refused["errorCode"]) == ("refused", "GENERR006")
    assert "RecordTooLarge" in refused["errorDescription"]
    assert "streamRecords" not in refused
    # one record each on input, the valid one routed, every copy on invalid: nothing dropped
    assert body["channels"]["input"] == 1 + len(copies)
    assert body["channels"]["metadata"] == 1
    assert body["channels"]["invalid"] + body["channels"]["error"] == len(copies)
    assert len({r for item in body["inputs"] for r in item.get("streamRecords", [])}) == 1 + len(copies)
    # the demo traced the message whose records went different ways
    trace = body["trace"]
    assert trace["timeline"]["messageId"] == valid["messageHeader"]["messageId"]
    outcomes = [record["outcome"] for record in trace["timeline"]["records"]]
    assert sorted(set(outcomes)) == ["invalid", "routed"]
    assert len(outcomes) == 1 + len(copies)
