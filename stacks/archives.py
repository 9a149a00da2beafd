"""Firehose archives: every record of a channel, as sent, in S3 (rdss.archive's layout)."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_kinesis as kinesis
from aws_cdk import aws_kinesisfirehose as firehose
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from constructs import Construct

from rdss.archive import FIREHOSE_ERROR_EXPRESSION, FIREHOSE_HOUR_EXPRESSION
from rdss.topology import Channel, Deployment, Topology
from stacks.config import EnvironmentConfig
from stacks.nag import NIST, Acknowledgements, acknowledge


def archive_bucket_of(channel: Channel, topology: Topology) -> str:
    """The bucket a channel is archived to: the first segment of its archive prefix names it
    (``errors/invalid/`` -> ``errors``), so the topology stays the one description of both."""
    if channel.archive is None:
        raise ValueError(f"channel {channel.name} is not archived")
    bucket = channel.archive.split("/", 1)[0]
    if bucket not in {b.name for b in topology.buckets}:
        raise ValueError(f"channel {channel.name} archives to {channel.archive!r}, but no bucket {bucket!r} exists")
    return bucket


class ChannelArchive(Construct):
    """A delivery stream from one channel to its bucket.

    Records are written gzip-compressed with a newline appended to each (Firehose itself adds
    no delimiter), under ``<archive prefix>year=/month=/day=/hour=/`` of the delivery time.
    Failed deliveries land under ``delivery-failures/`` in the same bucket, outside the
    archive prefix, so Glue and Athena never mistake them for messages.

    The delivery stream has no server-side encryption of its own: AWS does not allow it for a
    Kinesis-stream source. Data is encrypted in the source stream (KMS) and in the bucket (KMS);
    Firehose holds it only in transit.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        channel: Channel,
        deployment: Deployment,
        stream: kinesis.IStream,
        bucket: s3.IBucket,
        bucket_label: str,  # the bucket's topology name, for people reading acknowledgements
        key: kms.IKey,
        key_name: str,
        config: EnvironmentConfig,
    ) -> None:
        super().__init__(scope, construct_id)
        if channel.archive is None:
            raise ValueError(f"channel {channel.name} is not archived")
        self.channel = channel
        self.log_group = logs.LogGroup(
            self,
            "DeliveryLogs",
            retention=config.log_retention,
            encryption_key=key,
            removal_policy=config.cdk_removal_policy,
        )
        destination = firehose.S3Bucket(
            bucket,
            data_output_prefix=channel.archive + FIREHOSE_HOUR_EXPRESSION,
            error_output_prefix=FIREHOSE_ERROR_EXPRESSION,
            compression=firehose.Compression.GZIP,
            processors=[firehose.AppendDelimiterToRecordProcessor()],
            encryption_key=key,
            buffering_interval=cdk.Duration.seconds(config.archive.buffer_seconds),
            buffering_size=cdk.Size.mebibytes(config.archive.buffer_mib),
            logging_config=firehose.EnableLogging(self.log_group),
        )
        self.delivery_stream = firehose.DeliveryStream(
            self,
            "DeliveryStream",
            # rdss.archive's object names start with the delivery stream's name: the channel's.
            delivery_stream_name=deployment.stream(channel.name),
            source=firehose.KinesisStreamSource(stream),
            destination=destination,
        )
        acknowledge(
            self.delivery_stream,
            "AwsSolutions-KDF1",
            f"{deployment.stream(channel.name)} reads from a Kinesis stream, and AWS allows no delivery-stream "
            f"encryption for that source: records are KMS-encrypted in the {channel.name} stream and in the "
            f"{bucket_label} bucket, and only in transit (TLS) in between",
        )
        # The S3 destination grants its role read/write on the bucket and encrypt/decrypt on the
        # key: the permissions AWS documents for Firehose delivering to S3 with SSE-KMS.
        acks = Acknowledgements(self.delivery_stream, f"Firehose role of the {channel.name} archive")
        purpose = "Firehose names each object by delivery hour, time and a UUID"
        acks.bucket_read(bucket, bucket_label, purpose)
        acks.bucket_write(bucket, bucket_label, purpose)
        acks.key_use(key_name)
        acks.apply()
        acknowledge(
            self.delivery_stream,
            f"{NIST}-IAMNoInlinePolicy",
            f"the source and destination roles of {deployment.stream(channel.name)}: each policy holds the grants of "
            "exactly its role (created, changed and deleted with it); a managed policy would only let it be attached "
            "elsewhere",
        )
