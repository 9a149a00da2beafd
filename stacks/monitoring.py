"""Alarms that page someone, and the dashboard operators look at first."""

from __future__ import annotations

from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from stacks.config import EnvironmentConfig


class Monitoring(Construct):
    """The environment's alarm topic (KMS-encrypted, TLS only) and dashboard.

    Constructs raise their own alarms through :meth:`alarm`, so every alarm notifies the same
    topic, is named ``rdss-<env>-...`` and shows on the dashboard's alarm panel.
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, prefix: str, key: kms.IKey, config: EnvironmentConfig
    ) -> None:
        super().__init__(scope, construct_id)
        self.prefix = prefix
        self.topic = sns.Topic(
            self,
            "AlarmTopic",
            topic_name=f"{prefix}-alarms",
            display_name=f"RDSS {config.name} alarms",
            master_key=key,
            enforce_ssl=True,
        )
        if config.alarm_email:
            self.topic.add_subscription(subscriptions.EmailSubscription(config.alarm_email))
        self.dashboard = cloudwatch.Dashboard(self, "Dashboard", dashboard_name=prefix)
        self.alarms: list[cloudwatch.Alarm] = []
        self._action = actions.SnsAction(self.topic)

    def alarm(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        metric: cloudwatch.IMetric,
        threshold: float,
        description: str,
    ) -> cloudwatch.Alarm:
        """An alarm when ``metric`` reaches ``threshold`` in one period; no data is not a breach
        (quiet channels and idle functions are normal)."""
        alarm = cloudwatch.Alarm(
            scope,
            construct_id,
            alarm_name=f"{self.prefix}-{name}",
            alarm_description=description,
            metric=metric,
            threshold=threshold,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        alarm.add_alarm_action(self._action)
        alarm.add_ok_action(self._action)
        self.alarms.append(alarm)
        return alarm

    def add_row(self, *widgets: cloudwatch.IWidget) -> None:
        """Widgets added in one call sit side by side; each call starts a new row."""
        self.dashboard.add_widgets(*widgets)

    def finish(self) -> None:
        """Puts the alarm panel at the bottom of the dashboard, once every alarm exists."""
        self.dashboard.add_widgets(
            cloudwatch.AlarmStatusWidget(title="Alarms", alarms=list(self.alarms), width=24, height=6)
        )
