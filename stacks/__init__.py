"""The RDSS CDK app: per-environment stacks built from the topology (rdss.deployment.topology)."""

from stacks.node import use_project_node

use_project_node()  # before any module of the app imports aws_cdk, which starts jsii's Node
