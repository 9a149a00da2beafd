"""Firehose archives: every record of a channel, as an archive entry, in S3 (rdss.archive.entries's layout)."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_kinesisfirehose as firehose
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from constructs import Construct

from rdss.archive.entries import FIREHOSE_ERROR_EXPRESSION, FIREHOSE_HOUR_EXPRESSION, OBJECT_EXTENSION
from rdss.deployment.topology import Channel, Deployment, Topology
from stacks.config import EnvironmentConfig, log_retention, removal_policy
from stacks.nag import NIST, Acknowledgements, acknowledge


def archive_bucket_of(channel: Channel, topology: Topology) -> str:
    """The bucket a channel is archived to (:meth:`rdss.deployment.topology.Topology.archive_bucket`)."""
    return topology.archive_bucket(channel.name)


class ChannelArchive(Construct):
    """A Direct PUT delivery stream from the archiver to one channel's archive prefix.

    The archiver (rdss.archive) puts gzip members of archive entries with PutRecordBatch;
    the delivery stream concatenates the records it buffered, as they are - no compression of
    its own (they are gzip already) and no delimiter (each member ends its entries with a
    newline) - into objects named ``...gz`` under ``<archive prefix>year=/month=/day=/hour=/``
    of the delivery time. Failed deliveries land under ``delivery-failures/`` in the same
    bucket, outside the archive prefix, so Glue and Athena never mistake them for messages.

    The delivery stream encrypts what it holds with the deployment's key (server-side
    encryption, possible for a Direct PUT source); the bucket encrypts the objects with it.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        channel: Channel,
        deployment: Deployment,
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
            retention=log_retention(config),
            encryption_key=key,
            removal_policy=removal_policy(config),
        )
        destination = firehose.S3Bucket(
            bucket,
            data_output_prefix=channel.archive + FIREHOSE_HOUR_EXPRESSION,
            error_output_prefix=FIREHOSE_ERROR_EXPRESSION,
            # each record is a gzip member already: concatenated they are one gzip object
            compression=firehose.Compression.UNCOMPRESSED,
            file_extension=OBJECT_EXTENSION,
            encryption_key=key,
            buffering_interval=cdk.Duration.seconds(config.archive.buffer_seconds),
            buffering_size=cdk.Size.mebibytes(config.archive.buffer_mib),
            logging_config=firehose.EnableLogging(self.log_group),
        )
        self.name = deployment.delivery_stream(channel.name)
        self.delivery_stream = firehose.DeliveryStream(
            self,
            "DeliveryStream",
            # rdss.archive.entries's object names start with the delivery stream's name: the channel's.
            delivery_stream_name=self.name,
            destination=destination,
            encryption=firehose.StreamEncryption.customer_managed_key(key),
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
            f"the destination role of {self.name}: its policy holds the grants of "
            "exactly its role (created, changed and deleted with it); a managed policy would only let it be attached "
            "elsewhere",
        )
