"""The cost model's arithmetic on a small fixed configuration, against figures worked out by hand;
its command; and its per-message figures against a fresh measurement."""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace
from datetime import date
from pathlib import Path

import orjson
import pytest

from rdss.bench import broker as broker_bench
from rdss.bench.cost_measure import call_latency, item_bytes, measure
from rdss.cli import main
from rdss.cost import estimate as cost
from rdss.cost import peers as cost_peers
from rdss.cost import prices, sensitivity
from rdss.cost import rules as cost_rules
from rdss.cost.prices import PRICES
from rdss.deployment.capacity import MEASURED, ChannelLoad, Figures, Traffic, records_per_invocation, shards_needed
from rdss.deployment.settings import MAX_SETTINGS_BYTES, ConfigError, FunctionSettings, load, load_file

GIB = 2**30
MONTH = 730 * 3600  # seconds

#: Round figures: 1,000-byte messages, all of them metadata ones, no replies.
FIGURES = Figures(
    input_bytes=1000,
    routed_bytes=1100,
    routed_shares={"metadata": 1.0},
    reply_share=0.0,
    decoration_bytes=100,
    claim_item_bytes=400,
    claim_write_units=1,
    ledger_base_bytes=100,
    ledger_record_bytes=50,
    reply_read_units=0.5,
    broker_cpu_per_message=0.001,
    broker_cpu_per_invocation=0.01,
    log_bytes_per_invocation=1000,
    debug_log_bytes_per_message=500,
    log_compression=0.1,
    metric_series=4,
    archive_entry_bytes=1200,
    archive_gzip_bytes={1: 600, 10: 300},
    archive_cpu_per_entry=0.0005,
    curated_bytes=100,
)
#: One shard per channel kept 48 hours, batches of 10 every second, a full vCPU, audit kept 45 days.
SMALL = {
    "removal_policy": "destroy",
    "region": "us-east-1",
    "traffic": {"rate_per_second": 10, "headroom": 1},
    "stream_capacity": {"mode": "provisioned", "shards": {"default": 1}},
    "stream_retention_hours": 48,
    "table_capacity": {"mode": "on-demand", "target_utilization": 0.5},
    "event_source": {"batch_size": 10, "max_batching_window_seconds": 1, "parallelization_factor": 1},
    "functions": {"default": {"memory_mb": 1769, "log_level": "INFO"}},
    "retention": {"log_days": 30, "buckets": {"audit": {"expire_after_days": 45}}},
    "archive": {"buffer_seconds": 100, "buffer_mib": 1},
    "analytics": {"glue_workers": 1},
}
SETTINGS = load({"environments": {"small": SMALL}}, "small", environ={})


def test_the_bill_of_a_small_fixed_configuration_by_hand() -> None:
    bill = cost.project(SETTINGS, 10, figures=FIGURES, rejected_share=0.0)
    # 10 messages/s: a broker invocation each second of 10 records (one slot, a 1 s window); the
    # archiver at its own mapping's batches (archive defaults: 10,000 records, 60 s): 600 records
    # each minute
    gb = 1769 / 1024
    assert bill.region == "us-east-1"
    expected = {
        # 7 channels, one shard each; retention past 24 h on all of them
        "Kinesis shard-hours": 7 * 730 * 0.015,
        "Kinesis extended retention": 7 * 730 * 0.020,
        # 10 records/s on input and 10 on metadata, one 25 KB unit each
        "Kinesis PUT payload units": 20 * MONTH / 1e6 * 0.014,
        # 1 unit a claim (a conditional PutItem of 400 bytes), the ledger (100 + 10 x 50 bytes:
        # 1 unit) over 10 records
        "DynamoDB claims (on-demand writes)": 10 * 1.1 * MONTH / 1e6 * 0.625,
        "DynamoDB look-ups (on-demand reads)": 0.0,
        # 8 days of claims (400 + 100 bytes) and ledgers (100 + 500 + 100 bytes), storage + PITR
        "DynamoDB storage and backups": (10 * 691_200 * 500 + 691_200 * 700) / GIB * (0.25 + 0.20),
        # broker 1/s, archiver 1/60 s, the sweep every 300 s
        "Lambda requests": (1 + 1 / 60 + 1 / 300) * MONTH / 1e6 * 0.20,
        # broker: 0.01 + 10 x 0.001 s of CPU, 3 calls in turn (the 10 claims together, metadata's
        # PutRecords, the ledger) of 12 ms; archiver: 0.01 + 600 x 0.0005 s, one PutRecordBatch; sweep: 0.01 + 2 calls
        "Lambda duration": (0.056 + 0.322 / 60 + 0.034 / 300) * gb * MONTH * 0.0000133334,
        "X-Ray traces": (1 + 1 / 60 + 1 / 300) * MONTH / 1e6 * 5.00,
        # one gzip member a minute of 600 x 300 bytes (the figure at 10 entries a member and
        # more), billed in 5,120-byte steps: 36 of them
        "Firehose ingestion": 36 * 5120 / 60 * MONTH / GIB * 0.029,
        # 3,000 bytes/s, a month's worth kept (the next month's is past 45 days)
        "S3 archive storage (audit, errors)": 3000 * MONTH / GIB * 0.023,
        # one object per 100 s buffer: 26,280 a month
        "S3 requests and lifecycle transitions": 26_280 / 1000 * 0.005,
        # 100 bytes a message, twelve months kept in Standard
        "S3 curated storage": 12 * 10 * 100 * MONTH / GIB * 0.023,
        # 1,000 bytes an invocation
        "CloudWatch Logs ingestion": (1 + 1 / 60 + 1 / 300) * 1000 * MONTH / GIB * 0.50,
        "CloudWatch Logs storage": (1 + 1 / 60 + 1 / 300) * 1000 * MONTH / GIB * (30 / (365.25 / 12)) * 0.1 * 0.03,
        # 4 series + 3 cold-start metrics; 2 + 4 + 4 + 3 alarms + the archiver's 4; a dashboard
        "CloudWatch metrics, alarms and dashboard": 7 * 0.30 + 17 * 0.10 + 3.00,
        # two keys; 18 clients (shards x (writer + readers), 3 tables) a key each 5 minutes
        "KMS keys and requests": 2 * 1.00 + 18 * 12 * 730 / 1e4 * 0.03,
    }
    assert bill.items == pytest.approx(expected, rel=1e-9)
    assert bill.total == pytest.approx(sum(expected.values()), rel=1e-9)
    assert bill.usd_per_million == pytest.approx(sum(expected.values()) / (10 * MONTH) * 1e6, rel=1e-9)
    assert bill.as_dict()["total_usd_per_month"] == round(sum(expected.values()), 2)
    assert bill.formulas.keys() == expected.keys()  # every item says how it was computed
    assert any("fallback" in note for note in bill.notes)  # 12 ms assumed, and said so


def test_a_measured_call_latency_replaces_the_fallback() -> None:
    measured = replace(FIGURES, call_seconds=0.004)
    bill = cost.project(SETTINGS, 10, figures=measured, rejected_share=0.0)
    gb = 1769 / 1024
    # the same invocations as by hand above, each call 4 ms instead of 12
    seconds = (0.020 + 3 * 0.004) + (0.310 + 0.004) / 60 + (0.010 + 2 * 0.004) / 300
    assert bill.items["Lambda duration"] == pytest.approx(seconds * gb * MONTH * 0.0000133334)
    assert any("4.00 ms p50, measured" in note for note in bill.notes)
    assert not any("fallback" in note for note in bill.notes)


def test_the_archiver_is_priced_at_its_own_batches_not_the_brokers() -> None:
    prod = load_file("prod")
    # one input shard read in two slots (parallelization 2): 58 records a second each, a batch a
    # minute of 3,480 (prod's archive mapping: 10,000 records, 60 s); the broker's is 58 (1 s)
    assert cost.archiver_batch(prod, 116, 1) == pytest.approx(116 / 2 * 60)
    assert cost.archiver_batch(prod, 1000, 8) == pytest.approx(1000 / 16 * 60)
    assert cost.archiver_batch(prod, 10_000, 1) == 10_000


def test_the_deployments_region_selects_the_price_table() -> None:
    prod = load_file("prod")
    assert prod.region == "eu-west-2"
    london = cost.project(prod, 116)
    virginia = cost.project(prod, 116, region="us-east-1")
    assert (london.region, virginia.region) == ("eu-west-2", "us-east-1")
    shards = sum(prod.capacity_at(116).shards.values())
    assert london.items["Kinesis shard-hours"] == pytest.approx(shards * 730 * 0.0176)
    assert virginia.items["Kinesis shard-hours"] == pytest.approx(shards * 730 * 0.015)
    with pytest.raises(prices.UnknownRegion, match="no price table for region 'ap-south-1'"):
        cost.project(prod, 116, region="ap-south-1")
    with pytest.raises(prices.UnknownRegion):
        cost_peers.peer("sqs-powertools", replace(prod, region=None), 116)


def test_an_unknown_region_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    context = json.loads((Path(__file__).parents[2] / "cdk.json").read_text())
    context["context"]["rdss"]["defaults"]["region"] = "ap-south-1"
    config = tmp_path / "cdk.json"
    config.write_text(json.dumps(context))
    assert main(["bench", "cost", "--env", "prod", "--rate", "1", "--config", str(config)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "no price table for region 'ap-south-1'" in err
    assert main(["bench", "cost", "--env", "prod", "--rate", "1", "--region", "mars-1"]) == 2
    assert "'mars-1'" in capsys.readouterr().err


def test_provisioned_table_on_demand_streams_and_the_per_record_archive_by_hand() -> None:
    on_demand = replace(SETTINGS.stream_capacity, mode="on-demand")
    provisioned = replace(SETTINGS.table_capacity, mode="provisioned")
    changed = replace(SETTINGS, stream_capacity=on_demand, table_capacity=provisioned)
    bill = cost.project(changed, 10, figures=FIGURES, rejected_share=0.0, archive="per-record")
    items = bill.items
    # an on-demand stream starts at four shards: 2.5 records a batch, so 1 unit a claim and the
    # ledger's unit over 2.5 records, 14 write units/s at 50 %: 28 WCU; no reads, but one RCU
    assert items["DynamoDB claims (provisioned writes)"] == pytest.approx(28 * 730 * 0.00065)
    assert items["DynamoDB look-ups (provisioned reads)"] == pytest.approx(1 * 730 * 0.00013)
    assert items["Kinesis on-demand stream-hours"] == pytest.approx(7 * 730 * 0.04)
    # input: 1,000 bytes rounded to 1 KB; metadata: 1,100 to 2 KB
    assert items["Kinesis on-demand data in"] == pytest.approx((10 * 1024 + 10 * 2048) * MONTH / GIB * 0.08)
    # input read twice (broker, archive), metadata once
    assert items["Kinesis on-demand data out"] == pytest.approx((2 * 10_000 + 11_000) * MONTH / GIB * 0.04)
    assert items["Kinesis extended retention"] == pytest.approx(21_000 * 24 * 3600 / GIB * 0.10)
    # each record billed as 5 KB; no archiver function (Firehose reads the streams)
    assert items["Firehose ingestion"] == pytest.approx(10 * 5120 * MONTH / GIB * 0.029)
    assert items["Lambda requests"] == pytest.approx((4 + 1 / 300) * MONTH / 1e6 * 0.20)


def test_a_peer_by_hand() -> None:
    bill = cost_peers.peer("sqs-powertools", SETTINGS, 10, figures=FIGURES, rejected_share=0.0)
    # producers: one request per 10; Lambda's pollers get 2 each (10/s over 5): 5 receives,
    # 5 batch deletes and 5 sends to metadata a second, 0.25 idle polls; the metadata consumer
    # receives and deletes in tens; the four other queues' consumers poll idle (0.05/s each)
    requests = 1 + 5 + 0.25 + 5 + 5 + (2 + 0.05) + 4 * 0.05
    assert bill.items["SQS requests"] == pytest.approx(requests * MONTH / 1e6 * 0.40)
    # Powertools: a conditional put and an update per record
    assert bill.items["DynamoDB idempotency (on-demand writes)"] == pytest.approx(10 * 2 * MONTH / 1e6 * 0.625)
    # 5 invocations/s of 2 records: 0.012 s of CPU, 2 x 2 + 1 (metadata) + 1 (Firehose) calls
    seconds = 0.012 + 6 * 0.012
    assert bill.items["Lambda duration"] == pytest.approx(5 * seconds * 1769 / 1024 * MONTH * 0.0000133334)
    assert bill.items["Firehose ingestion"] == pytest.approx(10 * 5120 * MONTH / GIB * 0.029)


def test_sizing_rules() -> None:
    # 3.5 MiB/s in needs 4 shards; read by two, 7 MiB/s out needs 4; twice over, 7 (ceil 7.0)
    load = ChannelLoad(records_per_second=1000, bytes_per_second=3.5 * 2**20, readers=2)
    assert shards_needed(load) == 4
    assert shards_needed(load, 2.0) == 7
    assert shards_needed(ChannelLoad(2500, 1000, 1)) == 3  # records bound
    assert shards_needed(ChannelLoad(0, 0, 1)) == 1
    assert records_per_invocation(10, 2, 100, 1) == 5
    assert records_per_invocation(1000, 2, 100, 1) == 100
    assert records_per_invocation(0.5, 1, 100, 1) == 1
    assert records_per_invocation(0, 1, 100, 1) == 0


def test_the_models_broker_calls_are_b1s(monkeypatch: pytest.MonkeyPatch) -> None:
    """B1 (``rdss bench broker --stub-aws``, batches of 1,000) counts the calls the broker makes;
    the model's count for the same batch and mix is the same: a PutItem per claim, and 7 calls
    per 1,000 besides (PutRecords per channel reached, the look-ups, the ledger)."""
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    measured = broker_bench.run(2000, batch=1000, stub_aws=True)
    loads = Traffic(1000, MEASURED, rejected_share=0.0).loads()
    modelled = cost.broker_calls(loads, 1000, 1000, MEASURED)
    assert measured.calls_per_1000 == modelled
    assert measured.calls["PutItem"] == 2000 + 2  # the claims, then one ledger a batch
    assert modelled - 1000 <= 10


def test_every_price_names_its_source_and_date() -> None:
    assert {"us-east-1", "eu-west-2"} <= set(prices.REGIONS)
    for region, table in prices.REGIONS.items():
        assert table.keys() == PRICES.keys(), region  # every region prices every item
        for name, price in table.items():
            assert price.usd > 0, (region, name)
            assert price.source.startswith("https://aws.amazon.com/"), (region, name)
            assert price.source.endswith("/pricing/"), (region, name)
            assert date.fromisoformat(price.as_of) <= date.today(), (region, name)
            assert price.unit, (region, name)


def test_the_targets_of_issue_32_by_the_corrected_model() -> None:
    """prod in its own region (eu-west-2), peers priced with its capacity modes and batching, and
    its streams at the base 24 hours the targets assume (the week prod keeps today is about half
    the bill at 100,000 a day: it stays until consumers can be sent archived records again)."""
    prod = replace(load_file("prod"), stream_retention_hours=24)
    at = {rate: cost.project(prod, rate) for rate in (100_000 / 86_400, 116, 1000)}
    sqs = {rate: cost_peers.peer("sqs-powertools", prod, rate) for rate in at}
    assert at[100_000 / 86_400].total <= 130
    assert at[116].total <= 0.8 * sqs[116].total
    assert at[116].total < min(cost_peers.peer(name, prod, 116).total for name in cost_peers.PEERS)
    # the claims' one write unit a message (a conditional PutItem) against Powertools' two
    assert at[1000].total <= 0.6 * sqs[1000].total


def test_the_peers_are_priced_with_prods_capacity_modes() -> None:
    prod = load_file("prod")
    bill = cost_peers.peer("sqs-powertools", prod, 116)
    # Powertools' idempotency table provisioned as prod's claims table is: 2 write units a
    # message (a conditional put, then an update) at 70 % use, eu-west-2's WCU-hour
    assert bill.items["DynamoDB idempotency (provisioned writes)"] == pytest.approx(332 * 730 * 0.000772)
    assert not any("on-demand" in item for item in bill.items)
    on_demand = replace(prod, table_capacity=replace(prod.table_capacity, mode="on-demand"))
    bill = cost_peers.peer("sqs-powertools", on_demand, 116)
    assert bill.items["DynamoDB idempotency (on-demand writes)"] == pytest.approx(116 * 2 * MONTH / 1e6 * 0.7425)


def test_the_sqs_peer_batches_with_the_environments_window_by_hand() -> None:
    events = replace(SETTINGS.event_source, batch_size=100, max_batching_window_seconds=5)
    table = replace(SETTINGS.table_capacity, mode="provisioned")
    settings = replace(SETTINGS, event_source=events, table_capacity=table)
    bill = cost_peers.peer("sqs-powertools", settings, 10, figures=FIGURES, rejected_share=0.0)
    # 2 messages/s for each of 5 pollers, 5 s of window: invocations of 10; receives and batch
    # deletes of 10 (1/s each), 0.25 idle polls, one send to metadata an invocation, producers'
    # 1/s, the metadata consumer's 2 + 0.05, four idle queues
    requests = 1 + (1 + 0.25 + 1) + 1 + (2 + 0.05) + 4 * 0.05
    assert bill.items["SQS requests"] == pytest.approx(requests * MONTH / 1e6 * 0.40)
    # 20 write units/s at 50 %: 40 WCU
    assert bill.items["DynamoDB idempotency (provisioned writes)"] == pytest.approx(40 * 730 * 0.00065)
    # one invocation a second: 0.01 + 10 x 0.001 s CPU, 2 x 10 + 1 (metadata) + 1 (Firehose) calls
    seconds = 0.020 + 22 * 0.012
    assert bill.items["Lambda duration"] == pytest.approx(seconds * 1769 / 1024 * MONTH * 0.0000133334)
    assert bill.items["Lambda requests"] == pytest.approx(1 * MONTH / 1e6 * 0.20)


def test_the_sensitivity_line_names_what_would_flip_the_ranking() -> None:
    prod = replace(load_file("prod"), stream_retention_hours=24)
    line = sensitivity.line(prod, 1000, "sqs-powertools")
    ratio = cost.project(prod, 1000).total / cost_peers.peer("sqs-powertools", prod, 1000).total
    assert ratio < 0.6
    assert line.startswith(f"vs sqs-powertools: rdss costs {ratio:.2f}x")
    # the claims' write units flip it somewhere between 1x and 16x; the answer is where
    compared = sensitivity.ratio(prod, 1000, "sqs-powertools")
    k = sensitivity.flip(compared, sensitivity.ASSUMPTIONS[3])
    assert k is not None
    assert 1 < k < 16
    figures = replace(MEASURED, claim_write_units=MEASURED.claim_write_units * k * 1.01)
    assert compared(figures, 0.01) > 1
    figures = replace(MEASURED, claim_write_units=MEASURED.claim_write_units * k * 0.99)
    assert compared(figures, 0.01) < 1
    assert f"write units per claim x{k:.3g}" in line


def test_explain_prints_each_items_formula_and_the_sensitivity(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "cost", "--env", "prod", "--rate", "116", "--explain"]) == 0
    out = capsys.readouterr().out
    assert "eu-west-2 list prices" in out.splitlines()[0]
    assert "= 332 WCU" not in out  # prod's own claims: 116 x ~2.04 units at 70 %
    assert re.search(r"= \d+ shards \(input 1, metadata 1", out)
    assert "per-call latency 12 ms p50: the fallback assumption" in out
    assert sum(line.startswith("  sensitivity: vs ") for line in out.splitlines()) == len(cost_peers.PEERS)


def test_the_command_prints_the_bill_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "cost", "--env", "prod", "--rate", "116", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert set(printed) == {"env", "region", "rate_per_second", "items", "total_usd_per_month", "usd_per_million"}
    assert printed["env"] == "prod"
    assert printed["rate_per_second"] == 116
    assert printed["total_usd_per_month"] == pytest.approx(sum(printed["items"].values()), abs=0.05)
    assert main(["bench", "cost", "--env", "prod", "--rate", "116", "--peer", "eventbridge", "--json"]) == 0
    assert "EventBridge events" in json.loads(capsys.readouterr().out)["items"]


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        (["--env", "qa", "--rate", "1"], "unknown environment 'qa'"),
        (["--env", "dev"], "--env and --rate are required"),
        (["--env", "dev", "--rate", "1", "--config", "/nonexistent/cdk.json"], "no such file"),
        (["--env", "dev", "--rate", "1", "--config", "/dev/zero"], "/dev/zero: not a regular file"),
        (["--env", "dev", "--rate", "1", "--config", "/"], "/: not a regular file"),
    ],
)
def test_a_mistake_is_one_line_and_exit_2(arguments: list[str], says: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "cost", *arguments]) == 2
    error = capsys.readouterr().err
    assert says in error
    assert error.count("\n") == 1


@pytest.mark.parametrize("rate", ["0", "-1", "nan", "inf", "1e400", "1000001", "fast"])
def test_a_rate_out_of_range_is_refused_when_parsed(rate: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Finite, above 0 and at most a million a second: infinity once reached the model and
    overflowed in its shard sizing (a traceback)."""
    with pytest.raises(SystemExit) as caught:
        main(["bench", "cost", "--env", "dev", "--rate", rate])
    assert caught.value.code == 2
    error = capsys.readouterr().err
    expected = "argument --rate: expected a number of messages per second above 0 and at most 1,000,000"
    assert f"{expected}, got {rate!r}" in error
    assert "Traceback" not in error


def test_the_settings_come_from_the_given_cdk_json(tmp_path: Path) -> None:
    context = {
        "rdss": {
            "defaults": {"removal_policy": "destroy", "functions": {"default": {"memory_mb": 256}}},
            "environments": {"x": {}},
        }
    }
    (tmp_path / "cdk.json").write_text(json.dumps({"context": context}))
    loaded = load_file("x", tmp_path / "cdk.json")
    assert loaded.function("broker") == FunctionSettings(memory_mb=256)
    assert loaded.stream_capacity.mode == "on-demand"
    assert loaded.stream_retention_hours == 24  # a shard's base retention; rdss replay serves what is older
    assert loaded.tracing == "active"
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ConfigError, match="no rdss context"):
        load_file("x", tmp_path / "bad.json")


def test_a_settings_file_too_large_for_a_cdk_json_is_refused_unread(tmp_path: Path) -> None:
    huge = tmp_path / "huge.json"
    with huge.open("wb") as file:  # sparse: no disk used, yet a read of it whole would be 4 MiB+
        file.truncate(MAX_SETTINGS_BYTES + 1)
    with pytest.raises(ConfigError, match=r"^\S*huge.json: larger than 4 MiB, not a cdk.json$"):
        load_file("x", huge)
    exactly = tmp_path / "exactly.json"
    exactly.write_bytes(b" " * (MAX_SETTINGS_BYTES - 2) + b"{}")  # at the limit: read, then judged
    with pytest.raises(ConfigError, match="no rdss context"):
        load_file("x", exactly)


def test_an_items_size_is_counted_as_dynamodb_counts_it() -> None:
    item = {"messageId": {"S": "ab"}, "expiresAt": {"N": "1795000000"}, "records": {"SS": ["x", "yz"]}}
    # names 9 + 9 + 7; values 2, 10 digits -> 5 + 1, 3
    assert item_bytes(item) == 25 + 2 + 6 + 3


@pytest.mark.slow
def test_the_shipped_figures_are_what_the_project_measures() -> None:
    """MEASURED is regenerated with ``rdss bench cost --figures --measure`` when the broker, the
    workload or the logs change; this fails when it was not."""
    fresh = measure(MEASURED.sample)
    for name in (
        "input_bytes",
        "routed_bytes",
        "reply_share",
        "decoration_bytes",
        "claim_item_bytes",
        "claim_write_units",
        "ledger_base_bytes",
        "ledger_record_bytes",
        "archive_entry_bytes",
        "metric_series",
    ):
        assert getattr(fresh, name) == pytest.approx(getattr(MEASURED, name), rel=0.01), name
    assert fresh.routed_shares == pytest.approx(MEASURED.routed_shares, abs=0.005)
    assert fresh.archive_gzip_bytes == pytest.approx(MEASURED.archive_gzip_bytes, rel=0.02)
    assert fresh.log_bytes_per_invocation == pytest.approx(MEASURED.log_bytes_per_invocation, rel=0.05)
    assert fresh.debug_log_bytes_per_message == pytest.approx(MEASURED.debug_log_bytes_per_message, rel=0.05)
    assert fresh.curated_bytes == pytest.approx(MEASURED.curated_bytes, rel=0.05)
    # CPU time depends on the machine and its load: the same order of magnitude
    for name in ("broker_cpu_per_message", "broker_cpu_per_invocation", "archive_cpu_per_entry"):
        ratio = getattr(fresh, name) / getattr(MEASURED, name)
        assert 0.2 < ratio < 5, (name, ratio)
    assert math.isclose(
        orjson.loads(orjson.dumps(fresh.as_dict()))["archive_gzip_bytes"]["100"], fresh.archive_gzip_bytes[100]
    )


def _cost_sections() -> str:
    """docs/operators.md from "What the archive costs" to the end of "What it costs"."""
    text = (Path(__file__).parents[2] / "docs" / "operators.md").read_text()
    return text[text.index("### What the archive costs") : text.index("## Where did it go")]


def test_every_price_is_of_one_date_and_the_docs_and_the_bill_say_it(capsys) -> None:
    assert {price.as_of for price in PRICES.values()} == {prices.AS_OF}
    stated = date.fromisoformat(prices.AS_OF)
    said = f"{stated.day} {stated:%B %Y}"
    docs = _cost_sections()
    dates = re.findall(
        r"\b(?:\d{1,2} )?(?:January|February|March|April|May|June|July|August|September|October|"
        r"November|December) 20\d\d\b",
        docs,
    )
    assert dates == [said], dates  # the prices' one date, said once, and no other
    assert main(["bench", "cost", "--env", "dev", "--rate", "1"]) == 0
    assert f"list prices as of {prices.AS_OF}" in capsys.readouterr().out.splitlines()[0]


def test_every_latency_the_model_assumes_is_one_percentile_and_the_docs_say_which() -> None:
    docs = _cost_sections()
    assert {int(ms) for ms in re.findall(r"\b(\d+) ms\b", docs)} == {round(cost_rules.CALL_SECONDS * 1000)}
    assert cost_rules.LATENCY_PERCENTILE == "p50"
    assert "median (p50)" in docs
    assert not re.search(r"\bp(?!50\b)\d\d\b", docs), re.findall(r"\bp\d\d\b", docs)


def test_tracing_is_set_per_environment_and_priced_only_when_active() -> None:
    context = {"environments": {"small": {**SMALL, "tracing": "pass-through"}}}
    untraced = load(context, "small", environ={})
    assert untraced.tracing == "pass-through"
    assert "X-Ray traces" not in cost.project(untraced, 10, figures=FIGURES).items
    assert "X-Ray traces" not in cost_peers.peer("sqs-powertools", untraced, 10, figures=FIGURES).items
    with pytest.raises(ConfigError, match="tracing: one of"):
        load({"environments": {"small": {**SMALL, "tracing": "sampled"}}}, "small", environ={})


def test_the_per_call_latency_is_measured_on_the_brokers_own_calls() -> None:
    """``--measure`` times every AWS call of the real broker against the embedded emulator."""
    seconds, calls = call_latency(200, batch=100)
    # two invocations: per invocation 100 claims (a PutItem each), a PutRecords per channel
    # reached, the ledger (and look-ups when replies come by): at least 102 each
    assert calls >= 204
    assert 0 < seconds < 1
