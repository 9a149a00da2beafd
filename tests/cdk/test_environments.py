"""What differs between environments: prod keeps its data, dev does not; capacity; alarms."""

from __future__ import annotations

import pytest

from rdss.deployment.topology import RDSS
from tests.cdk.conftest import Synthesized

#: Resources that hold data: prod retains them on stack deletion, dev deletes them.
DATA = (
    "AWS::S3::Bucket",
    "AWS::DynamoDB::Table",
    "AWS::Kinesis::Stream",
    "AWS::KMS::Key",
    "AWS::SQS::Queue",
    "AWS::Logs::LogGroup",
)


@pytest.mark.parametrize("kind", DATA)
def test_prod_retains_data_on_stack_deletion(prod: Synthesized, kind: str) -> None:
    resources = prod.resources(kind)
    assert resources
    for logical_id, resource in resources.items():
        assert resource.get("DeletionPolicy") == "Retain", logical_id
        assert resource.get("UpdateReplacePolicy") == "Retain", logical_id


@pytest.mark.parametrize("kind", DATA)
def test_dev_deletes_data_on_stack_deletion(dev: Synthesized, kind: str) -> None:
    for logical_id, resource in dev.resources(kind).items():
        assert resource.get("DeletionPolicy") == "Delete", logical_id


def test_dev_empties_its_buckets_so_they_can_go_and_prod_never_does(dev: Synthesized, prod: Synthesized) -> None:
    assert len(dev.resources("Custom::S3AutoDeleteObjects")) == len(dev.resources("AWS::S3::Bucket"))
    assert not prod.resources("Custom::S3AutoDeleteObjects")


def test_prod_tables_and_stack_are_protected(dev: Synthesized, prod: Synthesized) -> None:
    assert prod.stack.termination_protection is True
    assert dev.stack.termination_protection is False
    for table in prod.resources("AWS::DynamoDB::Table").values():
        assert table["Properties"]["DeletionProtectionEnabled"] is True


def test_names_carry_the_environment(synthesized: Synthesized) -> None:
    env = synthesized.config.name
    assert synthesized.stack.stack_name == f"rdss-{env}"
    for function in synthesized.resources("AWS::Lambda::Function").values():
        name = function["Properties"].get("FunctionName")
        assert name is None or name.startswith(f"rdss-{env}-")


def _alarms(synthesized: Synthesized) -> dict[str, dict[str, object]]:
    return {
        a["Properties"]["AlarmName"]: a["Properties"] for a in synthesized.resources("AWS::CloudWatch::Alarm").values()
    }


def test_alarms_notify_the_topic_with_the_environments_thresholds(synthesized: Synthesized) -> None:
    alarms = _alarms(synthesized)
    thresholds = synthesized.config.alarms
    prefix = f"rdss-{synthesized.config.name}"
    topic = synthesized.logical_id(synthesized.stack.messaging.monitoring.topic)
    expected = {
        f"{prefix}-error-channel-traffic": thresholds.error_channel_records,
        f"{prefix}-invalid-channel-traffic": thresholds.invalid_channel_records,
    }
    for processor in RDSS.processors:
        if processor.sources:
            expected[f"{prefix}-{processor.name}-iterator-age"] = thresholds.iterator_age_seconds * 1000
        expected[f"{prefix}-{processor.name}-on-failure-depth"] = thresholds.dlq_depth
        expected[f"{prefix}-{processor.name}-errors"] = thresholds.lambda_errors
        expected[f"{prefix}-{processor.name}-throttles"] = thresholds.lambda_throttles
    assert {name: alarm["Threshold"] for name, alarm in alarms.items()} == expected
    for alarm in alarms.values():
        assert alarm["AlarmActions"] == [{"Ref": topic}]
        assert alarm["TreatMissingData"] == "notBreaching"


def test_iterator_age_alarms_watch_the_lambda_metric(synthesized: Synthesized) -> None:
    for name, alarm in _alarms(synthesized).items():
        if name.endswith("-iterator-age"):
            assert alarm["MetricName"] == "IteratorAge"
            assert alarm["Statistic"] == "Maximum"


def test_a_dashboard_shows_channels_processors_and_archives(synthesized: Synthesized) -> None:
    (dashboard,) = synthesized.resources("AWS::CloudWatch::Dashboard").values()
    body = str(dashboard["Properties"]["DashboardBody"])
    assert dashboard["Properties"]["DashboardName"] == f"rdss-{synthesized.config.name}"
    for text in ("IncomingRecords", "IteratorAge", "DeliveryToS3.DataFreshness", "Throttles", "Alarms"):
        assert text in body
