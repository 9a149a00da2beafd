"""The defaults that cost less: shard counts sized from the traffic, the claims table's
provisioned capacity, log levels, stream retention and the buckets' lifecycle rules."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from rdss.cost.estimate import alarm_count
from rdss.deployment.settings import load_file
from rdss.deployment.topology import RDSS, Deployment
from stacks.config import load
from stacks.state import CLAIMS_TABLE
from tests.cdk.conftest import CONTEXT, Synthesized, synthesize
from tests.cdk.test_topology import messaging_bucket_id

ROOT = Path(__file__).resolve().parents[2]


def streams_by_name(synthesized: Synthesized) -> dict[str, dict[str, Any]]:
    return {s["Properties"]["Name"]: s["Properties"] for s in synthesized.resources("AWS::Kinesis::Stream").values()}


def shard_counts(synthesized: Synthesized) -> dict[str, int]:
    names = Deployment(synthesized.config.name)
    streams = streams_by_name(synthesized)
    return {c.name: streams[names.stream(c.name)]["ShardCount"] for c in RDSS.channels}


def test_dev_keeps_one_shard_per_channel_for_24_hours(dev: Synthesized) -> None:
    assert shard_counts(dev) == {c.name: 1 for c in RDSS.channels}
    for stream in streams_by_name(dev).values():
        assert stream["StreamModeDetails"] == {"StreamMode": "PROVISIONED"}
        assert stream["RetentionPeriodHours"] == 24


def test_prod_streams_are_provisioned_and_sized_from_its_traffic(prod: Synthesized) -> None:
    assert prod.config.traffic.rate_per_second == 116
    assert shard_counts(prod) == dict(prod.config.capacity.shards)
    for stream in streams_by_name(prod).values():
        assert stream["StreamModeDetails"] == {"StreamMode": "PROVISIONED"}
        assert stream["RetentionPeriodHours"] == 24  # beyond it, rdss replay sends the archived records again
    for function in prod.resources("AWS::Lambda::Function").values():
        assert function["Properties"]["TracingConfig"] == {"Mode": "Active"}  # sampled: Lambda's 1/s and 5 %


def test_retention_and_tracing_are_set_in_cdk_json(tmp_path: Path) -> None:
    context = copy.deepcopy(CONTEXT["rdss"])
    context["environments"]["prod"]["stream_retention_hours"] = 72
    context["environments"]["prod"]["tracing"] = "pass-through"
    synthesized = synthesize("prod", tmp_path, rdss=context)
    assert {s["RetentionPeriodHours"] for s in streams_by_name(synthesized).values()} == {72}
    for processor in RDSS.processors:
        function = synthesized.stack.messaging.processors[processor.name].function
        properties = synthesized.json["Resources"][synthesized.logical_id(function)]["Properties"]
        assert properties["TracingConfig"] == {"Mode": "PassThrough"}


@pytest.fixture(scope="module")
def prod_at_1000(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """prod synthesised with ``traffic.rate_per_second`` 1,000 (and cdk-nag's checks)."""
    context = copy.deepcopy(CONTEXT["rdss"])
    context["environments"]["prod"]["traffic"]["rate_per_second"] = 1000
    return synthesize("prod", tmp_path_factory.mktemp("cdk-prod-1000"), rdss=context)


def test_a_higher_rate_gets_more_shards_where_the_traffic_goes(prod: Synthesized, prod_at_1000: Synthesized) -> None:
    shards = shard_counts(prod_at_1000)
    assert shards == dict(prod_at_1000.config.capacity.shards)
    # 3.7 MB/s into input, read by the broker and the archiver, twice over: 8 shards; most
    # messages are metadata ones; the other channels' few records fit one shard
    assert shards["input"] == 8
    assert shards["metadata"] == 6
    assert {name: n for name, n in shards.items() if name not in ("input", "metadata")} == {
        name: 1 for name in shards if name not in ("input", "metadata")
    }
    assert sum(shards.values()) > sum(shard_counts(prod).values())


def test_on_demand_streams_and_table_stay_an_option(tmp_path: Path) -> None:
    context = copy.deepcopy(CONTEXT["rdss"])
    context["environments"]["prod"]["stream_capacity"] = {"mode": "on-demand"}
    context["environments"]["prod"]["table_capacity"] = {"mode": "on-demand"}
    synthesized = synthesize("prod", tmp_path, rdss=context)
    for stream in streams_by_name(synthesized).values():
        assert stream["StreamModeDetails"] == {"StreamMode": "ON_DEMAND"}
        assert "ShardCount" not in stream
    tables = synthesized.resources("AWS::DynamoDB::Table").values()
    assert {t["Properties"]["BillingMode"] for t in tables} == {"PAY_PER_REQUEST"}
    assert not synthesized.resources("AWS::ApplicationAutoScaling::ScalableTarget")


def test_prod_claims_table_is_provisioned_and_auto_scaled(prod: Synthesized) -> None:
    plan = prod.config.capacity
    names = Deployment("prod")
    tables = {t["Properties"]["TableName"]: t["Properties"] for t in prod.resources("AWS::DynamoDB::Table").values()}
    claims = tables.pop(names.table(CLAIMS_TABLE))
    assert claims.get("BillingMode", "PROVISIONED") == "PROVISIONED"  # CloudFormation's default
    assert claims["ProvisionedThroughput"] == {
        "ReadCapacityUnits": plan.read_units,
        "WriteCapacityUnits": plan.write_units,
    }
    # 116 messages/s on one shard, two batches at a time, 58 records a batch: 1 write unit a
    # claim (a conditional PutItem) plus the ledger's 4 (74 + 58 x 65 bytes) over 58, at 70 %:
    # 116 x 1.069 / 0.7 = 177.1, rounded up
    assert plan.write_units == 178
    assert all(t["BillingMode"] == "PAY_PER_REQUEST" for t in tables.values())
    targets = {
        t["Properties"]["ScalableDimension"]: t["Properties"]
        for t in prod.resources("AWS::ApplicationAutoScaling::ScalableTarget").values()
    }
    assert targets["dynamodb:table:WriteCapacityUnits"]["MinCapacity"] == plan.write_units
    assert targets["dynamodb:table:WriteCapacityUnits"]["MaxCapacity"] == plan.write_units * 4
    assert targets["dynamodb:table:ReadCapacityUnits"]["MinCapacity"] == plan.read_units
    policies = prod.resources("AWS::ApplicationAutoScaling::ScalingPolicy").values()
    assert sorted(p["Properties"]["TargetTrackingScalingPolicyConfiguration"]["TargetValue"] for p in policies) == [
        70,
        70,
    ]


def test_dev_tables_are_all_on_demand(dev: Synthesized) -> None:
    assert {t["Properties"]["BillingMode"] for t in dev.resources("AWS::DynamoDB::Table").values()} == {
        "PAY_PER_REQUEST"
    }
    assert not dev.resources("AWS::ApplicationAutoScaling::ScalableTarget")


def test_every_function_logs_at_info_in_dev_and_prod(synthesized: Synthesized) -> None:
    functions = synthesized.resources("AWS::Lambda::Function")
    levels = {
        f["Properties"]["Environment"]["Variables"].get("POWERTOOLS_LOG_LEVEL")
        for f in functions.values()
        if "POWERTOOLS_LOG_LEVEL" in f["Properties"].get("Environment", {}).get("Variables", {})
    }
    assert levels == {"INFO"}


def _rules(synthesized: Synthesized, logical_id: str) -> list[dict[str, Any]]:
    rules = synthesized.json["Resources"][logical_id]["Properties"]["LifecycleConfiguration"]["Rules"]
    return [r for r in rules if "Prefix" not in r and r["Id"] == "Expire"]


def _tiers(rule: dict[str, Any]) -> list[tuple[str, int]]:
    return [(t["StorageClass"], t["TransitionInDays"]) for t in rule.get("Transitions", [])]


def test_prod_audit_archive_goes_down_the_glacier_tiers_and_expires_after_seven_years(prod: Synthesized) -> None:
    (audit,) = _rules(prod, messaging_bucket_id(prod, "audit"))
    assert _tiers(audit) == [("STANDARD_IA", 30), ("GLACIER_IR", 90), ("DEEP_ARCHIVE", 365)]
    assert audit["ExpirationInDays"] == 2557
    (errors,) = _rules(prod, messaging_bucket_id(prod, "errors"))
    assert errors["ExpirationInDays"] == 730
    assert not _tiers(errors)  # small objects: S3 would not move them anyway


def test_the_curated_bucket_expires_with_its_environment(dev: Synthesized, prod: Synthesized) -> None:
    for synthesized, expected in ((dev, (30, [])), (prod, (2557, [("STANDARD_IA", 90)]))):
        curated = synthesized.logical_id(synthesized.stack.analytics.curated)
        (rule,) = _rules(synthesized, curated)
        assert (rule["ExpirationInDays"], _tiers(rule)) == expected


def test_dev_archives_expire_after_30_days(dev: Synthesized) -> None:
    for bucket in ("audit", "errors"):
        (rule,) = _rules(dev, messaging_bucket_id(dev, bucket))
        assert rule["ExpirationInDays"] == 30
        assert not _tiers(rule)


def test_the_cost_model_counts_the_alarms_the_stack_raises(synthesized: Synthesized) -> None:
    assert len(synthesized.resources("AWS::CloudWatch::Alarm")) == alarm_count(RDSS)


@pytest.mark.parametrize("environment", ["dev", "staging", "prod"])
def test_the_cost_model_prices_the_settings_the_cdk_app_deploys(environment: str) -> None:
    """rdss bench cost reads cdk.json without the CDK (rdss.deployment.settings.load_file): the same typed
    settings, from the same file, as the app's synthesis with no -c overrides."""
    assert load_file(environment) == load(CONTEXT["rdss"], environment, environ={})
    assert load_file(environment, ROOT / "cdk.json") == load_file(environment)
