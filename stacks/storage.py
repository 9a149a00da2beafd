"""S3 buckets that are secure by default: encrypted, TLS-only, never public, access-logged,
and with lifecycle rules so nothing is kept longer than its environment says."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from stacks.config import BucketLifecycle
from stacks.dependencies import drop_referenced_dependency
from stacks.nag import NIST, acknowledge, skip_checkov

#: Why no bucket is replicated to another region (cdk-nag NIST S3BucketReplicationEnabled).
NO_REPLICATION_REASON = (
    "the deployment lives in one region and owns no bucket in another to replicate to; S3 keeps every object "
    "in three zones of the region, and the archives are versioned, so a region-wide copy is a disaster-recovery "
    "choice made per account, not a default of this stack"
)


#: Why the checks for Lambda functions do not apply to CDK's bucket-emptying function.
_EMPTYING_FUNCTION_SKIPS = {
    "CKV_AWS_115": "it runs only while a bucket is deleted, once per bucket; reserved concurrency would take "
    "executions from the account's pool for ever to serve a few calls a year",
    "CKV_AWS_116": "CloudFormation waits for its answer, so a failure fails the stack operation in plain sight "
    "(and the deletion can be retried); a dead-letter queue would park it where nobody looks",
    "CKV_AWS_117": "it calls only the S3 API, over TLS and authorised by its role, and serves no network endpoint; "
    "a VPC would add NAT or an S3 endpoint and isolate nothing",
}


def expiry_rules(
    *,
    expire_after_days: int | None = None,
    prefix: str | None = None,
    infrequent_access_after_days: int | None = None,
    glacier_after_days: int | None = None,
    deep_archive_after_days: int | None = None,
    rule_id: str = "Expire",
) -> list[s3.LifecycleRule]:
    """Transitions (Standard-IA, Glacier Instant Retrieval, Glacier Deep Archive) and expiry for
    objects under ``prefix`` (all objects when None). S3 leaves objects under 128 KB where they
    are: a tier's per-object minimum would make them dearer there."""
    tiers = (
        (s3.StorageClass.INFREQUENT_ACCESS, infrequent_access_after_days),
        (s3.StorageClass.GLACIER_INSTANT_RETRIEVAL, glacier_after_days),
        (s3.StorageClass.DEEP_ARCHIVE, deep_archive_after_days),
    )
    transitions = [
        s3.Transition(storage_class=tier, transition_after=cdk.Duration.days(days))
        for tier, days in tiers
        if days is not None
    ]
    if expire_after_days is None and not transitions:
        return []
    return [
        s3.LifecycleRule(
            id=rule_id,
            prefix=prefix,
            expiration=cdk.Duration.days(expire_after_days) if expire_after_days is not None else None,
            transitions=transitions or None,
            # A versioned bucket keeps what was overwritten or expired as a noncurrent version.
            noncurrent_version_expiration=cdk.Duration.days(expire_after_days or 30),
        )
    ]


def lifecycle_rules(lifecycle: BucketLifecycle) -> list[s3.LifecycleRule]:
    """:func:`expiry_rules` of a bucket's configured lifecycle (``retention.buckets``)."""
    return expiry_rules(
        expire_after_days=lifecycle.expire_after_days,
        infrequent_access_after_days=lifecycle.infrequent_access_after_days,
        glacier_after_days=lifecycle.glacier_after_days,
        deep_archive_after_days=lifecycle.deep_archive_after_days,
    )


def _bucket(
    scope: Construct,
    *,
    removal: cdk.RemovalPolicy,
    lifecycle_rules: Sequence[s3.LifecycleRule],
    auto_delete: bool | None = None,
    **properties: Any,
) -> s3.Bucket:
    """What every bucket here shares: TLS only, never public, no ACLs, ``lifecycle_rules`` plus
    housekeeping; the other ``properties`` (encryption, access logging, versioning) differ."""
    bucket = s3.Bucket(
        scope,
        "Bucket",
        enforce_ssl=True,
        minimum_tls_version=1.2,
        block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
        object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
        # Multipart uploads Firehose, Glue or a crashed processor never finished still cost money.
        lifecycle_rules=[
            *lifecycle_rules,
            s3.LifecycleRule(id="AbortIncompleteUploads", abort_incomplete_multipart_upload_after=cdk.Duration.days(7)),
        ],
        removal_policy=removal,
        # dev: emptied on stack deletion (by a Lambda-backed custom resource), so the bucket
        # really goes; prod: kept, data and all. auto_delete=False: whoever deletes the stack
        # empties the buckets first (an engine that cannot invoke functions, e.g. LocalStack here).
        auto_delete_objects=removal == cdk.RemovalPolicy.DESTROY if auto_delete is None else auto_delete,
        **properties,
    )
    acknowledge(bucket, f"{NIST}-S3BucketReplicationEnabled", f"bucket {scope.node.path}: {NO_REPLICATION_REASON}")
    if removal == cdk.RemovalPolicy.DESTROY:
        # CDK's object-emptying function references its role and also DependsOn it (cfn-lint W3005).
        provider = cdk.Stack.of(scope).node.try_find_child("Custom::S3AutoDeleteObjectsCustomResourceProvider")
        if provider is not None:
            handler = provider.node.find_child("Handler")
            drop_referenced_dependency(handler, provider.node.find_child("Role"))
            what = "CDK's function that empties a bucket when CloudFormation deletes it (dev and staging only)"
            for check, reason in _EMPTYING_FUNCTION_SKIPS.items():
                skip_checkov(handler, check, f"{what}: {reason}")
    return bucket


class AccessLogBucket(Construct):
    """The target of the other buckets' server access logs.

    SSE-S3, not KMS: S3 server access logging cannot deliver to a bucket whose default
    encryption is SSE-KMS.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        removal: cdk.RemovalPolicy,
        expire_after_days: int,
        auto_delete: bool | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.bucket = _bucket(
            self,
            removal=removal,
            auto_delete=auto_delete,
            lifecycle_rules=expiry_rules(expire_after_days=expire_after_days),
            encryption=s3.BucketEncryption.S3_MANAGED,
        )
        sse_s3 = (
            f"the access-log bucket {self.node.path} is encrypted with SSE-S3 (AES-256): S3 server access logging "
            "cannot deliver to a bucket whose default encryption is SSE-KMS"
        )
        acknowledge(self.bucket, f"{NIST}-S3DefaultEncryptionKMS", sse_s3)
        unversioned = (
            f"the access-log bucket {self.node.path} receives only S3's own log deliveries, each a new object, and "
            f"expires them after {expire_after_days} days; versions would keep nothing that is ever overwritten"
        )
        acknowledge(self.bucket, f"{NIST}-S3BucketVersioningEnabled", unversioned)
        skip_checkov(self.bucket, "CKV_AWS_21", unversioned)
        skip_checkov(
            self.bucket,
            "CKV_AWS_18",
            f"the access-log bucket {self.node.path} is where the other buckets' access logs go; logging its own "
            "access to itself would log every delivery, without end",
        )


class SecureBucket(Construct):
    """A KMS-encrypted bucket, TLS only, public access blocked, logged to ``access_logs``."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        key: kms.IKey,
        access_logs: s3.IBucket,
        removal: cdk.RemovalPolicy,
        lifecycle_rules: Sequence[s3.LifecycleRule] = (),
        versioned: bool = False,
        auto_delete: bool | None = None,
        unversioned_reason: str | None = None,
    ) -> None:
        """A bucket that is not ``versioned`` says why in ``unversioned_reason``."""
        super().__init__(scope, construct_id)
        if not versioned and not unversioned_reason:
            raise ValueError(f"{self.node.path}: an unversioned bucket needs its reason")
        self.bucket = _bucket(
            self,
            removal=removal,
            auto_delete=auto_delete,
            lifecycle_rules=lifecycle_rules,
            encryption=s3.BucketEncryption.KMS,
            encryption_key=key,
            # One data key per bucket and hour instead of a KMS call per object.
            bucket_key_enabled=True,
            server_access_logs_bucket=access_logs,
            server_access_logs_prefix=f"{cdk.Names.unique_id(self)}/",
            versioned=versioned,
        )
        if not versioned:
            reason = f"bucket {self.node.path}: {unversioned_reason}"
            acknowledge(self.bucket, f"{NIST}-S3BucketVersioningEnabled", reason)
            skip_checkov(self.bucket, "CKV_AWS_21", reason)
