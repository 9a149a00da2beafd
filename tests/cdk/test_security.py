"""Secure by default: encryption everywhere, no wildcard actions, nothing public, TLS only."""

from __future__ import annotations

import json
from typing import Any

from tests.cdk.conftest import Synthesized
from tests.cdk.support import identity_statements, references, statements

#: Actions that support no resource-level permissions, so their statements name "*".
_NO_RESOURCE_LEVEL = {"xray:PutTraceSegments", "xray:PutTelemetryRecords", "cloudwatch:PutMetricData"}


def test_no_identity_policy_allows_a_wildcard_action(synthesized: Synthesized) -> None:
    for policy, statement in identity_statements(synthesized.json):
        if statement.effect != "Allow":
            continue
        for action in statement.actions:
            assert action != "*", policy
            assert not action.endswith(":*"), (policy, action)


def test_resource_wildcards_only_where_aws_offers_no_resource_level_permissions(synthesized: Synthesized) -> None:
    for policy, statement in identity_statements(synthesized.json):
        if statement.effect == "Allow" and "*" in statement.resources:
            assert statement.actions <= _NO_RESOURCE_LEVEL, (policy, statement)


def test_resource_policies_allow_no_wildcard_action(synthesized: Synthesized) -> None:
    """Bucket, queue and topic policies may deny broadly (TLS only) but allow nothing broad.

    Key policies are checked apart: their one broad statement is the account-root delegation
    that lets IAM policies (the grants) work at all.
    """
    policies = {
        "AWS::S3::BucketPolicy": "PolicyDocument",
        "AWS::SQS::QueuePolicy": "PolicyDocument",
        "AWS::SNS::TopicPolicy": "PolicyDocument",
    }
    for logical_id, resource in synthesized.json["Resources"].items():
        if resource["Type"] in policies:
            for statement in statements(resource["Properties"][policies[resource["Type"]]]):
                if statement.effect == "Allow":
                    assert all(a != "*" and not a.endswith(":*") for a in statement.actions), logical_id


def test_keys_rotate_and_delegate_only_to_this_account(synthesized: Synthesized) -> None:
    keys = synthesized.resources("AWS::KMS::Key")
    assert len(keys) == 2  # messaging and analytics
    for key in keys.values():
        properties = key["Properties"]
        assert properties["EnableKeyRotation"] is True
        for statement in properties["KeyPolicy"]["Statement"]:
            if statement["Action"] == "kms:*":
                assert ":root" in json.dumps(statement["Principal"]), statement


def _bucket_policy(synthesized: Synthesized, bucket: str) -> dict[str, Any]:
    for resource in synthesized.resources("AWS::S3::BucketPolicy").values():
        if references(resource["Properties"]["Bucket"]) == {bucket}:
            return dict(resource["Properties"]["PolicyDocument"])
    raise AssertionError(f"no policy for {bucket}")


def test_buckets_are_encrypted_private_tls_only_logged_and_expiring(synthesized: Synthesized) -> None:
    access_logs = synthesized.logical_id(synthesized.stack.messaging.access_logs)
    buckets = synthesized.resources("AWS::S3::Bucket")
    assert len(buckets) == 6  # audit, errors, staging, curated, query results, access logs
    for logical_id, bucket in buckets.items():
        properties = bucket["Properties"]
        (rule,) = properties["BucketEncryption"]["ServerSideEncryptionConfiguration"]
        default = rule["ServerSideEncryptionByDefault"]
        if logical_id == access_logs:
            # S3 server access logs cannot be delivered to an SSE-KMS bucket
            assert default == {"SSEAlgorithm": "AES256"}
        else:
            assert default["SSEAlgorithm"] == "aws:kms", logical_id
            assert "KMSMasterKeyID" in default, logical_id
            assert references(properties["LoggingConfiguration"]["DestinationBucketName"]) == {access_logs}
        assert properties["PublicAccessBlockConfiguration"] == {
            "BlockPublicAcls": True,
            "BlockPublicPolicy": True,
            "IgnorePublicAcls": True,
            "RestrictPublicBuckets": True,
        }
        assert properties["LifecycleConfiguration"]["Rules"], logical_id
        denies = [
            s
            for s in _bucket_policy(synthesized, logical_id)["Statement"]
            if s["Effect"] == "Deny" and s.get("Condition", {}).get("Bool", {}).get("aws:SecureTransport") == "false"
        ]
        assert denies, f"{logical_id} accepts plain HTTP"


def test_queues_topics_logs_streams_and_tables_are_kms_encrypted(synthesized: Synthesized) -> None:
    for kind, key in (
        ("AWS::SQS::Queue", "KmsMasterKeyId"),
        ("AWS::SNS::Topic", "KmsMasterKeyId"),
        ("AWS::Logs::LogGroup", "KmsKeyId"),
    ):
        resources = synthesized.resources(kind)
        assert resources, kind
        for logical_id, resource in resources.items():
            assert key in resource["Properties"], (kind, logical_id)
    for stream in synthesized.resources("AWS::Kinesis::Stream").values():
        assert stream["Properties"]["StreamEncryption"]["EncryptionType"] == "KMS"
    for table in synthesized.resources("AWS::DynamoDB::Table").values():
        assert table["Properties"]["SSESpecification"]["SSEType"] == "KMS"


def test_queues_and_topics_refuse_plain_http(synthesized: Synthesized) -> None:
    for kind in ("AWS::SQS::QueuePolicy", "AWS::SNS::TopicPolicy"):
        for logical_id, policy in synthesized.resources(kind).items():
            document = policy["Properties"]["PolicyDocument"]
            assert any(
                s["Effect"] == "Deny" and s.get("Condition", {}).get("Bool", {}).get("aws:SecureTransport") == "false"
                for s in document["Statement"]
            ), logical_id


def test_no_function_has_inline_code(synthesized: Synthesized) -> None:
    for logical_id, function in synthesized.resources("AWS::Lambda::Function").items():
        assert "ZipFile" not in function["Properties"]["Code"], logical_id
