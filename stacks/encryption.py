"""Customer-managed KMS keys and the AWS services allowed to use them.

Principals in the account get key access through ``grant_*`` on the resources they use (a
stream's ``grant_write`` also grants encrypt on its key). Services that write encrypted data
on the account's behalf - CloudWatch Logs (scoped to this account's log groups), CloudWatch
alarms publishing to an encrypted topic, EventBridge delivering to an encrypted dead-letter
queue - are allowed in the key policy.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct


class DataKey(Construct):
    """A rotating customer-managed key for one stack's data."""

    def __init__(
        self, scope: Construct, construct_id: str, *, alias: str, description: str, removal: cdk.RemovalPolicy
    ) -> None:
        super().__init__(scope, construct_id)
        self.key = kms.Key(
            self,
            "Key",
            alias=alias,
            description=description,
            enable_key_rotation=True,
            removal_policy=removal,
            # The shortest waiting period: a destroyed dev key is gone in a week.
            pending_window=cdk.Duration.days(7) if removal == cdk.RemovalPolicy.DESTROY else cdk.Duration.days(30),
        )
        self._stack = cdk.Stack.of(self)

    def allow_cloudwatch_logs(self) -> None:
        """Lets CloudWatch Logs encrypt this account's log groups with the key."""
        stack = self._stack
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="CloudWatchLogsEncryptLogGroups",
                principals=[iam.ServicePrincipal(f"logs.{stack.region}.amazonaws.com")],
                actions=["kms:Encrypt", "kms:Decrypt", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:DescribeKey"],
                resources=["*"],  # in a key policy, "*" is this key
                conditions={
                    "ArnLike": {
                        "kms:EncryptionContext:aws:logs:arn": (
                            f"arn:{stack.partition}:logs:{stack.region}:{stack.account}:log-group:*"
                        )
                    }
                },
            )
        )

    def allow_service(self, service: str, sid: str) -> None:
        """Lets ``service`` (e.g. ``cloudwatch.amazonaws.com``) put encrypted messages on the
        queues and topics encrypted with this key: AWS's documented statement. Which of the
        service's callers may publish at all is decided by the queue's or topic's own policy."""
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                sid=sid,
                principals=[iam.ServicePrincipal(service)],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                resources=["*"],
            )
        )
