"""Replay's logic, on moto in-process and the memory bus: the replay mark and which hop counts,
what a selection takes from the archive, the progress a resumed run skips, the pace --rate sets,
and receivers taking a replay for their group alone, once per replay."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import boto3
import orjson
import pytest
from moto import mock_aws

from rdss.archive import entries as archive
from rdss.archive.listing import Archived
from rdss.deployment.topology import Deployment
from rdss.gateway import Gateway
from rdss.gateway.backend import Outgoing
from rdss.gateway.log import memory as memory_backend
from rdss.model import history
from rdss.model import replay as replays
from rdss.model.workload import Workload
from rdss.processors.replay import Replayer, Selection, Spec, into_group, source_of
from rdss.processors.replay_progress import Progress, ReplayExists, ReplayRunning

T0 = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
DEPLOYMENT = Deployment("unit")


# -- the mark --------------------------------------------------------------------------------------


def hops(*machine_ids: str) -> dict[str, Any]:
    return {"messageHistory": [{"machineId": m, "machineAddress": "h", "timestamp": "t"} for m in machine_ids]}


def test_only_the_last_hop_marks_a_routed_record_and_a_group_is_named_after_the_replay():
    assert replays.mark_of(hops("producer", "rdss-replay/fix-1")) == replays.Mark("fix-1")
    assert replays.mark_of(hops("rdss-replay/fix-1/vendor-a")) == replays.Mark("fix-1", "vendor-a")
    # a producer's hop followed by the broker's: not a replay
    assert replays.mark_of(hops("rdss-replay/fix-1", "rdss-unit-broker")) is None
    assert replays.mark_of({"messageHistory": "nope"}) is None
    assert replays.mark_of({}) is None
    assert replays.parse("rdss-replay/") is None
    assert replays.parse("rdss-replay/a b") is None
    assert replays.Mark("x", "g").reaches("g")
    assert not replays.Mark("x", "g").reaches("h")
    assert replays.Mark("x").reaches("anyone")


def test_the_broker_is_asked_about_the_latest_replay_hop_of_any_place_never_a_groups():
    assert replays.requested(hops("rdss-replay/old", "p", "rdss-replay/new")) == replays.Mark("new")
    assert replays.requested(hops("rdss-replay/x/vendor-a")) is None
    assert replays.requested(hops("producer")) is None


def test_a_replay_is_de_duplicated_under_its_own_key():
    assert replays.dedupe_key("m-1", None) == "m-1"
    assert replays.dedupe_key("m-1", replays.Mark("fix")) == "replay/fix/m-1"
    assert replays.dedupe_key("m-1", replays.Mark("fix", "g")) == "replay/fix/m-1"
    assert replays.grant_key("fix", "m-1") != replays.claim_key("fix", "m-1")


def test_into_is_input_or_one_group():
    assert into_group("input") is None
    assert into_group("group:vendor-a") == "vendor-a"
    for bad in ("group:", "groups:a", "metadata", "group:a b"):
        with pytest.raises(ValueError):
            into_group(bad)
    with pytest.raises(ValueError):
        Spec("bad name", Selection(T0, T0 + timedelta(hours=1)))


# -- selection -------------------------------------------------------------------------------------


def found(
    payload: bytes, *, channel: str = "input", arrival: datetime = T0, legacy: bool = False, line: int = 1
) -> Archived:
    kind = "audit" if channel == "input" else "errors"
    base = "audit/" if kind == "audit" else f"errors/{channel}/"
    key = archive.object_key(base, arrival, "delivery")
    if legacy:
        return Archived(kind, "b", key, arrival, line, archive.Entry(payload))
    entry = archive.Entry(
        payload, DEPLOYMENT.stream(channel), "shardId-0", str(line), "k", archive.arrival_text(arrival)
    )
    return Archived(kind, "b", key, arrival, line, entry)


def message(message_type: str = "MetadataCreate", **header: Any) -> tuple[str, bytes]:
    body = Workload(3).message(message_type, "Event")
    body["messageHeader"] |= header
    return body["messageHeader"]["messageId"], orjson.dumps(body)


def test_a_selection_takes_its_window_its_channel_and_what_its_filters_name():
    window = Selection(T0, T0 + timedelta(hours=1))
    mid, payload = message()
    assert window.matches(DEPLOYMENT, found(payload))
    assert window.matches(DEPLOYMENT, found(payload, arrival=T0 + timedelta(minutes=59)))
    assert not window.matches(DEPLOYMENT, found(payload, arrival=T0 + timedelta(hours=1)))  # until is excluded
    assert not window.matches(DEPLOYMENT, found(payload, arrival=T0 - timedelta(seconds=1)))
    assert not window.matches(DEPLOYMENT, found(payload, channel="invalid"))
    assert window.matches(DEPLOYMENT, found(payload, legacy=True))  # a legacy line: by its object's time
    assert Selection(T0, T0 + timedelta(hours=1), message_type="MetadataCreate").matches(DEPLOYMENT, found(payload))
    assert not Selection(T0, T0 + timedelta(hours=1), message_type="MetadataDelete").matches(DEPLOYMENT, found(payload))
    assert Selection(T0, T0 + timedelta(hours=1), ids=(mid,)).matches(DEPLOYMENT, found(payload))
    assert not Selection(T0, T0 + timedelta(hours=1), ids=("other",)).matches(DEPLOYMENT, found(payload))
    _, decorated = message(errorCode="GENERR001", errorDescription="no body")
    invalid = Selection(T0, T0 + timedelta(hours=1), channel="invalid", code="GENERR001")
    assert invalid.matches(DEPLOYMENT, found(decorated, channel="invalid"))
    assert invalid.matches(DEPLOYMENT, found(decorated, channel="invalid", legacy=True))
    assert not invalid.matches(DEPLOYMENT, found(decorated, channel="error"))
    assert not Selection(T0, T0 + timedelta(hours=1), code="GENERR004").matches(DEPLOYMENT, found(b"not json"))
    assert source_of(found(payload)) == f"{DEPLOYMENT.stream('input')}/shardId-0/1"
    assert source_of(found(payload, legacy=True, line=3)).endswith("#3")


def test_a_selection_is_kept_and_read_back_as_it_was_given():
    selection = Selection(T0, T0 + timedelta(hours=2), "error", "MetadataUpdate", "GENERR003", ("a", "b"))
    assert Selection.of(orjson.loads(orjson.dumps(selection.as_dict()))) == selection
    with pytest.raises(ValueError):
        Selection(T0, T0)
    with pytest.raises(ValueError):
        Selection(T0, T0 + timedelta(hours=1), channel="metadata")


# -- a run, on moto --------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


@pytest.fixture
def aws() -> Iterator[dict[str, Any]]:
    with mock_aws():
        clients = {s: boto3.client(s, region_name="eu-west-2") for s in ("kinesis", "dynamodb", "s3")}
        clients["kinesis"].create_stream(StreamName=DEPLOYMENT.stream("input"), ShardCount=1)
        clients["kinesis"].create_stream(StreamName=DEPLOYMENT.stream("metadata"), ShardCount=1)
        dynamodb = clients["dynamodb"]
        dynamodb.create_table(
            TableName=DEPLOYMENT.table("checkpoints"),
            KeySchema=[{"AttributeName": "lease", "KeyType": "HASH"}, {"AttributeName": "shardId", "KeyType": "RANGE"}],
            AttributeDefinitions=[
                {"AttributeName": "lease", "AttributeType": "S"},
                {"AttributeName": "shardId", "AttributeType": "S"},
            ],
            BillingMode="PAY_PER_REQUEST",
        )
        dynamodb.create_table(
            TableName=DEPLOYMENT.table("messages"),
            KeySchema=[{"AttributeName": "messageId", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "messageId", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        for bucket in ("audit", "errors"):
            clients["s3"].create_bucket(
                Bucket=DEPLOYMENT.bucket(bucket), CreateBucketConfiguration={"LocationConstraint": "eu-west-2"}
            )
        yield clients


def archived(aws: dict[str, Any], payloads: list[bytes], *, twice: bool = False) -> None:
    lines = [
        archive.frame(p, stream=DEPLOYMENT.stream("input"), shard="shardId-0", sequence_number=str(i), arrival=T0)
        for i, p in enumerate(payloads)
    ]
    for copy in range(2 if twice else 1):  # Firehose is at least once: an object delivered again
        key = archive.object_key("audit/", T0 + timedelta(minutes=copy), "delivery")
        aws["s3"].put_object(Bucket=DEPLOYMENT.bucket("audit"), Key=key, Body=archive.member(lines))


def replayer(aws: dict[str, Any], clock: Clock) -> Replayer:
    return Replayer(DEPLOYMENT, aws.__getitem__, clock=clock, sleep=clock.sleep)


def put_on(aws: dict[str, Any], channel: str) -> list[bytes]:
    kinesis, stream = aws["kinesis"], DEPLOYMENT.stream(channel)
    shard = kinesis.list_shards(StreamName=stream)["Shards"][0]["ShardId"]
    iterator = kinesis.get_shard_iterator(StreamName=stream, ShardId=shard, ShardIteratorType="TRIM_HORIZON")
    return [r["Data"] for r in kinesis.get_records(ShardIterator=iterator["ShardIterator"])["Records"]]


def test_a_run_sends_each_selected_record_once_grants_each_and_a_resumed_run_skips_what_went(
    aws: dict[str, Any], monkeypatch: pytest.MonkeyPatch
):
    payloads = [orjson.dumps(Workload(9 + i).message("MetadataCreate", "Event")) for i in range(7)]
    archived(aws, payloads, twice=True)
    clock = Clock()
    spec = Spec("fix", Selection(T0, T0 + timedelta(hours=1)))
    dry = replayer(aws, clock).run(spec, dry_run=True)
    assert (dry.selected, dry.sent, dry.status) == (7, 0, "dry run")  # each identity once
    assert put_on(aws, "input") == []
    monkeypatch.setattr("rdss.processors.replay.BATCH", 3)
    asked: list[int] = []  # a stop request after the first batch
    stopped = replayer(aws, clock).run(spec, stop=lambda: bool(asked), on_batch=lambda _: asked.append(1))
    assert (stopped.sent, stopped.status) == (3, "interrupted")
    resumed = replayer(aws, clock).run(spec)
    assert (resumed.selected, resumed.already, resumed.sent, resumed.status) == (7, 3, 4, "done")
    sent = put_on(aws, "input")
    assert len(sent) == 7
    assert all(replays.requested(orjson.loads(s)["messageHeader"]) == replays.Mark("fix") for s in sent)
    grants = aws["dynamodb"].scan(TableName=DEPLOYMENT.table("messages"))["Items"]
    assert len(grants) == 7
    assert all(g["messageId"]["S"].startswith("replay-grant#fix#") for g in grants)
    row = Progress(aws["dynamodb"], DEPLOYMENT.table("checkpoints")).get("fix")
    assert row is not None
    assert (row["status"], row["sent"], row["selected"]) == ("done", 7, 7)
    with pytest.raises(ReplayExists):
        replayer(aws, clock).run(Spec("fix", Selection(T0, T0 + timedelta(hours=2))))


def test_rate_bounds_the_pace_and_cancel_stops_the_next_batch(aws: dict[str, Any], monkeypatch: pytest.MonkeyPatch):
    payloads = [orjson.dumps(Workload(30 + i).message("MetadataCreate", "Event")) for i in range(10)]
    archived(aws, payloads)
    monkeypatch.setattr("rdss.processors.replay.BATCH", 5)
    clock = Clock()
    summary = replayer(aws, clock).run(Spec("paced", Selection(T0, T0 + timedelta(hours=1))), rate=2.0)
    assert summary.sent == 10
    assert clock.now == pytest.approx(5.0)  # ten records at two a second
    progress = Progress(aws["dynamodb"], DEPLOYMENT.table("checkpoints"))
    runner = replayer(aws, clock)
    spec = Spec("stopped", Selection(T0, T0 + timedelta(hours=1)))
    summary = runner.run(spec, on_batch=lambda s: progress.cancel("stopped"))
    assert (summary.sent, summary.status) == (5, "cancelled")
    with pytest.raises(ReplayExists):
        runner.run(spec)
    assert {r["name"]: r["status"] for r in progress.list()} == {"paced": "done", "stopped": "cancelled"}


def test_into_a_group_goes_to_the_routed_channel_marked_for_it_and_skips_what_cannot_be_routed(aws: dict[str, Any]):
    good = orjson.dumps(Workload(40).message("MetadataCreate", "Event"))
    archived(aws, [good, b"not a message"])
    summary = replayer(aws, Clock()).run(Spec("for-a", Selection(T0, T0 + timedelta(hours=1)), into="group:vendor-a"))
    assert (summary.selected, summary.sent, summary.skipped) == (2, 1, 1)
    [sent] = put_on(aws, "metadata")
    assert replays.mark_of(orjson.loads(sent)["messageHeader"]) == replays.Mark("for-a", "vendor-a")
    assert put_on(aws, "input") == []
    assert aws["dynamodb"].scan(TableName=DEPLOYMENT.table("messages"))["Items"] == []  # no broker: no grant


# -- receivers -------------------------------------------------------------------------------------


@pytest.fixture
def bus_name() -> Iterator[str]:
    name = f"t-{uuid.uuid4().hex[:8]}"
    yield name
    memory_backend.discard(name)


def test_receivers_take_a_replay_for_their_group_alone_once_per_replay(bus_name: str):
    message = Workload(50).message("MetadataCreate", "Event")
    payload = orjson.dumps(message)
    for_a = history.append(payload, history.hop(replays.Mark("r1", "a").machine_id))
    for_all = history.append(payload, history.hop(replays.Mark("r2").machine_id))
    url = f"memory://{bus_name}?partitions=1"
    with Gateway(url, application="producer") as producer:
        batch = [payload, for_a, for_a, for_all, for_all, payload]
        producer.transport.publish([Outgoing("metadata", p, "k") for p in batch])
    got = {}
    for group in ("a", "b"):
        with Gateway(url, application=group) as consumer, consumer.receiver("metadata", poll_interval=0.01) as inbox:
            got[group] = []
            while (received := inbox.receive(timeout=0.1)) is not None:
                mark = replays.mark_of(received.header)
                got[group].append(mark.name if mark else None)
                inbox.ack(received)
    assert got == {"a": [None, "r1", "r2"], "b": [None, "r2"]}


def test_parts_of_a_sequence_are_not_replayed(aws: dict[str, Any]):
    from rdss.model.sequences import split

    whole = Workload(60).message("MetadataCreate", "Event")
    parts = [orjson.dumps(p) for p in split(whole, 2_000)]
    assert len(parts) > 1
    archived(aws, [orjson.dumps(Workload(61).message("MetadataCreate", "Event")), *parts])
    summary = replayer(aws, Clock()).run(Spec("seq", Selection(T0, T0 + timedelta(hours=1))))
    assert (summary.selected, summary.sent, summary.skipped) == (1 + len(parts), 1, len(parts))
    assert len(put_on(aws, "input")) == 1


@pytest.mark.parametrize("until", ["9999-12-31T23:59:59Z", "9999-12-31T23:00:01Z"])
def test_an_until_no_archive_hour_can_name_is_one_line_not_a_traceback(until: str, capsys):
    from rdss.cli import main

    code = main(["replay", "start", "far", "--since", "2026-11-29T00:00:00Z", "--until", until, "--url", "memory://x"])
    said = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(said) == 1
    assert "beyond the last hour" in said[0]


def test_a_deployment_whose_client_cannot_be_made_is_one_line(capsys, monkeypatch):
    from rdss.cli import main

    for variable in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(variable, raising=False)
    code = main(["replay", "list", "--url", "kinesis://demo?endpoint=http://127.0.0.1:1"])
    said = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert said == [said[0]]
    assert "region" in said[0]


# -- stopping while the archive is read ------------------------------------------------------------


def s3_calls(aws: dict[str, Any], when: Any = None) -> list[str]:
    """The S3 calls made from now on; ``when(calls)`` runs after each is counted."""
    calls: list[str] = []

    def counted(model: Any, **_: Any) -> None:
        calls.append(model.name)
        if when is not None:
            when(calls)

    aws["s3"].meta.events.register("before-call.s3", counted)
    return calls


def test_a_stop_request_while_the_archive_is_read_ends_the_run_there_and_a_resume_sends_everything(
    aws: dict[str, Any],
):
    payloads = [orjson.dumps(Workload(70 + i).message("MetadataCreate", "Event")) for i in range(7)]
    archived(aws, payloads)
    spec = Spec("stopped", Selection(T0 - timedelta(days=30), T0 + timedelta(hours=1)))
    asked: list[str] = []
    calls = s3_calls(aws, when=lambda calls: asked.append("stop") if len(calls) == 1 else None)
    summary = replayer(aws, Clock()).run(spec, stop=lambda: bool(asked))
    assert (summary.status, summary.selected, summary.sent) == ("interrupted", 0, 0)
    assert calls == ["ListObjectsV2"]  # not one call more once it was asked to stop: no object read
    assert put_on(aws, "input") == []
    progress = Progress(aws["dynamodb"], DEPLOYMENT.table("checkpoints"))
    row = progress.get("stopped")
    assert row is not None
    assert row["status"] == "interrupted"
    assert "selected" not in row  # the selection was not read whole: no count of it is kept
    assert "leaseOwner" not in row  # the run gave its claim up
    resumed = replayer(aws, Clock()).run(spec)
    assert (resumed.status, resumed.selected, resumed.sent) == ("done", 7, 7)


def test_a_paced_run_hears_a_stop_request_while_it_waits(aws: dict[str, Any]):
    archived(aws, [orjson.dumps(Workload(80 + i).message("MetadataCreate", "Event")) for i in range(4)])
    clock = Clock()
    asked: list[str] = []

    def sleep(seconds: float) -> None:
        clock.sleep(seconds)
        asked.append("stop")  # a signal during the first nap

    runner = Replayer(DEPLOYMENT, aws.__getitem__, clock=clock, sleep=sleep)
    summary = runner.run(Spec("paced", Selection(T0, T0 + timedelta(hours=1))), rate=0.01, stop=lambda: bool(asked))
    assert (summary.status, summary.sent) == ("interrupted", 0)
    assert clock.slept == [0.5]  # one nap, not the 400 s four records take at 0.01/s


# -- one run at a time -----------------------------------------------------------------------------


def test_a_second_start_while_a_run_holds_the_replay_is_refused_and_a_start_after_it_resumes(
    aws: dict[str, Any], monkeypatch: pytest.MonkeyPatch
):
    payloads = [orjson.dumps(Workload(90 + i).message("MetadataCreate", "Event")) for i in range(7)]
    archived(aws, payloads)
    monkeypatch.setattr("rdss.processors.replay.BATCH", 3)
    spec = Spec("once", Selection(T0, T0 + timedelta(hours=1)))
    refused: list[str] = []

    def second_start(_: Any) -> None:
        if not refused:
            with pytest.raises(ReplayRunning) as raised:
                replayer(aws, Clock()).run(spec)
            refused.append(str(raised.value))

    first = replayer(aws, Clock()).run(spec, on_batch=second_start)
    assert (first.status, first.sent) == ("done", 7)
    assert len(refused) == 1
    assert refused[0].startswith("replay once is running (run ")
    progress = Progress(aws["dynamodb"], DEPLOYMENT.table("checkpoints"))
    row = progress.get("once")
    assert row is not None
    assert (row["sent"], row["selected"], row["status"]) == (7, 7, "done")  # never "14 sent of 7"
    assert "leaseOwner" not in row
    again = replayer(aws, Clock()).run(spec)
    assert (again.status, again.sent, again.already) == ("done", 0, 7)
    assert len(put_on(aws, "input")) == 7


def test_a_claim_left_by_a_run_that_died_holds_until_it_lapses(aws: dict[str, Any]):
    from rdss.processors.replay_progress import LEASE

    archived(aws, [orjson.dumps(Workload(100 + i).message("MetadataCreate", "Event")) for i in range(3)])
    spec = Spec("orphan", Selection(T0, T0 + timedelta(hours=1)))
    now = [1_800_000_000.0]
    progress = Progress(aws["dynamodb"], DEPLOYMENT.table("checkpoints"), clock=lambda: now[0])
    progress.begin(spec, "host:123:dead")  # then SIGKILL: nothing gives the claim up
    with pytest.raises(ReplayRunning, match="run host:123:dead"):
        progress.begin(spec, "host:456:next")
    now[0] += LEASE.total_seconds() / 2
    assert progress.renew("orphan", "host:456:next") is False  # only its holder renews a claim
    assert progress.update("orphan", sent=1, owner="host:456:next") is False
    now[0] += LEASE.total_seconds()  # lapsed
    runner = replayer(aws, Clock())
    runner.progress.clock = lambda: now[0]
    summary = runner.run(spec)
    assert (summary.status, summary.sent) == ("done", 3)


def test_two_starts_making_a_new_replay_at_once_one_wins():
    spec = Spec("raced", Selection(T0, T0 + timedelta(hours=1)))
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="eu-west-2")
        dynamodb.create_table(
            TableName="t",
            KeySchema=[{"AttributeName": "lease", "KeyType": "HASH"}, {"AttributeName": "shardId", "KeyType": "RANGE"}],
            AttributeDefinitions=[
                {"AttributeName": "lease", "AttributeType": "S"},
                {"AttributeName": "shardId", "AttributeType": "S"},
            ],
            BillingMode="PAY_PER_REQUEST",
        )
        first, second = Progress(dynamodb, "t"), Progress(dynamodb, "t")
        # the second read "no such replay" before the first wrote it: its put is refused, the claim decides
        stale = [True]

        def read(name: str) -> dict[str, Any] | None:
            if stale.pop() if stale else False:
                return None
            return Progress.get(second, name)

        second.get = read  # type: ignore[method-assign]
        first.begin(spec, "a")
        with pytest.raises(ReplayRunning):
            Progress.begin(second, spec, "b")
        assert first.get("raced") is not None
        assert (first.get("raced") or {})["leaseOwner"] == "a"


# -- what a mistake is told ------------------------------------------------------------------------


def test_a_name_of_thousands_of_characters_is_echoed_by_its_start(capsys: pytest.CaptureFixture[str]):
    from rdss.cli import main

    name = "a" * 5_000
    code = main(["replay", "start", name, "--since", "2026-11-29T00:00:00Z", "--url", "memory://x"])
    said = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(said) == 1
    assert "a" * 60 + "..." in said[0]
    assert "a" * 61 not in said[0]
    assert len(said[0]) < 200
    for command in ("status", "cancel"):  # never looked for: no replay can have it
        code = main(["replay", command, name, "--url", "kinesis://x?region=eu-west-2&endpoint=http://127.0.0.1:1"])
        said = capsys.readouterr().err.strip().splitlines()
        assert code == 1
        assert len(said) == 1
        assert said[0].startswith("no replay " + "a" * 60 + "...")
        assert len(said[0]) < 200


def test_a_deployment_without_its_tables_is_named_with_its_environment(aws: dict[str, Any]):
    from rdss.processors.replay_progress import NotDeployed

    runner = Replayer(Deployment("nosuch"), aws.__getitem__)
    for dry_run in (True, False):
        with pytest.raises(NotDeployed) as raised:
            runner.run(Spec("x", Selection(T0, T0 + timedelta(hours=1))), dry_run=dry_run)
        assert str(raised.value) == "no checkpoints table rdss-nosuch-checkpoints (is 'nosuch' deployed?)"


def test_a_since_before_the_first_utc_hour_is_refused():
    with pytest.raises(ValueError, match="before the first hour"):
        Selection(datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=1))), T0)


def test_a_running_replay_keeps_its_claim_past_its_lease_by_renewing_it(
    aws: dict[str, Any], monkeypatch: pytest.MonkeyPatch
):
    import time

    archived(aws, [orjson.dumps(Workload(110 + i).message("MetadataCreate", "Event")) for i in range(4)])
    monkeypatch.setattr("rdss.processors.replay.BATCH", 2)
    monkeypatch.setattr("rdss.processors.replay_progress.LEASE", timedelta(seconds=2))  # renewed every 0.5 s
    spec = Spec("slow", Selection(T0, T0 + timedelta(hours=1)))
    refused: list[str] = []

    def slow_batch(_: Any) -> None:
        if not refused:
            time.sleep(3.5)  # a batch slower than the lease: only renewals keep the claim
            with pytest.raises(ReplayRunning) as raised:
                replayer(aws, Clock()).run(spec)
            refused.append(str(raised.value))

    summary = replayer(aws, Clock()).run(spec, on_batch=slow_batch)
    assert (summary.status, summary.sent, summary.problems) == ("done", 4, [])
    assert len(refused) == 1
