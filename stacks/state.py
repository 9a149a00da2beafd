"""The system's state: one DynamoDB table per table of the topology."""

from __future__ import annotations

import math

from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_kms as kms
from constructs import Construct

from rdss.deployment.topology import Deployment
from stacks.config import EnvironmentConfig, removal_policy
from stacks.nag import NIST, acknowledge

#: The table whose capacity ``table_capacity`` sets: the broker's claims, one write per message.
CLAIMS_TABLE = "messages"


class StateTables(Construct):
    """KMS-encrypted tables with point-in-time recovery and TTL, named ``rdss-<env>-<table>``.

    All on-demand, except the claims table when ``table_capacity.mode`` is provisioned: a claim
    is a conditional Put in a TransactWriteItems (two write units), and a provisioned write unit
    held for a month at 70 % use costs about 40 % of the on-demand price of the writes it
    serves. Auto scaling holds the units the configured traffic needs and follows a burst up to
    ``max_scale`` times them; a burst beyond that is throttled, and the broker nacks the records
    it could not claim so the event source mapping retries them.
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, deployment: Deployment, key: kms.IKey, config: EnvironmentConfig
    ):
        super().__init__(scope, construct_id)
        self.tables: dict[str, dynamodb.Table] = {}
        plan = config.capacity
        for spec in deployment.topology.tables:
            provisioned = spec.name == CLAIMS_TABLE and not config.table_capacity.on_demand
            self.tables[spec.name] = table = dynamodb.Table(
                self,
                spec.name,
                table_name=deployment.table(spec.name),
                partition_key=dynamodb.Attribute(name=spec.partition_key, type=dynamodb.AttributeType.STRING),
                sort_key=(
                    dynamodb.Attribute(name=spec.sort_key, type=dynamodb.AttributeType.STRING)
                    if spec.sort_key
                    else None
                ),
                billing_mode=dynamodb.BillingMode.PROVISIONED if provisioned else dynamodb.BillingMode.PAY_PER_REQUEST,
                write_capacity=plan.write_units if provisioned else None,
                read_capacity=plan.read_units if provisioned else None,
                encryption=dynamodb.TableEncryption.CUSTOMER_MANAGED,
                encryption_key=key,
                point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                    point_in_time_recovery_enabled=True
                ),
                time_to_live_attribute=spec.ttl_attribute,
                removal_policy=removal_policy(config),
                deletion_protection=config.retains_data,
            )
            if provisioned:
                self._auto_scale(table, plan.write_units, plan.read_units, config)
            acknowledge(
                self.tables[spec.name],
                f"{NIST}-DynamoDBInBackupPlan",
                f"{deployment.table(spec.name)} has point-in-time recovery (any second of the last 35 days); its items "
                "(claims, sequence progress, checkpoints, replays' progress) lose their meaning within 35 days, so a "
                "longer AWS Backup plan would keep nothing that could be used",
            )

    @staticmethod
    def _auto_scale(table: dynamodb.Table, writes: int, reads: int, config: EnvironmentConfig) -> None:
        """From the planned units up to ``max_scale`` times them, at the target utilisation."""
        capacity = config.table_capacity
        percent = round(capacity.target_utilization * 100)
        for units, scale in ((writes, table.auto_scale_write_capacity), (reads, table.auto_scale_read_capacity)):
            scaling = scale(min_capacity=units, max_capacity=max(units, math.ceil(units * capacity.max_scale)))
            scaling.scale_on_utilization(target_utilization_percent=percent)

    def table(self, name: str) -> dynamodb.Table:
        return self.tables[name]
