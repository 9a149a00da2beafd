"""``rdss replay`` against the local runtime (or LocalStack, with AWS_ENDPOINT_URL): a window of
``input`` read back from the audit archive and replayed through the broker routes each record
once more and none twice - across a run killed half-way and resumed; a replay to one consumer
group reaches that group alone; a dry run counts what a run sends; ``rdss trace`` shows the
replay's hop; a producer's forged replay hop routes nothing again."""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest

from rdss.archive.listing import ArchiveListing
from rdss.cli import main
from rdss.gateway import Gateway
from rdss.local.accounting import read_channel
from rdss.local.emulator import Endpoint
from rdss.local.runtime import Runtime, Settings
from rdss.model import history, timestamps
from rdss.model import replay as replays
from rdss.model.workload import Workload
from rdss.processors import replay as replay_module
from rdss.processors.replay_progress import Progress
from rdss.trace.tracer import Tracer

pytestmark = pytest.mark.integration

COUNT = 24


class Killed(BaseException):
    """The replay's process dies (between putting records and noting them)."""


@pytest.fixture
def runtime(endpoint: Endpoint, monkeypatch: pytest.MonkeyPatch) -> Iterator[Runtime]:
    for name, value in endpoint.environment().items():  # what `rdss local up` tells operators to export
        monkeypatch.setenv(name, value)
    settings = Settings(environment=f"rp{uuid.uuid4().hex[:8]}", shards=2, firehose_buffer_seconds=0.5)
    runtime = Runtime(endpoint, settings)
    runtime.provision()
    yield runtime
    runtime.deprovision()


def url(runtime: Runtime) -> str:
    value = f"kinesis://{runtime.deployment.environment}?region={runtime.endpoint.region}"
    return value + (f"&endpoint={runtime.endpoint.url}" if runtime.endpoint.url else "")


def cli(capsys: pytest.CaptureFixture[str], runtime: Runtime, *args: str) -> tuple[int, Any]:
    code = main(["replay", *args[:2], "--url", url(runtime), *args[2:]])
    out = capsys.readouterr().out.strip()
    return code, orjson.loads(out) if "--json" in args else out


def routed(runtime: Runtime, channel: str = "metadata") -> collections.Counter[tuple[str, str | None]]:
    """(messageId, the replay that sent it or None) -> copies on a routed channel."""
    found: collections.Counter[tuple[str, str | None]] = collections.Counter()
    for data in read_channel(runtime, channel):
        header = orjson.loads(data)["messageHeader"]
        mark = replays.mark_of(header)
        found[(header["messageId"], mark.name if mark else None)] += 1
    return found


def published(runtime: Runtime, count: int = COUNT, seed: int = 5) -> list[str]:
    workload = Workload(seed)
    messages = [workload.message("MetadataCreate", "Event") for _ in range(count)]
    runtime.publish([orjson.dumps(m) for m in messages])
    runtime.drain()
    return [m["messageHeader"]["messageId"] for m in messages]


def window(since: Any) -> list[str]:
    until = timestamps.now() + timedelta(seconds=1)
    return ["--since", timestamps.format(since), "--until", timestamps.format(until)]


def test_a_window_of_input_replayed_through_the_broker_once_across_a_kill_and_resume(
    runtime: Runtime, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
):
    since = timestamps.now() - timedelta(seconds=5)
    ids = published(runtime)
    assert routed(runtime) == {(i, None): 1 for i in ids}
    span = window(since)

    code, dry = cli(capsys, runtime, "start", "fix-1", *span, "--dry-run", "--json")
    assert code == 0, dry
    assert (dry["selected"], dry["sent"], dry["status"]) == (COUNT, 0, "dry run")
    code, out = cli(capsys, runtime, "status", "fix-1")
    assert code == 1  # a dry run leaves no replay behind

    # killed after putting its second batch, before noting it: those records went, unnoted
    monkeypatch.setattr(replay_module, "BATCH", 5)
    note = Progress.note
    calls = []

    def dying(self: Any, name: str, sent: Any) -> None:
        calls.append(len(sent))
        if len(calls) == 2:
            raise Killed
        note(self, name, sent)

    monkeypatch.setattr(Progress, "note", dying)
    with pytest.raises(Killed):
        main(["replay", "start", "fix-1", "--url", url(runtime), *span])
    capsys.readouterr()
    monkeypatch.setattr(Progress, "note", note)
    code, rows = cli(capsys, runtime, "list", "--json")
    assert [(r["name"], r["status"], r["sent"]) for r in rows] == [("fix-1", "running", 5)]

    code, summary = cli(capsys, runtime, "start", "fix-1", *span, "--json")
    assert code == 0, summary
    assert (summary["selected"], summary["already"], summary["sent"]) == (COUNT, 5, COUNT - 5)
    runtime.drain()
    # every record once more, none twice: the five put twice were claimed once, under the replay
    assert routed(runtime) == {(i, None): 1 for i in ids} | {(i, "fix-1"): 1 for i in ids}
    code, row = cli(capsys, runtime, "status", "fix-1", "--json")
    assert (row["status"], row["sent"], row["selected"]) == ("done", dry["selected"], COUNT)

    # run again: nothing is sent twice
    code, again = cli(capsys, runtime, "start", "fix-1", *span, "--json")
    assert (again["sent"], again["already"]) == (0, COUNT)
    code, out = cli(capsys, runtime, "start", "fix-1", *span, "--type", "MetadataDelete")
    assert code == 2  # the same name with other options is refused (usage)

    # rdss trace shows the replay's hop
    tracer = Tracer(runtime.deployment, runtime.endpoint.client)
    timeline = tracer.trace(ids[0])
    assert any("rdss-replay/fix-1" in line for line in timeline.lines()), timeline.lines()
    assert [d.outcome for d in timeline.dispatches] == ["routed", "replayed"], timeline.lines()
    assert timeline.summary() == "routed to metadata; 1 record(s) sent again by rdss replay, routed to metadata"

    # cancelled: a start refuses it
    code, out = cli(capsys, runtime, "cancel", "fix-1")
    assert (code, out) == (0, "replay fix-1 cancelled")
    assert cli(capsys, runtime, "start", "fix-1", *span)[0] == 2


def test_a_forged_replay_hop_routes_nothing_again(runtime: Runtime):
    ids = published(runtime, 3, seed=8)
    forged = []
    workload = Workload(8)
    for _ in range(3):
        message = workload.message("MetadataCreate", "Event")
        hop = history.hop(replays.Mark("anything").machine_id)
        forged.append(history.append(orjson.dumps(message), hop))
    runtime.publish(forged)
    runtime.drain()
    # no grant: the resends are the duplicates they are, and nothing arrives marked as a replay
    assert routed(runtime) == {(i, None): 1 for i in ids}


def test_a_replay_to_one_consumer_group_reaches_that_group_only(
    runtime: Runtime, capsys: pytest.CaptureFixture[str], tmp_path: Path
):
    since = timestamps.now() - timedelta(seconds=5)
    ids = published(runtime, 6, seed=11)
    ldr = f"sqlite:///{tmp_path / 'ldr.db'}"

    def receive(group: str) -> list[tuple[str, str | None]]:
        got = []
        gateway = Gateway(url(runtime) + f"&ldr={ldr}", application=group, lease_duration=1.0)
        with gateway, gateway.receiver("metadata", poll_interval=0.05) as inbox:
            while (received := inbox.receive(timeout=3)) is not None:
                mark = replays.mark_of(received.header)
                got.append((received.message_id, mark.name if mark else None))
                inbox.ack(received)
        return got

    assert sorted(receive("vendor-a")) == sorted((i, None) for i in ids)
    assert sorted(receive("vendor-b")) == sorted((i, None) for i in ids)

    code, summary = cli(capsys, runtime, "start", "for-a", *window(since), "--into", "group:vendor-a", "--json")
    assert (code, summary["sent"]) == (0, len(ids)), summary
    assert sorted(receive("vendor-a")) == sorted((i, "for-a") for i in ids)
    assert receive("vendor-b") == []
    # the broker never saw them: nothing else was routed again
    assert sum(n for (_, name), n in routed(runtime).items() if name is None) == len(ids)


@pytest.fixture
def signals() -> Iterator[None]:
    """``rdss replay start`` sets SIGINT's and SIGTERM's handlers: put pytest's back."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    yield
    for number, handler in saved.items():
        signal.signal(number, handler)


def test_sigterm_while_the_archive_is_listed_stops_the_replay_at_once_and_a_resume_sends_everything(
    runtime: Runtime, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, signals: None
):
    ids = published(runtime, 6, seed=21)
    # two thousand years: listed hour by hour before
    span = ["--since", "0001-01-01T00:00:00Z", "--until", timestamps.format(timestamps.now() + timedelta(seconds=1))]
    pages = ArchiveListing._pages
    listings: list[str] = []

    def signalled(self: ArchiveListing, stop: Any, **request: Any) -> Any:
        listings.append(request["Prefix"])
        if len(listings) == 1:
            os.kill(os.getpid(), signal.SIGTERM)  # what `kill PID` or a service manager sends
        return pages(self, stop, **request)

    monkeypatch.setattr(ArchiveListing, "_pages", signalled)
    started = time.monotonic()
    code, out = cli(capsys, runtime, "start", "sig", *span)
    assert time.monotonic() - started < 5
    assert (code, out) == (0, "replay sig: sent 0 of 0 selected record(s) into input (interrupted)")
    assert len(listings) == 1
    monkeypatch.setattr(ArchiveListing, "_pages", pages)
    code, out = cli(capsys, runtime, "start", "sig", *span)
    assert code == 0, out
    assert out == "replay sig: sent 6 of 6 selected record(s) into input (done)"
    runtime.drain()
    assert {i for (i, name) in routed(runtime) if name == "sig"} == set(ids)


def test_a_second_start_of_a_running_replay_is_refused_in_one_line(
    runtime: Runtime, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
):
    since = timestamps.now() - timedelta(seconds=5)
    published(runtime, 12, seed=22)
    span = window(since)
    monkeypatch.setattr(replay_module, "BATCH", 4)
    note = Progress.note
    second: list[tuple[int, list[str]]] = []

    def noting(self: Any, name: str, sent: Any) -> None:
        note(self, name, sent)
        if not second:  # while the first run is between two batches, the same name again
            code = main(["replay", "start", "twice", "--url", url(runtime), *span])
            second.append((code, capsys.readouterr().err.strip().splitlines()))

    monkeypatch.setattr(Progress, "note", noting)
    code, summary = cli(capsys, runtime, "start", "twice", *span, "--json")
    assert (code, summary["sent"], summary["status"]) == (0, 12, "done"), summary
    [(refused, said)] = second
    assert refused == 2
    assert len(said) == 1
    assert said[0].startswith("rdss replay: replay twice is running (run "), said
    code, rows = cli(capsys, runtime, "list", "--json")
    assert [(r["name"], r["sent"], r["selected"]) for r in rows] == [("twice", 12, 12)]


def test_a_replay_killed_with_sigkill_is_refused_until_its_claim_lapses_then_resumes(
    runtime: Runtime, capsys: pytest.CaptureFixture[str]
):
    since = timestamps.now() - timedelta(seconds=5)
    published(runtime, 5, seed=23)
    span = window(since)
    # paced at one record a second: it claims the replay, then waits five seconds before it sends
    command = [sys.executable, "-m", "rdss", "replay", "start", "killed", "--url", url(runtime), *span, "--rate", "1"]
    process = subprocess.Popen(command, cwd=Path(__file__).parents[2], stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            code, rows = cli(capsys, runtime, "list", "--json")
            if any(r.get("leaseOwner") for r in rows):
                break
            assert process.poll() is None, "the replay ended before it was killed"
            time.sleep(0.2)
        else:
            pytest.fail("the replay never claimed its name")
    finally:
        process.kill()  # SIGKILL: no handler runs, nothing is given up
        process.wait()
    code = main(["replay", "start", "killed", "--url", url(runtime), *span])
    said = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(said) == 1
    assert said[0].startswith("rdss replay: replay killed is running (run "), said
    code, row = cli(capsys, runtime, "status", "killed", "--json")
    assert row["status"] == "running"
    # LEASE later (the claim stops being renewed when its run dies), as time would
    runtime.endpoint.client("dynamodb").update_item(
        TableName=runtime.deployment.table("checkpoints"),
        Key={"lease": {"S": "replays"}, "shardId": {"S": "killed"}},
        UpdateExpression="SET leaseUntil = :past",
        ExpressionAttributeValues={":past": {"N": str(int(time.time()) - 1)}},
    )
    code, summary = cli(capsys, runtime, "start", "killed", *span, "--json")
    assert (code, summary["sent"], summary["status"]) == (0, 5, "done"), summary


def test_a_wrong_environment_names_the_table_it_lacks(runtime: Runtime, capsys: pytest.CaptureFixture[str]):
    wrong = url(runtime).replace(f"kinesis://{runtime.deployment.environment}?", "kinesis://nosuch?")
    for args in (["list"], ["status", "x"], ["cancel", "x"], ["start", "x", "--since", "2026-11-29T00:00:00Z"]):
        code = main(["replay", args[0], "--url", wrong, *args[1:]])
        said = capsys.readouterr().err.strip().splitlines()
        assert code == 2
        assert said == ["rdss replay: no checkpoints table rdss-nosuch-checkpoints (is 'nosuch' deployed?)"]
