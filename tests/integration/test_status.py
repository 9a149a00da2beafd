"""``rdss status`` against a deployment on the endpoint (the embedded emulator, or LocalStack):
what it shows is what the deployment holds - channel counts equal the records put, a consumer
group's lag appears once it falls behind and goes once it catches up, the invalid and error
channels are counted by code (a consumer's moves apart), a parked batch and an open sequence
show within one refresh of being made, a replay with its progress too, and text from producers is
shown inert."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest

from rdss.cli import main
from rdss.model import decoration
from rdss.model.sequences import split
from rdss.model.workload import Workload
from rdss.processors.replay import Selection, Spec
from rdss.processors.replay_progress import Progress
from rdss.status.snapshot import Snapshot
from tests.support.gateway_system import gateway_url, open_gateway
from tests.support.system import System

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def credentials(system: System, monkeypatch: pytest.MonkeyPatch) -> None:
    """The endpoint's credentials, as a user's shell has them (the URL names the endpoint)."""
    for name, value in system.endpoint.environment().items():
        if name != "AWS_ENDPOINT_URL":
            monkeypatch.setenv(name, value)


def status_of(system: System, capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["status", "--url", gateway_url(system), "--json", *argv]) == 0
    parsed: dict[str, Any] = orjson.loads(capsys.readouterr().out)
    return parsed


def test_the_counts_are_the_records_each_channel_holds(system: System, capsys: pytest.CaptureFixture[str]) -> None:
    workload = Workload(71)
    messages = workload.mix(6)
    system.publish([orjson.dumps(m) for m in messages])
    invalid = [decoration.decorate(orjson.dumps(m), "GENERR001", "x") for m in workload.mix(3)]
    system.publish(invalid, channel="invalid")
    hostile = decoration.decorate(orjson.dumps(workload.mix(1)[0]), "GENERR004", "y").replace(
        b'"errorCode":"GENERR004"', b'"errorCode":"<script>alert(1)</script>\\u001b[31m"'
    )
    system.publish([hostile], channel="error")
    system.publish([invalid[0]], channel="invalid", partition_key="moved:acme")
    status = status_of(system, capsys)
    counts = {c["channel"]: c for c in status["channels"]}
    assert counts["input"]["lastDay"] == counts["input"]["lastHour"] == 6
    assert counts["invalid"]["lastDay"] == 4
    assert counts["metadata"]["lastDay"] == 0
    assert status["errorCodes"]["invalid"] == {"GENERR001": 3}
    assert status["movedByConsumers"] == {"invalid": 1}
    assert list(status["errorCodes"]["error"]) == ["<script>alert(1)</script>\x1b[31m"]
    # the screen shows that code as text: no escape reaches the terminal
    capsys.readouterr()
    assert main(["status", "--url", gateway_url(system)]) == 0
    screen = capsys.readouterr().out
    assert "\x1b" not in screen
    assert "\\x1b[31m" in screen or "\\u001b" in screen
    # a limit below what a channel holds gives a floor, said as one
    capped = {c["channel"]: c for c in status_of(system, capsys, "--limit", "2")["channels"]}
    assert capped["input"]["lastDay"] == 2
    assert capped["input"]["capped"] is True


def test_a_group_s_lag_appears_when_it_falls_behind_and_goes_when_it_catches_up(
    system: System, capsys: pytest.CaptureFixture[str]
) -> None:
    workload = Workload(72)
    system.publish([orjson.dumps(m) for m in workload.mix(2)], channel="metadata")
    consumer = open_gateway(system, "archive")
    with consumer.receiver("metadata", poll_interval=0.05) as inbox:
        for _ in range(2):
            received = inbox.receive(timeout=30)
            assert received is not None
            inbox.ack(received)
        inbox.commit()
    caught_up = [g for g in status_of(system, capsys)["lag"] if g["group"] == "archive"]
    assert caught_up
    assert caught_up[0]["channel"] == "metadata"
    assert caught_up[0]["oldestUnreadSeconds"] == 0
    system.publish([orjson.dumps(workload.mix(1)[0])], channel="metadata")
    time.sleep(1.5)  # an age to see: the record waits unread
    behind = [g for g in status_of(system, capsys)["lag"] if g["group"] == "archive"]
    assert behind[0]["oldestUnreadSeconds"] >= 1


def test_parked_batches_and_open_sequences_show_at_once(system: System, capsys: pytest.CaptureFixture[str]) -> None:
    sqs = system.client("sqs")
    url = sqs.create_queue(QueueName=system.deployment.on_failure_queue("broker"))["QueueUrl"]
    try:
        before = status_of(system, capsys)
        assert before["parkedBatches"]["broker"] == 0
        assert before["openSequences"]["count"] == 0
        sqs.send_message(QueueUrl=url, MessageBody='{"KinesisBatchInfo": {}}')
        parts = split(Workload(73).large(30_000), 12_000)
        system.publish([orjson.dumps(parts[0])])
        system.route()
        after = status_of(system, capsys)
        assert after["parkedBatches"]["broker"] == 1
        assert after["openSequences"]["count"] == 1
    finally:
        sqs.delete_queue(QueueUrl=url)


def test_a_replay_shows_with_its_progress(system: System, capsys: pytest.CaptureFixture[str]) -> None:
    assert status_of(system, capsys)["replays"] == []
    progress = Progress(system.client("dynamodb"), system.deployment.table("checkpoints"))
    since = datetime(2026, 11, 24, tzinfo=UTC)
    ids = ("<script>alert(1)</script>\x1b[31m",)
    progress.begin(Spec("fix-1", Selection(since, since + timedelta(days=1), ids=ids), "group:acme"), "host:1:run")
    progress.update("fix-1", sent=7)
    [replay] = status_of(system, capsys)["replays"]
    assert {k: replay[k] for k in ("name", "status", "sent", "selected", "into")} == {
        "name": "fix-1",
        "status": "running",
        "sent": 7,
        "selected": None,
        "into": "group:acme",
    }
    assert replay["selection"]["ids"] == list(ids)
    assert replay["selection"]["since"] == "2026-11-24T00:00:00Z"
    capsys.readouterr()
    assert main(["status", "--url", gateway_url(system)]) == 0
    screen = capsys.readouterr().out
    assert "  fix-1: running, 7 sent into group:acme, last " in screen
    # the consumer groups' lag reads the same table: a replay's rows are not a group's
    assert [g for g in status_of(system, capsys)["lag"] if "replay" in g["group"]] == []


def test_a_source_missing_is_named_and_the_rest_still_shows(system: System) -> None:
    # this deployment has no on-failure queues (its processors run in the test, not in Lambda)
    status = Snapshot(system.deployment, system.client).take()
    assert any(source.startswith("on-failure queue") for source in status.unread)
    assert [c.channel for c in status.channels] == [c.name for c in system.deployment.topology.channels]


def test_a_deployment_not_there_is_one_line_and_exit_2(system: System, capsys: pytest.CaptureFixture[str]) -> None:
    url = gateway_url(system).replace(system.deployment.environment, "absent", 1)
    assert main(["status", "--url", url]) == 2
    said = capsys.readouterr()
    assert said.out == ""
    assert said.err.count("\n") == 1
    assert said.err.startswith("rdss status: cannot read deployment absent: ")
