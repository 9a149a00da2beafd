"""Messaging: channels, archives, state, processors and their monitoring.

It reads like the message-flow diagram in ARCHITECTURE.md, and everything in it is built from
the topology (:data:`rdss.deployment.topology.RDSS`): adding a channel, route, table, bucket or processor
there is all it takes to add it here.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_s3 as s3
from constructs import Construct

from rdss.deployment.topology import RDSS, Deployment, Topology
from stacks.archives import ChannelArchive, archive_bucket_of
from stacks.channels import Channels
from stacks.config import EnvironmentConfig, removal_policy
from stacks.encryption import DataKey
from stacks.monitoring import Monitoring
from stacks.processors import ProcessorFunction
from stacks.state import StateTables
from stacks.storage import AccessLogBucket, SecureBucket, expiry_rules, lifecycle_rules


class Messaging(Construct):
    """Everything a message touches between a producer's PutRecords and a consumer's read."""

    def __init__(
        self, scope: Construct, construct_id: str, *, config: EnvironmentConfig, topology: Topology = RDSS
    ) -> None:
        super().__init__(scope, construct_id)
        self.config = config
        removal = removal_policy(config)
        naming = Deployment(config.name, topology)
        self.prefix = f"{naming.prefix}-{config.name}"

        self.key_alias = f"alias/{self.prefix}-messaging"
        self.data_key = DataKey(
            self,
            "DataKey",
            alias=self.key_alias,
            description=f"RDSS {config.name}: streams, tables, buckets, queues, topic and logs",
            removal=removal,
        )
        key = self.data_key.key
        self.data_key.allow_cloudwatch_logs()
        self.data_key.allow_service("cloudwatch.amazonaws.com", "CloudWatchAlarmsPublishToEncryptedTopic")
        self.data_key.allow_service("events.amazonaws.com", "EventBridgeDeliverToEncryptedDeadLetterQueue")

        # Buckets: one per topology bucket, each logging its access to the access-log bucket.
        self.access_logs = AccessLogBucket(
            self,
            "AccessLogs",
            removal=removal,
            expire_after_days=config.retention.access_log_days,
            auto_delete=config.auto_delete_objects,
        ).bucket
        self.buckets: dict[str, s3.Bucket] = {}
        for spec in topology.buckets:
            self.buckets[spec.name] = SecureBucket(
                self,
                f"{spec.name.capitalize()}Bucket",
                key=key,
                access_logs=self.access_logs,
                removal=removal,
                auto_delete=config.auto_delete_objects,
                # The archives (kept until the environment's lifecycle expires them) are versioned
                # in every environment: an overwrite or a delete leaves the record recoverable.
                versioned=spec.expire_after_days is None,
                unversioned_reason=(
                    f"the {spec.name} bucket holds working copies ({spec.description.lower()}) for "
                    f"{spec.expire_after_days} days at most; the records themselves stay in the channels and the "
                    "audit archive"
                ),
                lifecycle_rules=self._lifecycle(spec.name, spec.expire_after_days),
            ).bucket
        # Bucket names are left to CloudFormation (S3 names are global); functions learn the
        # real ones through the same RDSS_BUCKET_<NAME> variables the local runtime sets.
        self.deployment = Deployment(
            config.name, topology, bucket_names={name: bucket.bucket_name for name, bucket in self.buckets.items()}
        )

        self.channels = Channels(self, "Channels", deployment=self.deployment, key=key, config=config)
        self.state = StateTables(self, "State", deployment=self.deployment, key=key, config=config)
        self.monitoring = Monitoring(self, "Monitoring", prefix=self.prefix, key=key, config=config)

        self.archives = [
            ChannelArchive(
                self,
                f"{channel.name.capitalize()}Archive",
                channel=channel,
                deployment=self.deployment,
                bucket=self.buckets[archive_bucket_of(channel, topology)],
                bucket_label=archive_bucket_of(channel, topology),
                key=key,
                key_name=self.key_alias,
                config=config,
            )
            for channel in topology.channels
            if channel.archive is not None
        ]

        environment = self.deployment.environment_variables()
        self.processors = {
            processor.name: ProcessorFunction(
                self,
                f"{processor.name.capitalize()}Processor",
                processor=processor,
                function_name=self.deployment.function(processor.name),
                environment=environment,
                streams=self.channels.streams,
                tables=self.state.tables,
                buckets=self.buckets,
                delivery_streams={a.channel.name: a.delivery_stream for a in self.archives},
                topology=topology,
                key=key,
                key_name=self.key_alias,
                config=config,
                monitoring=self.monitoring,
            )
            for processor in topology.processors
        }

        self._channel_alarms(topology)
        self._dashboard(topology)

    def _lifecycle(self, bucket: str, expire_after_days: int | None) -> list[s3.LifecycleRule]:
        """The environment's lifecycle for a bucket (``retention.buckets``), else the topology's
        expiry; Firehose's delivery failures are scratch and go sooner (S3 applies the earliest
        expiry when rules overlap)."""
        return [
            *lifecycle_rules(self.config.lifecycle(bucket, expire_after_days)),
            *expiry_rules(
                prefix="delivery-failures/",
                expire_after_days=self.config.retention.scratch_days,
                rule_id="ExpireDeliveryFailures",
            ),
        ]

    def _channel_alarms(self, topology: Topology) -> None:
        thresholds = self.config.alarms
        for channel in topology.channels_of("error"):
            self._traffic_alarm(
                channel.name,
                thresholds.error_channel_records,
                f"Messages reached the {channel.name} channel (expired, oversized or undeliverable)",
            )
        for channel in topology.channels_of("invalid"):
            self._traffic_alarm(
                channel.name,
                thresholds.invalid_channel_records,
                f"Producers are sending messages that fail validation (the {channel.name} channel)",
            )

    def _traffic_alarm(self, channel: str, threshold: int, description: str) -> None:
        """An alarm when ``threshold`` records reach ``channel`` in five minutes."""
        self.monitoring.alarm(
            self.channels,
            f"{channel.capitalize()}TrafficAlarm",
            name=f"{channel}-channel-traffic",
            metric=self._incoming(channel),
            threshold=threshold,
            description=description,
        )

    def _incoming(self, channel: str) -> cloudwatch.Metric:
        return self.channels.stream(channel).metric_incoming_records(
            period=cdk.Duration.minutes(5), statistic="Sum", label=channel
        )

    def _dashboard(self, topology: Topology) -> None:
        monitoring = self.monitoring
        monitoring.add_row(
            cloudwatch.GraphWidget(
                title="Records published per channel",
                left=[self._incoming(channel.name) for channel in topology.channels],
                width=24,
            )
        )
        for processor in self.processors.values():
            monitoring.add_row(*processor.widgets())
        monitoring.add_row(
            *(
                cloudwatch.GraphWidget(
                    title=f"Archive of {archive.channel.name}: delivery to S3",
                    left=[archive.delivery_stream.metric("DeliveryToS3.Records", statistic="Sum")],
                    right=[archive.delivery_stream.metric("DeliveryToS3.DataFreshness", statistic="Maximum")],
                    width=24 // len(self.archives),
                )
                for archive in self.archives
            )
        )
        monitoring.finish()
