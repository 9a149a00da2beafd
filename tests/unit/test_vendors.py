"""Vendor access from the topology, local vendor specs and the gateway URL's role options."""

from __future__ import annotations

import pytest

from rdss.deployment.topology import Deployment
from rdss.deployment.vendors import Arns, VendorAccess, output_key
from rdss.gateway.url import URLError, parse
from rdss.local.vendor_stack import LocalVendor, parse_vendor


def test_access_follows_the_topology() -> None:
    deployment = Deployment("prod")
    producer = VendorAccess("acme", True, (), deployment)
    assert producer.writes == ("input",)
    assert producer.reads == ("responses",)
    consumer = VendorAccess("lib", False, ("vocabulary", "metadata"), deployment)
    assert consumer.writes == ("invalid", "error")  # its moves (invalid, poison, refused), put there itself
    both = VendorAccess("hub", True, ("metadata",), deployment)
    assert both.writes == ("input", "invalid", "error")
    assert consumer.reads == ("metadata", "vocabulary", "responses")  # topology order
    assert consumer.lease_keys == ("lib#rdss-prod-metadata", "lib#rdss-prod-vocabulary", "lib#rdss-prod-responses")
    with pytest.raises(ValueError, match="routed"):
        VendorAccess("bad", False, ("invalid",), deployment)


def test_statements_name_only_the_vendors_streams() -> None:
    arns = Arns("eu-west-2", "KEY", stream=lambda c: f"stream/{c}", table=lambda t: f"table/{t}")
    statements = {s["Sid"]: s for s in VendorAccess("lib", False, ("metadata",), Deployment("dev")).statements(arns)}
    # a consumer's moves on invalid and error, and nothing else: no input, no routed channel
    assert statements["MoveRecordsToInvalidAndError"]["Resource"] == ["stream/invalid", "stream/error"]
    assert statements["EncryptMovedRecords"]["Condition"]["StringEquals"]["kms:EncryptionContext:aws:kinesis:arn"] == [
        "stream/invalid",
        "stream/error",
    ]
    assert "PutRecordsOnInput" not in statements
    put = [s for s in statements.values() if "kinesis:PutRecords" in s["Action"]]
    assert [s["Sid"] for s in put] == ["MoveRecordsToInvalidAndError"]
    producer = {s["Sid"]: s for s in VendorAccess("acme", True, (), Deployment("dev")).statements(arns)}
    assert producer["PutRecordsOnInput"]["Resource"] == "stream/input"
    assert "MoveRecordsToInvalidAndError" not in producer
    assert not [s for s in statements.values() if "table/messages" in str(s) or "table/sequences" in str(s)]
    assert statements["ReadChannels"]["Resource"] == ["stream/metadata", "stream/responses"]
    assert statements["OwnGroupCheckpoints"]["Resource"] == "table/checkpoints"


def test_output_keys_are_camel_case() -> None:
    assert output_key("eprints-repository", "RoleArn") == "VendorEprintsRepositoryRoleArn"


def test_local_vendor_specs() -> None:
    assert parse_vendor("acme:produces") == ("acme", LocalVendor(produces=True))
    assert parse_vendor("lib:consumes=metadata,vocabulary") == ("lib", LocalVendor(consumes=("metadata", "vocabulary")))
    assert parse_vendor("both:produces:consumes=metadata") == ("both", LocalVendor(True, ("metadata",)))
    for bad in ("acme", "acme:writes", ":produces"):
        with pytest.raises(ValueError, match="produces"):
            parse_vendor(bad)
    assert parse_vendor("pres:consumes=metadata:reads=4.0.0") == (
        "pres",
        LocalVendor(consumes=("metadata",), reads="4.0.0"),
    )
    assert parse_vendor("lib:consumes=metadata")[1].reads == "3.0.2"
    with pytest.raises(ValueError, match="reads="):
        parse_vendor("pres:consumes=metadata:reads=5.0.0")


def test_vendor_config_says_the_version_read_and_the_tenant() -> None:
    from rdss.cli.vendor import gateway_config

    outputs = {
        output_key("pres", what): value
        for what, value in {
            "RoleArn": "arn:aws:iam::123456789012:role/rdss-prod-vendor-pres",
            "ExternalId": "abcdef",
            "Region": "eu-west-2",
            "Group": "pres",
            "Writes": "invalid,error",
            "Reads": "metadata,responses",
            "InvalidStreamName": "rdss-prod-invalid",
            "ErrorStreamName": "rdss-prod-error",
            "MetadataStreamName": "rdss-prod-metadata",
            "ResponsesStreamName": "rdss-prod-responses",
        }.items()
    }
    before = gateway_config("pres", "prod", outputs, None)  # a stack deployed before versions were declared
    assert (before.version, before.tenant_jisc_id) == ("3.0.2", None)
    outputs[output_key("pres", "Version")] = "4.0.0"
    outputs[output_key("pres", "TenantJiscId")] = "1234"
    config = gateway_config("pres", "prod", outputs, None)
    assert (config.version, config.tenant_jisc_id) == ("4.0.0", 1234)


def test_role_options_of_kinesis_urls() -> None:
    url = parse("kinesis://prod?role=arn:aws:iam::123456789012:role/rdss-prod-vendor-x&external_id=abc")
    assert url.param("role") == "arn:aws:iam::123456789012:role/rdss-prod-vendor-x"
    assert url.param("external_id") == "abc"
    with pytest.raises(URLError, match="role="):
        parse("kinesis://prod?external_id=abc")
    with pytest.raises(URLError, match="role ARN"):
        parse("kinesis://prod?role=rdss-prod-vendor-x")
