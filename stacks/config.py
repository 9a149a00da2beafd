"""The environments' settings as the CDK app uses them.

The settings themselves - typed, checked, merged from ``cdk.json`` - are :mod:`rdss.deployment.settings`,
which needs no CDK (the cost model reads them from an installed wheel). This module re-exports
them for the stacks and adds the little that only constructs need: CloudFormation's removal
policy, the CDK environment, and CloudWatch Logs' retention enum.
"""

from __future__ import annotations

from collections.abc import Mapping

import aws_cdk as cdk
from aws_cdk import aws_logs as logs

from rdss.deployment.settings import (
    CONTEXT_KEY,
    LAMBDA_ARCHITECTURES,
    LOG_RETENTION_DAYS,
    AlarmThresholds,
    AnalyticsSettings,
    ArchiveSettings,
    BucketLifecycle,
    ConfigError,
    EnvironmentConfig,
    EventSourceSettings,
    FunctionSettings,
    RetentionSettings,
    StreamCapacity,
    TableCapacity,
    TrafficSettings,
    VendorSettings,
    environment_names,
    load,
)

__all__ = [
    "CONTEXT_KEY",
    "LAMBDA_ARCHITECTURES",
    "LOG_RETENTION",
    "AlarmThresholds",
    "AnalyticsSettings",
    "ArchiveSettings",
    "BucketLifecycle",
    "ConfigError",
    "EnvironmentConfig",
    "EventSourceSettings",
    "FunctionSettings",
    "RetentionSettings",
    "StreamCapacity",
    "TableCapacity",
    "TrafficSettings",
    "VendorSettings",
    "cdk_environment",
    "environment_names",
    "load",
    "log_retention",
    "removal_policy",
]

#: CloudWatch Logs' retention periods, as the CDK names them (the days rdss.deployment.settings accepts).
LOG_RETENTION: Mapping[int, logs.RetentionDays] = {
    1: logs.RetentionDays.ONE_DAY,
    3: logs.RetentionDays.THREE_DAYS,
    5: logs.RetentionDays.FIVE_DAYS,
    7: logs.RetentionDays.ONE_WEEK,
    14: logs.RetentionDays.TWO_WEEKS,
    30: logs.RetentionDays.ONE_MONTH,
    60: logs.RetentionDays.TWO_MONTHS,
    90: logs.RetentionDays.THREE_MONTHS,
    120: logs.RetentionDays.FOUR_MONTHS,
    150: logs.RetentionDays.FIVE_MONTHS,
    180: logs.RetentionDays.SIX_MONTHS,
    365: logs.RetentionDays.ONE_YEAR,
    400: logs.RetentionDays.THIRTEEN_MONTHS,
    545: logs.RetentionDays.EIGHTEEN_MONTHS,
    731: logs.RetentionDays.TWO_YEARS,
    1096: logs.RetentionDays.THREE_YEARS,
    1827: logs.RetentionDays.FIVE_YEARS,
    2192: logs.RetentionDays.SIX_YEARS,
    2557: logs.RetentionDays.SEVEN_YEARS,
    2922: logs.RetentionDays.EIGHT_YEARS,
    3288: logs.RetentionDays.NINE_YEARS,
    3653: logs.RetentionDays.TEN_YEARS,
}
assert tuple(LOG_RETENTION) == LOG_RETENTION_DAYS


def removal_policy(config: EnvironmentConfig) -> cdk.RemovalPolicy:
    """What CloudFormation does with the environment's data when its stack is deleted."""
    return cdk.RemovalPolicy.RETAIN if config.retains_data else cdk.RemovalPolicy.DESTROY


def cdk_environment(config: EnvironmentConfig) -> cdk.Environment:
    return cdk.Environment(account=config.account, region=config.region)


def log_retention(config: EnvironmentConfig) -> logs.RetentionDays:
    return LOG_RETENTION[config.retention.log_days]
