"""cdk-nag acknowledgements, each recorded where the finding is caused and saying why.

cdk-nag (3.x) runs as a validation plugin; a finding fails the synth unless the construct it
is reported on (or an ancestor) acknowledges its exact id. The ids of wildcard findings name
the wildcard: ``AwsSolutions-IAM5[Action::s3:GetObject*]``,
``AwsSolutions-IAM5[Resource::<LogicalId.Arn>/*]``.

Most findings here come from ``grant_*`` methods, which use AWS's action families
(``s3:GetObject*`` covers GetObject and its Version/Acl/Tagging variants) on the one resource
granted. :class:`Acknowledgements` collects, for one role, why each such wildcard is needed
and on which resource, so every acknowledgement names its resources and its reason, and is
added only by the grant that causes it.
"""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_s3 as s3
from constructs import IConstruct

AWS_SOLUTIONS = "AwsSolutions"
SERVERLESS = "Serverless"
NIST = "NIST.800.53.R5"


#: Context flag: record acknowledgements as metadata instead of making them, so a synth shows
#: every finding and a test can check each acknowledgement still answers one.
DRY_RUN_CONTEXT = "rdss:nag-dry-run"
DRY_RUN_METADATA = "rdss:acknowledgement"


def acknowledge(scope: IConstruct, rule: str, reason: str) -> None:
    """Acknowledges ``rule`` on ``scope`` and everything under it."""
    if scope.node.try_get_context(DRY_RUN_CONTEXT):
        scope.node.add_metadata(DRY_RUN_METADATA, {"id": rule, "reason": reason})
        return
    cdk.Validations.of(scope).acknowledge(cdk.Acknowledgment(id=rule, reason=reason))


def iam5(wildcard: str) -> str:
    """The id of an IAM5 (wildcard permission) finding: ``Action::s3:List*``, ``Resource::*``."""
    return f"{AWS_SOLUTIONS}-IAM5[{wildcard}]"


def flatten(reference: Any) -> str:
    """A resolved CloudFormation value as cdk-nag writes it in finding ids (its
    ``flattenCfnReference``): ``{"Fn::GetAtt": ["Bucket", "Arn"]}`` -> ``<Bucket.Arn>``,
    ``${AWS::Region}`` -> ``<AWS::Region>``, joins concatenated."""
    if reference is None:
        return ""
    if isinstance(reference, str):
        return reference.replace("${", "<").replace("}", ">")
    if isinstance(reference, dict):
        if "Fn::Join" in reference:
            delimiter, items = reference["Fn::Join"]
            return str(delimiter).join(flatten(item) for item in items)
        if "Fn::Sub" in reference:
            return flatten(reference["Fn::Sub"])
        if "Fn::GetAtt" in reference:
            resource, attribute = reference["Fn::GetAtt"]
            return f"<{flatten(resource)}.{flatten(attribute)}>"
        if "Fn::ImportValue" in reference:
            return flatten(reference["Fn::ImportValue"])
        if "Ref" in reference:
            return f"<{flatten(reference['Ref'])}>"
    return json.dumps(reference, separators=(",", ":"))


def resource_wildcard(scope: IConstruct, arn: str) -> str:
    """The IAM5 finding id of a wildcard resource ``arn`` (tokens allowed) in ``scope``'s stack."""
    return iam5("Resource::" + flatten(cdk.Stack.of(scope).resolve(arn)))


class Acknowledgements:
    """Why each wildcard a role's grants put in its policy is acceptable.

    Reasons accumulate per finding id while the grants are made; :meth:`apply` records one
    acknowledgement per id on ``scope`` (the role, or a construct holding it), joining the
    reasons of every resource the wildcard appears for.
    """

    def __init__(self, scope: IConstruct, subject: str) -> None:
        self._scope = scope
        self._subject = subject
        self._reasons: dict[str, list[str]] = {}

    def add(self, finding: str, reason: str) -> None:
        reasons = self._reasons.setdefault(finding, [])
        if reason not in reasons:
            reasons.append(reason)

    def bucket_read(self, bucket: s3.IBucket, name: str, purpose: str, objects: str = "*") -> None:
        """What ``bucket.grant_read(role, objects)`` adds: object and bucket read families on
        that bucket (and those keys) only."""
        self.add(
            iam5("Action::s3:GetObject*"),
            f"grant_read on the {name} bucket: GetObject and its version/ACL/tagging variants on its objects only",
        )
        self.add(
            iam5("Action::s3:GetBucket*"),
            f"grant_read on the {name} bucket: GetBucketLocation and the bucket's other read-only attributes",
        )
        self.add(iam5("Action::s3:List*"), f"grant_read on the {name} bucket: listing its keys and versions only")
        self.add(
            resource_wildcard(bucket, bucket.arn_for_objects(objects)), f"{objects} in the {name} bucket: {purpose}"
        )

    def bucket_write(self, bucket: s3.IBucket, name: str, purpose: str, objects: str = "*") -> None:
        """What ``bucket.grant_write(role, objects)`` (or the write half of ``grant_read_write``)
        adds: put, delete and abort families on that bucket (and those keys) only."""
        self.add(
            iam5("Action::s3:DeleteObject*"),
            f"grant_write on the {name} bucket: DeleteObject (and of a version) on its objects only",
        )
        self.add(
            iam5("Action::s3:Abort*"),
            f"grant_write on the {name} bucket: AbortMultipartUpload of its own large uploads only",
        )
        self.add(
            resource_wildcard(bucket, bucket.arn_for_objects(objects)), f"{objects} in the {name} bucket: {purpose}"
        )

    def key_use(self, key_name: str) -> None:
        """What encrypting through a ``grant_*`` adds on a KMS key (the one key, no other)."""
        self.add(
            iam5("Action::kms:GenerateDataKey*"),
            f"the {key_name} key only: GenerateDataKey and GenerateDataKeyWithoutPlaintext, the data keys of "
            "envelope encryption for what it writes",
        )
        self.add(
            iam5("Action::kms:ReEncrypt*"),
            f"the {key_name} key only: ReEncryptFrom/To, which the grant pairs with encrypt and decrypt",
        )

    def apply(self) -> None:
        for finding, reasons in self._reasons.items():
            acknowledge(self._scope, finding, f"{self._subject}: " + "; ".join(reasons))
        self._reasons.clear()


#: Metadata key checkov reads a resource's skips from: ``{"skip": [{"id": ..., "comment": ...}]}``.
CHECKOV_METADATA = "checkov"


def skip_checkov(scope: IConstruct, check: str, reason: str) -> None:
    """Declares on the resource behind ``scope`` (its default child, or itself) that checkov's
    ``check`` (``CKV_AWS_117``) does not apply, and why; checkov reports it as skipped."""
    resource = scope if isinstance(scope, cdk.CfnResource) else scope.node.default_child
    if not isinstance(resource, cdk.CfnResource):
        raise TypeError(f"{scope.node.path} is not a CloudFormation resource")
    metadata = resource.get_metadata(CHECKOV_METADATA) or {"skip": []}
    skips = [s for s in metadata["skip"] if s["id"] != check]
    resource.add_metadata(CHECKOV_METADATA, {"skip": [*skips, {"id": check, "comment": reason}]})
