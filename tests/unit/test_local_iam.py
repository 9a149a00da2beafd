"""The policy evaluator the local emulator enforces vendors' roles with (rdss.local.iam): AWS's
rules on the elements the deployment's policies use, agreeing with the test suite's own reading
of the vendor policies (tests/support/iam.py) on every call a vendor could make, and failing
closed on what it does not understand."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rdss.deployment.topology import Deployment
from rdss.deployment.vendors import Arns, VendorAccess, trust_statement
from rdss.local.iam import Request, decide, statements
from tests.support.iam import Call, allowed

ACCOUNT, REGION = "123456789012", "eu-west-2"
CALLER = f"arn:aws:sts::{ACCOUNT}:assumed-role/rdss-dev-vendor-acme/rdss-gateway-acme"
DEPLOYMENT = Deployment("dev")
ARNS = Arns(
    region=REGION,
    key=f"arn:aws:kms:{REGION}:{ACCOUNT}:key/k",
    stream=lambda c: f"arn:aws:kinesis:{REGION}:{ACCOUNT}:stream/{DEPLOYMENT.stream(c)}",
    table=lambda t: f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{DEPLOYMENT.table(t)}",
)
CHANNELS = [c.name for c in DEPLOYMENT.topology.channels]
ROUTED = [c.name for c in DEPLOYMENT.topology.channels_of("routed")]
TABLES = [t.name for t in DEPLOYMENT.topology.tables]
KINESIS = ["PutRecord", "PutRecords", "GetRecords", "GetShardIterator", "ListShards", "DescribeStream", "DeleteStream"]
DYNAMODB = ["GetItem", "PutItem", "Query", "UpdateItem", "DeleteItem", "Scan", "BatchWriteItem"]
GROUPS = ["acme", "lib", "other"]


def allows(policy: list[dict], action: str, resource: str, context: dict | None = None) -> bool:  # type: ignore[type-arg]
    return decide(policy, Request(CALLER, action, resource, context or {})).allowed


vendors = st.builds(
    lambda name, produces, consumes: VendorAccess(name, produces or not consumes, tuple(consumes), DEPLOYMENT),
    st.sampled_from(GROUPS),
    st.booleans(),
    st.lists(st.sampled_from(ROUTED), unique=True, max_size=len(ROUTED)),
)
kinesis_calls = st.builds(
    lambda action, channel: Call(f"kinesis:{action}", ARNS.stream(channel)),
    st.sampled_from(KINESIS),
    st.sampled_from(CHANNELS),
)
dynamodb_calls = st.builds(
    lambda action, table, keys: Call(f"dynamodb:{action}", ARNS.table(table), tuple(keys)),
    st.sampled_from(DYNAMODB),
    st.sampled_from(TABLES),
    st.lists(
        st.builds(lambda g, c: f"{g}#{DEPLOYMENT.stream(c)}", st.sampled_from(GROUPS), st.sampled_from(CHANNELS)),
        max_size=3,
    ),
)


@given(vendor=vendors, call=kinesis_calls | dynamodb_calls)
def test_the_emulator_reads_the_vendor_policies_as_the_tests_do(vendor: VendorAccess, call: Call) -> None:
    """For any vendor (producer, consumer of any routed channels, both) and any stream or table
    call it could make, the enforced verdict is the one the deployed policy gives."""
    policy = vendor.statements(ARNS)
    context = {"dynamodb:LeadingKeys": call.leading_keys} if call.leading_keys else {}
    assert allows(policy, call.action, call.resource or "*", context) == allowed(policy, call)


def test_a_vendor_writes_only_its_channels_and_its_own_rows() -> None:
    producer = VendorAccess("acme", True, (), DEPLOYMENT).statements(ARNS)
    consumer = VendorAccess("lib", False, ("metadata",), DEPLOYMENT).statements(ARNS)
    assert allows(producer, "kinesis:PutRecords", ARNS.stream("input"))
    assert not allows(producer, "kinesis:GetRecords", ARNS.stream("metadata"))
    assert not allows(consumer, "kinesis:PutRecords", ARNS.stream("input"))
    assert allows(consumer, "kinesis:PutRecords", ARNS.stream("invalid"))
    own = {"dynamodb:LeadingKeys": (f"lib#{DEPLOYMENT.stream('metadata')}",)}
    assert allows(consumer, "dynamodb:Query", ARNS.table("checkpoints"), own)
    assert not allows(consumer, "dynamodb:Query", ARNS.table("checkpoints"))  # no key: never
    assert not allows(consumer, "dynamodb:GetItem", ARNS.table("messages"), own)
    # a direct KMS call carries no kms:ViaService: refused, as in AWS
    assert not allows(consumer, "kms:Decrypt", ARNS.key)
    assert allows(consumer, "kms:Decrypt", ARNS.key, {
        "kms:ViaService": (f"kinesis.{REGION}.amazonaws.com",),
        "kms:EncryptionContext:aws:kinesis:arn": (ARNS.stream("metadata"),),
    })  # fmt: skip


def test_the_trust_statement_wants_the_account_and_the_external_id() -> None:
    trust = [trust_statement(f"arn:aws:iam::{ACCOUNT}:root", "the-id")]
    role = f"arn:aws:iam::{ACCOUNT}:role/r"

    def assume(caller: str, external_id: str | None) -> bool:
        context = {"sts:ExternalId": (external_id,)} if external_id else {}
        return decide(trust, Request(caller, "sts:AssumeRole", role, context)).allowed

    root = f"arn:aws:iam::{ACCOUNT}:root"
    assert assume(root, "the-id")
    assert assume(f"arn:aws:iam::{ACCOUNT}:user/ops", "the-id")  # any principal of the account
    assert not assume(root, "another-id")
    assert not assume(root, None)
    assert not assume("arn:aws:iam::210987654321:root", "the-id")  # another account


def statement(**fields: object) -> dict:  # type: ignore[type-arg]
    return {"Effect": "Allow", "Action": "kinesis:*", "Resource": "*", **fields}


def test_aws_rules() -> None:
    arn = ARNS.stream("input")
    # an explicit Deny wins over any Allow
    assert not allows([statement(), statement(Effect="Deny", Action="kinesis:PutRecords")], "kinesis:PutRecords", arn)
    # wildcards; actions without regard to case; resources with it
    assert allows([statement(Action="Kinesis:Put*")], "kinesis:PutRecords", arn)
    assert allows([statement(Resource="arn:aws:kinesis:*:*:stream/rdss-dev-i?put")], "kinesis:PutRecords", arn)
    assert not allows([statement(Resource=arn.upper())], "kinesis:PutRecords", arn)
    assert not allows([statement(Resource="arn:aws:kinesis:*:*:stream/[a-z]*")], "kinesis:PutRecords", arn)
    # NotAction, NotResource
    not_action = {"Effect": "Allow", "NotAction": "kinesis:Delete*", "Resource": "*"}
    assert allows([not_action], "kinesis:PutRecords", arn)
    assert not allows([not_action], "kinesis:DeleteStream", arn)
    not_resource = {"Effect": "Allow", "Action": "kinesis:*", "NotResource": arn}
    assert not allows([not_resource], "kinesis:PutRecords", arn)
    assert allows([not_resource], "kinesis:PutRecords", ARNS.stream("error"))
    # conditions: Null, IfExists, a negated operator on an absent key, set forms
    keys = {"dynamodb:LeadingKeys": ("a", "b")}
    present = statement(Action="dynamodb:*", Condition={"Null": {"dynamodb:LeadingKeys": "false"}})
    assert allows([present], "dynamodb:Query", "t", keys)
    assert not allows([present], "dynamodb:Query", "t")
    every = statement(Action="dynamodb:*", Condition={"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": ["a"]}})
    assert not allows([every], "dynamodb:Query", "t", keys)
    assert allows([every], "dynamodb:Query", "t")
    some = statement(Action="dynamodb:*", Condition={"ForAnyValue:StringLike": {"dynamodb:LeadingKeys": ["a*"]}})
    assert allows([some], "dynamodb:Query", "t", keys)
    assert not allows([some], "dynamodb:Query", "t")
    maybe = statement(Condition={"StringEqualsIfExists": {"aws:SourceVpc": "vpc-1"}})
    assert allows([maybe], "kinesis:PutRecords", arn)
    assert not allows([maybe], "kinesis:PutRecords", arn, {"aws:SourceVpc": ("vpc-2",)})
    unlike = statement(Condition={"StringNotEquals": {"aws:SourceVpc": "vpc-1"}})
    assert allows([unlike], "kinesis:PutRecords", arn)


def test_what_it_does_not_understand_fails_closed() -> None:
    arn = ARNS.stream("input")
    odd = {"NumericLessThan": {"aws:MultiFactorAuthAge": "3600"}}
    assert not allows([statement(Condition=odd)], "kinesis:PutRecords", arn)  # such an Allow allows nothing
    assert not allows([statement(), statement(Effect="Deny", Condition=odd)], "kinesis:PutRecords", arn)  # and denies
    assert not allows([{"Effect": "Allow", "Resource": "*"}], "kinesis:PutRecords", arn)  # no Action


def test_documents_as_iam_returns_them() -> None:
    document = {"Version": "2012-10-17", "Statement": statement()}
    assert statements(json.dumps(document)) == [statement()]
    assert statements("%7B%22Statement%22%3A%20%5B%5D%7D") == []  # URL-encoded
    with pytest.raises(ValueError):
        statements("[1, 2]")
