"""Vendors: one IAM role per vendor of ``vendors.<name>`` in cdk.json, and the outputs its
gateway is configured from.

The role's permissions are :class:`rdss.deployment.vendors.VendorAccess`'s statements, rendered with the
stack's ARNs: the same description the local runtime provisions, so the two cannot drift. They
are written out rather than made with ``grant_*`` because every one carries a condition the
grants cannot express (the KMS key only through Kinesis for those streams, the checkpoints
rows only of the vendor's own group).
"""

from __future__ import annotations

from collections.abc import Mapping

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kinesis as kinesis
from aws_cdk import aws_kms as kms
from constructs import Construct

from rdss.deployment.topology import Deployment
from rdss.deployment.vendors import Arns, VendorAccess, output_key, role_name, trust_statement
from stacks.config import VendorSettings


def principal_arn(settings: VendorSettings, partition: str) -> str:
    """The ARN the role trusts: the principal's own, or the account's root (any principal the
    vendor's account itself allows)."""
    if settings.principal.startswith("arn:"):
        return settings.principal
    return f"arn:{partition}:iam::{settings.principal}:root"


class VendorRole(Construct):
    """One vendor's role and outputs."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        settings: VendorSettings,
        deployment: Deployment,
        streams: Mapping[str, kinesis.IStream],
        tables: Mapping[str, dynamodb.ITable],
        key: kms.IKey,
        tenant_jisc_id: int | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)
        self.access = VendorAccess(name, settings.produces, settings.consumes, deployment)
        trust = trust_statement(principal_arn(settings, stack.partition), settings.external_id)
        self.role = iam.Role(
            self,
            "Role",
            role_name=role_name(deployment, name),
            description=f"Vendor {name}: its Message Gateway's access to {deployment.prefix}-{deployment.environment}",
            assumed_by=iam.ArnPrincipal(trust["Principal"]["AWS"]).with_conditions(trust["Condition"]),
            max_session_duration=cdk.Duration.hours(1),
        )
        arns = Arns(
            region=stack.region,
            key=key.key_arn,
            stream=lambda channel: streams[channel].stream_arn,
            table=lambda table: tables[table].table_arn,
        )
        # A managed policy (a versioned document of its own), not an inline one: the vendor's
        # access can be reviewed, and its changes audited, apart from the role.
        self.policy = iam.ManagedPolicy(
            self,
            "Policy",
            managed_policy_name=f"{role_name(deployment, name)}-access",
            description=f"Vendor {name}: exactly what its gateway does, derived from the topology",
            statements=[iam.PolicyStatement.from_json(s) for s in self.access.statements(arns)],
            roles=[self.role],
        )

        def output(what: str, value: str, description: str) -> None:
            cdk.CfnOutput(
                self, what, key=output_key(name, what), value=value, description=f"Vendor {name}: {description}"
            )

        output("RoleArn", self.role.role_arn, "the role its gateway assumes (with its external ID)")
        output("ExternalId", settings.external_id, "the external ID it presents when assuming the role")
        output("Region", stack.region, "the deployment's region")
        output("Group", self.access.group, "its consumer group (the gateway's application name)")
        output("Writes", ",".join(self.access.writes), "channels it may write")
        output("Reads", ",".join(self.access.reads), "channels it may read")
        output("Version", settings.reads, "the Message API version its application reads (its gateway's reads)")
        if tenant_jisc_id is not None:
            output("TenantJiscId", str(tenant_jisc_id), "the tenantJiscID of messages its gateway translates to 4.0.0")
        for channel in dict.fromkeys((*self.access.writes, *self.access.reads)):
            camel = channel.capitalize()
            output(f"{camel}StreamName", streams[channel].stream_name, f"the {channel} channel's stream")
            output(f"{camel}StreamArn", streams[channel].stream_arn, f"the {channel} channel's stream ARN")


class Vendors(Construct):
    """Every vendor of the environment (``config.vendors``), each a :class:`VendorRole`."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        vendors: Mapping[str, VendorSettings],
        deployment: Deployment,
        streams: Mapping[str, kinesis.IStream],
        tables: Mapping[str, dynamodb.ITable],
        key: kms.IKey,
        tenant_jisc_id: int | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.roles = {
            name: VendorRole(
                self,
                output_key(name, ""),
                name=name,
                settings=settings,
                deployment=deployment,
                streams=streams,
                tables=tables,
                key=key,
                tenant_jisc_id=tenant_jisc_id,
            )
            for name, settings in vendors.items()
        }
