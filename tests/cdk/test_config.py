"""Per-environment settings from cdk.json: complete, typed, and strict about typos."""

from __future__ import annotations

import copy

import aws_cdk as cdk
import pytest

from stacks.config import ConfigError, environment_names, load, removal_policy
from tests.cdk.conftest import CONTEXT

RDSS_CONTEXT = CONTEXT["rdss"]


def test_the_three_environments_load() -> None:
    assert environment_names(RDSS_CONTEXT) == ("dev", "staging", "prod")
    configs = {name: load(RDSS_CONTEXT, name, environ={}) for name in environment_names(RDSS_CONTEXT)}
    assert removal_policy(configs["prod"]) == cdk.RemovalPolicy.RETAIN
    assert removal_policy(configs["dev"]) == cdk.RemovalPolicy.DESTROY
    assert configs["staging"].removal_policy in ("retain", "destroy")
    # a shard's base retention (no extended-retention charge) everywhere: a consumer further
    # behind is sent the archived records again (rdss replay)
    assert {name: config.stream_retention_hours for name, config in configs.items()} == {
        "dev": 24,
        "staging": 24,
        "prod": 24,
    }
    for config in configs.values():
        assert config.function("broker").timeout_seconds > 0
        assert config.event_source.retry_attempts <= 10


def test_account_and_region_come_from_arguments_then_cdk_json_then_the_environment() -> None:
    environ = {"CDK_DEFAULT_ACCOUNT": "111111111111", "CDK_DEFAULT_REGION": "us-east-1"}
    from_env = load(RDSS_CONTEXT, "dev", environ=environ)
    assert from_env.account == "111111111111"
    assert from_env.region == RDSS_CONTEXT["defaults"]["region"]  # cdk.json names one
    explicit = load(RDSS_CONTEXT, "dev", account="222222222222", region="eu-west-1", environ=environ)
    assert (explicit.account, explicit.region) == ("222222222222", "eu-west-1")
    agnostic = load(RDSS_CONTEXT, "dev", environ={})
    assert agnostic.account is None


def test_unknown_environment_and_settings_are_errors() -> None:
    with pytest.raises(ConfigError, match="unknown environment"):
        load(RDSS_CONTEXT, "qa", environ={})
    broken = copy.deepcopy(RDSS_CONTEXT)
    broken["environments"]["dev"]["alarms"]["iterator_age_secs"] = 1
    with pytest.raises(ConfigError, match="iterator_age_secs"):
        load(broken, "dev", environ={})
    broken = copy.deepcopy(RDSS_CONTEXT)
    broken["environments"]["dev"]["removal_policy"] = "snapshot"
    with pytest.raises(ConfigError, match="removal_policy"):
        load(broken, "dev", environ={})


def test_record_attempts_are_set_per_environment_within_the_mappings_retries() -> None:
    context = copy.deepcopy(RDSS_CONTEXT)
    assert load(context, "dev", environ={}).event_source.record_attempts == 3  # the default
    context["environments"]["prod"]["event_source"]["record_attempts"] = 5
    assert load(context, "prod", environ={}).event_source.record_attempts == 5
    # dev retries a batch twice: a record failing every time would be parked after 3 attempts
    context["environments"]["dev"]["event_source"]["record_attempts"] = 4
    with pytest.raises(ConfigError, match="record_attempts"):
        load(context, "dev", environ={})


def test_custom_resources_off_keeps_dev_buckets_for_whoever_deletes_the_stack() -> None:
    # dev empties its buckets on deletion through a Lambda-backed custom resource, unless the
    # CloudFormation deploying it cannot run functions (-c custom_resources=false: LocalStack here)
    assert load(RDSS_CONTEXT, "dev", environ={}).auto_delete_objects
    assert not load(RDSS_CONTEXT, "dev", environ={}, custom_resources=False).auto_delete_objects
    assert not load(RDSS_CONTEXT, "prod", environ={}).auto_delete_objects  # retained: never emptied


@pytest.mark.parametrize(("given", "expected"), [("false", False), ("true", True), (False, False), (None, None)])
def test_the_custom_resources_switch_reads_cli_and_json_values(given: object, expected: bool | None) -> None:
    from stacks.app import _flag

    assert _flag(given) is expected


def test_a_malformed_custom_resources_switch_is_refused() -> None:
    from stacks.app import _flag

    with pytest.raises(ConfigError, match="true or false"):
        _flag("maybe")
