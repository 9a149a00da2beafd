"""Vendors of the local runtime's deployment: the roles the CDK app creates, in the emulator.

:func:`provision_vendors` deploys a CloudFormation stack ``<prefix>-<env>`` holding one role and
managed policy per vendor - the trust statement and policy statements of
:class:`rdss.deployment.vendors.VendorAccess`, with the emulator's ARNs - and the same outputs the CDK
stack has, so ``rdss vendor config NAME --env <env> --endpoint URL`` reads a local deployment
exactly as it reads a deployed one.

The emulator holds each role to these documents (:mod:`rdss.local.authorise`): a vendor's gateway
assumes its role with the external ID, and every call it makes under the role is allowed or
refused as AWS would - PutRecord(s) on ``input`` for a producer, on ``invalid`` and ``error`` for
a consumer (its moves), reads of what it consumes and ``responses``, its own group's rows of
``checkpoints``; nothing on a routed channel, ``sequence`` or the broker's tables. So a vendor's
mistake shows locally (``tests/integration/test_local_roles.py``); the synthesised template's
policies are checked in ``tests/cdk/test_vendors.py``."""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from rdss.deployment.topology import RDSS, Deployment
from rdss.deployment.vendors import Arns, VendorAccess, check_vendor_name, output_key, role_name, trust_statement
from rdss.local.emulator import Endpoint
from rdss.model.canonical import V3, VERSIONS


@dataclass(frozen=True)
class LocalVendor:
    """A vendor of a local deployment (its principal is the emulator's own account)."""

    produces: bool = False
    consumes: tuple[str, ...] = ()
    #: None: a random one, as an operator would issue.
    external_id: str | None = None
    #: The Message API version its application reads (``reads=4.0.0``).
    reads: str = V3


def parse_vendor(spec: str) -> tuple[str, LocalVendor]:
    """``NAME:produces``, ``NAME:consumes=metadata,vocabulary`` or both (``rdss local up --vendor``),
    and ``:reads=4.0.0`` for the Message API version its application reads (default 3.0.2).

    Raises:
        ValueError: the spec is malformed.
    """
    name, _, rest = spec.partition(":")
    produces = False
    consumes: tuple[str, ...] = ()
    reads = V3
    for part in filter(None, rest.split(":")):
        if part == "produces":
            produces = True
        elif part.startswith("reads="):
            reads = part.removeprefix("reads=")
            if reads not in VERSIONS:
                raise ValueError(f"{spec!r}: reads= one of {', '.join(VERSIONS)}; not {reads!r}")
        elif part.startswith("consumes="):
            consumes = tuple(c for c in part.removeprefix("consumes=").split(",") if c)
        else:
            raise ValueError(f"{spec!r}: expected NAME:produces and/or NAME:consumes=CHANNEL,...; not {part!r}")
    routed = sorted(c.name for c in RDSS.channels_of("routed"))  # what a vendor may read (rdss.deployment.vendors)
    unknown = [c for c in consumes if c not in routed]
    if unknown:
        raise ValueError(f"{spec!r}: {', '.join(unknown)}: not a routed channel ({', '.join(routed)})")
    if not name or not (produces or consumes):
        raise ValueError(f"{spec!r}: a vendor needs a name and produces and/or consumes=CHANNEL,...")
    try:
        check_vendor_name(name)
    except ValueError as error:
        raise ValueError(f"{spec!r}: {error}") from None
    return name, LocalVendor(produces, consumes, reads=reads)


def stack_name(deployment: Deployment) -> str:
    return f"{deployment.prefix}-{deployment.environment}"


def provision_vendors(endpoint: Endpoint, deployment: Deployment, vendors: Mapping[str, LocalVendor]) -> str:
    """Create (or replace) the vendors' stack; returns its name."""
    account = endpoint.client("sts").get_caller_identity()["Account"]
    region = endpoint.region
    kms = endpoint.client("kms")
    alias = _key_alias(deployment)
    aliases = {a["AliasName"]: a.get("TargetKeyId") for a in kms.list_aliases()["Aliases"]}
    if alias in aliases:
        key_id = aliases[alias]
    else:
        key_id = kms.create_key(Description=f"RDSS {deployment.environment}: the deployment's data key")["KeyMetadata"][
            "KeyId"
        ]
        kms.create_alias(AliasName=alias, TargetKeyId=key_id)
    arns = Arns(
        region=region,
        key=f"arn:aws:kms:{region}:{account}:key/{key_id}",
        stream=lambda channel: f"arn:aws:kinesis:{region}:{account}:stream/{deployment.stream(channel)}",
        table=lambda table: f"arn:aws:dynamodb:{region}:{account}:table/{deployment.table(table)}",
    )
    resources: dict[str, Any] = {}
    outputs: dict[str, Any] = {}
    previous = _outputs(endpoint.client("cloudformation"), stack_name(deployment))
    for name, vendor in vendors.items():
        access = VendorAccess(name, vendor.produces, vendor.consumes, deployment)
        # a restart keeps each vendor's external ID: the configuration it was given still works
        external_id = vendor.external_id or previous.get(output_key(name, "ExternalId")) or secrets.token_hex(12)
        role = output_key(name, "Role")
        resources[role] = {
            "Type": "AWS::IAM::Role",
            "Properties": {
                "RoleName": role_name(deployment, name),
                "AssumeRolePolicyDocument": {
                    "Version": "2012-10-17",
                    "Statement": [trust_statement(f"arn:aws:iam::{account}:root", external_id)],
                },
            },
        }
        resources[output_key(name, "Policy")] = {
            "Type": "AWS::IAM::ManagedPolicy",
            "Properties": {
                "ManagedPolicyName": f"{role_name(deployment, name)}-access",
                "PolicyDocument": {"Version": "2012-10-17", "Statement": access.statements(arns)},
                "Roles": [{"Ref": role}],
            },
        }
        values: dict[str, Any] = {
            "RoleArn": {"Fn::GetAtt": [role, "Arn"]},
            "ExternalId": external_id,
            "Region": region,
            "Group": access.group,
            "Writes": ",".join(access.writes),
            "Reads": ",".join(access.reads),
            "Version": vendor.reads,
        }
        for channel in dict.fromkeys((*access.writes, *access.reads)):
            values[f"{channel.capitalize()}StreamName"] = deployment.stream(channel)
            values[f"{channel.capitalize()}StreamArn"] = arns.stream(channel)
        for what, value in values.items():
            outputs[output_key(name, what)] = {"Value": value}
    cloudformation = endpoint.client("cloudformation")
    stack = stack_name(deployment)
    template = orjson.dumps({"Resources": resources, "Outputs": outputs}).decode()
    _delete_stack(endpoint, stack)
    cloudformation.create_stack(StackName=stack, TemplateBody=template, Capabilities=["CAPABILITY_NAMED_IAM"])
    _wait(cloudformation, stack)
    return stack


def deprovision_vendors(endpoint: Endpoint, deployment: Deployment) -> None:
    """Delete the vendors' stack, and the data key :func:`provision_vendors` made for it (its
    alias at once; the key after KMS's shortest waiting period, as KMS allows no sooner)."""
    _delete_stack(endpoint, stack_name(deployment))
    kms = endpoint.client("kms")
    alias = _key_alias(deployment)
    for entry in kms.list_aliases()["Aliases"]:
        if entry["AliasName"] == alias:
            kms.delete_alias(AliasName=alias)
            if entry.get("TargetKeyId"):
                kms.schedule_key_deletion(KeyId=entry["TargetKeyId"], PendingWindowInDays=7)


def _outputs(cloudformation: Any, stack: str) -> dict[str, str]:
    """The outputs of ``stack`` if it is live (a restart finds the one it made before), else {}."""
    if stack not in _live(cloudformation):
        return {}
    found = cloudformation.describe_stacks(StackName=stack)["Stacks"][0].get("Outputs", [])
    return {o["OutputKey"]: o["OutputValue"] for o in found}


def _live(cloudformation: Any) -> set[str]:
    return {
        s["StackName"] for s in cloudformation.list_stacks()["StackSummaries"] if s["StackStatus"] != "DELETE_COMPLETE"
    }


def _key_alias(deployment: Deployment) -> str:
    return f"alias/{deployment.prefix}-{deployment.environment}-messaging"


def _delete_stack(endpoint: Endpoint, stack: str) -> None:
    """Delete ``stack`` if it is there, and wait until it is gone."""
    cloudformation = endpoint.client("cloudformation")
    if stack not in _live(cloudformation):
        return
    # CloudFormation detaches a managed policy from its roles and deletes it; moto neither
    # detaches it (and then refuses to delete the role: DeleteConflict) nor deletes it (and then
    # refuses the next stack's policy of the same name). Done here, as the deletion would.
    iam = endpoint.client("iam")
    policies = [
        r["PhysicalResourceId"]
        for r in cloudformation.list_stack_resources(StackName=stack)["StackResourceSummaries"]
        if r["ResourceType"] == "AWS::IAM::ManagedPolicy" and r.get("PhysicalResourceId")
    ]
    for policy in policies:
        with contextlib.suppress(iam.exceptions.NoSuchEntityException):
            for role in iam.list_entities_for_policy(PolicyArn=policy)["PolicyRoles"]:
                iam.detach_role_policy(RoleName=role["RoleName"], PolicyArn=policy)
    cloudformation.delete_stack(StackName=stack)
    _wait(cloudformation, stack, gone=True)
    for policy in policies:
        with contextlib.suppress(iam.exceptions.NoSuchEntityException):
            iam.delete_policy(PolicyArn=policy)


def _wait(cloudformation: Any, stack: str, *, gone: bool = False, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            status = cloudformation.describe_stacks(StackName=stack)["Stacks"][0]["StackStatus"]
        except cloudformation.exceptions.ClientError:
            status = "DELETE_COMPLETE"
        if gone and status == "DELETE_COMPLETE":
            return
        if not gone and status == "CREATE_COMPLETE":
            return
        if status.endswith("FAILED") or (not gone and status.startswith("ROLLBACK")):
            raise RuntimeError(f"stack {stack}: {status}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"stack {stack} is still {status}")
        time.sleep(0.1)
