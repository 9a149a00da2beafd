"""What a vendor may do in a deployment, derived from the topology: described once, rendered as
IAM by the CDK app (``stacks/vendors.py``) and by the local runtime (``rdss.local.vendor_stack``).

A vendor is a repository or preservation system outside the deployment's account that runs the
Message Gateway. It assumes its own role (with an external ID) and may:

* put records on the ``input`` channel if it produces: everything a producer sends passes the
  broker, which judges it by its content alone (a header's errorCode is an optional field, not
  a verdict);
* put records on ``invalid`` and ``error`` if it consumes: the spec has a receiver move a
  message it cannot accept (invalid, expired, poison, refused by the application) to the
  Invalid or Error Message Queue itself - decorated through :mod:`rdss.model.rejection` and keyed
  ``moved:<group>`` - so a consumer's move never enters ``input``, and no producer's message
  can take its path (a role that only produces has no such permission);
* never put records on a routed channel or ``sequence``: only the broker and the sequencer
  route;
* read the routed channels it consumes, and ``responses`` (request-reply);
* use the KMS key only through Kinesis, and only for those streams (the key's encryption
  context names the stream), and through DynamoDB for the ``checkpoints`` table only;
* read and write the rows of its own consumer group in ``checkpoints``: the partition key
  ``lease`` is ``<group>#<stream>`` (:func:`rdss.deployment.topology.lease_key`) and IAM's
  ``dynamodb:LeadingKeys`` admits exactly those of its group on the streams it reads.

Nothing else: not the broker's ``messages`` and ``sequences`` tables (a vendor's gateway keeps
its Local Data Repository in a store of its own, the URL's ``ldr=``), not the buckets, not
another group's rows.

The stack outputs what a vendor needs to configure its gateway under keys from
:func:`output_key`; ``rdss vendor config`` reads them back (:mod:`rdss.cli.vendor`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from rdss.deployment.topology import Deployment, lease_key

#: The table of consumer groups' checkpoints and leases.
CHECKPOINTS = "checkpoints"
#: Where every producer writes.
INPUT = "input"
#: Where a consumer moves what it cannot accept (the spec's Invalid and Error Message Queues).
MOVES = ("invalid", "error")
#: Replies without another return address: every vendor may read them.
RESPONSES = "responses"

#: Read the records of a stream the way the gateway does (no stream-wide or account-wide calls).
READ_ACTIONS = ("kinesis:GetRecords", "kinesis:GetShardIterator", "kinesis:ListShards")
WRITE_ACTIONS = ("kinesis:PutRecord", "kinesis:PutRecords")
#: What the lease store does with its own rows (rdss.gateway.checkpoints.DynamoLeaseStore).
CHECKPOINT_ACTIONS = ("dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query", "dynamodb:UpdateItem")
#: What DynamoDB does with the table's customer-managed key on the caller's behalf.
TABLE_KEY_ACTIONS = ("kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey")


#: A vendor's name: words of lower-case letters and digits, the first starting with a letter, joined
#: by single hyphens. It names the vendor's IAM role and managed policy (IAM takes ``[\w+=,.@-]``),
#: its stack outputs (CloudFormation takes letters and digits only: :func:`output_key` capitalises
#: the words), its consumer group (a partition key's prefix, a lease row's, a RabbitMQ queue's) and
#: its gateway's files; a path separator, ``..``, white space or markup is none of these.
VENDOR_NAME = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*\Z")
#: The longest vendor name (the role's name, ``<prefix>-<env>-vendor-<name>``, must stay within IAM's 64).
MAX_VENDOR_NAME = 32
#: IAM's limit on a role's name.
MAX_ROLE_NAME = 64


def check_vendor_name(name: str, deployment: Deployment | None = None) -> str:
    """``name`` if it is fit to name a vendor (:data:`VENDOR_NAME`, at most :data:`MAX_VENDOR_NAME`
    characters) and, given its deployment, its role's name fits IAM's limit.

    Raises:
        ValueError: it is not; the message says the rule (naming a malformed name is left to the
            caller, which knows where it came from).
    """
    if not VENDOR_NAME.match(name) or len(name) > MAX_VENDOR_NAME:
        raise ValueError(
            "a vendor name is lower-case letters and digits in words joined by single hyphens, starting with a letter, "
            f"at most {MAX_VENDOR_NAME} characters (it names an IAM role, stack outputs and a consumer group)"
        )
    if deployment is not None:
        role = role_name(deployment, name)
        if len(role) > MAX_ROLE_NAME:
            raise ValueError(
                f"vendor {name}: a vendor name of {deployment.environment} takes at most "
                f"{MAX_ROLE_NAME - len(role) + len(name)} characters: its role, {role}, would be longer than IAM's "
                f"{MAX_ROLE_NAME}"
            )
    return name


def check_vendor_names(names: Iterable[str]) -> None:
    """Vendors of one deployment: each output key names one vendor (``a-1`` and ``a1`` would
    both be ``VendorA1...``).

    Raises:
        ValueError: two names share their stack outputs.
    """
    seen: dict[str, str] = {}
    for name in names:
        key = output_key(name, "")
        if seen.setdefault(key, name) != name:
            raise ValueError(f"vendors {seen[key]} and {name} would share their stack outputs ({key}...): rename one")


def role_name(deployment: Deployment, vendor: str) -> str:
    """The vendor's role: ``rdss-<env>-vendor-<name>``."""
    return f"{deployment.prefix}-{deployment.environment}-vendor-{vendor}"


def output_key(vendor: str, what: str) -> str:
    """A stack output's key: ``Vendor`` + the vendor's name + ``what``, in CamelCase
    (``eprints-repository``, ``RoleArn`` -> ``VendorEprintsRepositoryRoleArn``)."""
    return "Vendor" + "".join(part.capitalize() for part in vendor.split("-")) + what


@dataclass(frozen=True)
class VendorAccess:
    """One vendor's access to one deployment."""

    #: Its name (:func:`check_vendor_name`): its role, its stack outputs and its consumer group.
    name: str
    #: Whether it may put messages on ``input``.
    produces: bool
    #: The routed channels it may read, as its consumer group.
    consumes: tuple[str, ...]
    deployment: Deployment

    def __post_init__(self) -> None:
        routed = {c.name for c in self.deployment.topology.channels_of("routed")}
        unknown = sorted(set(self.consumes) - routed)
        if unknown:
            raise ValueError(f"vendor {self.name}: {unknown} are not routed channels ({sorted(routed)})")

    @property
    def group(self) -> str:
        """Its consumer group (the gateway's ``application``)."""
        return self.name

    @property
    def writes(self) -> tuple[str, ...]:
        """``input`` for a producer (its messages); ``invalid`` and ``error`` for a consumer (its
        moves); nothing else."""
        return (*self.produced, *self.moves)

    @property
    def produced(self) -> tuple[str, ...]:
        """The channel its messages enter by: ``input``, if it produces."""
        return (INPUT,) if self.produces else ()

    @property
    def moves(self) -> tuple[str, ...]:
        """The channels it moves records to: ``invalid`` and ``error``, if it consumes."""
        return MOVES if self.consumes else ()

    @property
    def reads(self) -> tuple[str, ...]:
        """The consumed channels and ``responses``, in topology order."""
        wanted = {*self.consumes, RESPONSES}
        return tuple(c.name for c in self.deployment.topology.channels if c.name in wanted)

    @property
    def lease_keys(self) -> tuple[str, ...]:
        """The ``lease`` values of its group's rows: one per stream it reads."""
        return tuple(lease_key(self.group, self.deployment.stream(channel)) for channel in self.reads)

    def statements(self, arns: Arns) -> list[dict[str, Any]]:
        """The role's policy statements (IAM JSON; values may be CloudFormation tokens)."""
        kinesis_service = f"kinesis.{arns.region}.amazonaws.com"
        dynamodb_service = f"dynamodb.{arns.region}.amazonaws.com"
        statements: list[dict[str, Any]] = []
        for channels, put, encrypt in (
            (self.produced, "PutRecordsOnInput", "EncryptRecordsForInput"),
            (self.moves, "MoveRecordsToInvalidAndError", "EncryptMovedRecords"),
        ):
            if not channels:
                continue
            written = [arns.stream(channel) for channel in channels]
            statements += [
                _allow(put, WRITE_ACTIONS, written),
                _allow(
                    encrypt,
                    ("kms:GenerateDataKey",),
                    [arns.key],
                    {"StringEquals": {"kms:ViaService": kinesis_service, _KINESIS_CONTEXT: _one(written)}},
                ),
            ]
        read = [arns.stream(channel) for channel in self.reads]
        statements += [
            _allow("ReadChannels", READ_ACTIONS, read),
            _allow(
                "DecryptChannelRecords",
                ("kms:Decrypt",),
                [arns.key],
                {"StringEquals": {"kms:ViaService": kinesis_service, _KINESIS_CONTEXT: _one(read)}},
            ),
            _allow(
                "OwnGroupCheckpoints",
                CHECKPOINT_ACTIONS,
                [arns.table(CHECKPOINTS)],
                {
                    "ForAllValues:StringEquals": {"dynamodb:LeadingKeys": list(self.lease_keys)},
                    # ForAllValues holds for a request without keys; there must be keys.
                    "Null": {"dynamodb:LeadingKeys": "false"},
                },
            ),
            _allow(
                "CheckpointsTableKey",
                TABLE_KEY_ACTIONS,
                [arns.key],
                {
                    "StringEquals": {
                        "kms:ViaService": dynamodb_service,
                        "kms:EncryptionContext:aws:dynamodb:tableName": self.deployment.table(CHECKPOINTS),
                    }
                },
            ),
            _allow(
                "DescribeKeyThroughDynamoDB",
                ("kms:DescribeKey",),
                [arns.key],
                {"StringEquals": {"kms:ViaService": dynamodb_service}},
            ),
        ]
        return statements


#: The encryption context Kinesis passes to KMS: the stream's ARN.
_KINESIS_CONTEXT = "kms:EncryptionContext:aws:kinesis:arn"


@dataclass(frozen=True)
class Arns:
    """Where the deployment's resources are: ARNs (or tokens standing for them) and the region."""

    region: str
    key: str
    stream: Callable[[str], str]
    table: Callable[[str], str]


def trust_statement(principal_arn: str, external_id: str) -> dict[str, Any]:
    """Who may assume the role: the vendor's principal, presenting its external ID."""
    return {
        "Effect": "Allow",
        "Principal": {"AWS": principal_arn},
        "Action": "sts:AssumeRole",
        "Condition": {"StringEquals": {"sts:ExternalId": external_id}},
    }


def _allow(
    sid: str, actions: tuple[str, ...], resources: list[str], condition: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    statement: dict[str, Any] = {
        "Sid": sid,
        "Effect": "Allow",
        "Action": list(actions),
        "Resource": _one(resources),
    }
    if condition:
        statement["Condition"] = dict(condition)
    return statement


def _one(values: list[str]) -> str | list[str]:
    return values[0] if len(values) == 1 else list(values)
