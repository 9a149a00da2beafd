"""The channels: one KMS-encrypted Kinesis stream per channel of the topology."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_kinesis as kinesis
from aws_cdk import aws_kms as kms
from constructs import Construct

from rdss.deployment.topology import Deployment
from stacks.config import EnvironmentConfig, removal_policy
from stacks.nag import acknowledge


class Channels(Construct):
    """Every channel of ``deployment.topology`` as a stream named ``rdss-<env>-<channel>``."""

    def __init__(
        self, scope: Construct, construct_id: str, *, deployment: Deployment, key: kms.IKey, config: EnvironmentConfig
    ):
        super().__init__(scope, construct_id)
        capacity = config.stream_capacity
        # provisioned: each channel's shards sized from the configured traffic (rdss.deployment.capacity)
        shards = config.capacity.shards
        self.streams: dict[str, kinesis.Stream] = {}
        for channel in deployment.topology.channels:
            stream = kinesis.Stream(
                self,
                channel.name,
                stream_name=deployment.stream(channel.name),
                encryption=kinesis.StreamEncryption.KMS,
                encryption_key=key,
                # 24 h by default: a shard's base retention, no extended-retention charge. The
                # spec's channel TTL (168 h) is kept by the archive, which rdss replay sends again.
                retention_period=cdk.Duration.hours(config.stream_retention_hours),
                stream_mode=kinesis.StreamMode.ON_DEMAND if capacity.on_demand else kinesis.StreamMode.PROVISIONED,
                shard_count=None if capacity.on_demand else shards[channel.name],
                removal_policy=removal_policy(config),
            )
            acknowledge(
                stream,
                "AwsSolutions-KDS3",
                f"{deployment.stream(channel.name)} is encrypted with the stack's customer-managed key (rotated, "
                "its policy ours) instead of aws/kinesis, so producers and consumers need an explicit grant on it",
            )
            self.streams[channel.name] = stream

    def stream(self, channel: str) -> kinesis.Stream:
        return self.streams[channel]
