"""One stack per environment: ``rdss-<env>``, messaging and analytics side by side.

One stack rather than one per part, so that ``cdk deploy -c env=<name>`` deploys an
environment whole (the CDK CLI asks for stack names or ``--all`` when an app has several), and
nothing is pinned by cross-stack exports.
"""

from __future__ import annotations

import aws_cdk as cdk
from constructs import Construct

from rdss.deployment.topology import RDSS, Topology
from stacks.analytics import Analytics
from stacks.config import EnvironmentConfig, cdk_environment
from stacks.messaging import Messaging
from stacks.vendors import Vendors


class RdssStack(cdk.Stack):
    """The RDSS backbone of one environment."""

    def __init__(
        self, scope: Construct, construct_id: str, *, config: EnvironmentConfig, topology: Topology = RDSS
    ) -> None:
        super().__init__(
            scope,
            construct_id,
            stack_name=f"rdss-{config.name}",
            env=cdk_environment(config),
            termination_protection=config.termination_protection,
            description=f"RDSS Message API 3.0.2 ({config.name}): channels, processors, state, archives, analytics",
        )
        self.config = config
        self.messaging = Messaging(self, "Messaging", config=config, topology=topology)
        self.analytics = Analytics(
            self,
            "Analytics",
            config=config,
            deployment=self.messaging.deployment,
            buckets=self.messaging.buckets,
            access_logs=self.messaging.access_logs,
        )
        self.vendors = Vendors(
            self,
            "Vendors",
            vendors=config.vendors,
            deployment=self.messaging.deployment,
            streams=self.messaging.channels.streams,
            tables=self.messaging.state.tables,
            key=self.messaging.data_key.key,
            tenant_jisc_id=config.tenant_jisc_id,
        )
