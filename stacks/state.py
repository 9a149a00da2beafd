"""The system's state: one DynamoDB table per table of the topology."""

from __future__ import annotations

from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_kms as kms
from constructs import Construct

from rdss.topology import Deployment
from stacks.config import EnvironmentConfig
from stacks.nag import NIST, acknowledge


class StateTables(Construct):
    """On-demand, KMS-encrypted tables with point-in-time recovery and TTL, named ``rdss-<env>-<table>``."""

    def __init__(
        self, scope: Construct, construct_id: str, *, deployment: Deployment, key: kms.IKey, config: EnvironmentConfig
    ):
        super().__init__(scope, construct_id)
        self.tables: dict[str, dynamodb.Table] = {}
        for spec in deployment.topology.tables:
            self.tables[spec.name] = dynamodb.Table(
                self,
                spec.name,
                table_name=deployment.table(spec.name),
                partition_key=dynamodb.Attribute(name=spec.partition_key, type=dynamodb.AttributeType.STRING),
                sort_key=(
                    dynamodb.Attribute(name=spec.sort_key, type=dynamodb.AttributeType.STRING)
                    if spec.sort_key
                    else None
                ),
                billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
                encryption=dynamodb.TableEncryption.CUSTOMER_MANAGED,
                encryption_key=key,
                point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                    point_in_time_recovery_enabled=True
                ),
                time_to_live_attribute=spec.ttl_attribute,
                removal_policy=config.cdk_removal_policy,
                deletion_protection=config.retains_data,
            )
            acknowledge(
                self.tables[spec.name],
                f"{NIST}-DynamoDBInBackupPlan",
                f"{deployment.table(spec.name)} has point-in-time recovery (any second of the last 35 days); its items "
                "(claims, sequence progress, checkpoints) lose their meaning once the channels' 7-day retention has "
                "passed, so a longer AWS Backup plan would keep nothing that could be used",
            )

    def table(self, name: str) -> dynamodb.Table:
        return self.tables[name]
