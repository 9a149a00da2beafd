"""The RDSS CDK app: per-environment stacks built from the topology (rdss.topology)."""
