"""The prices the cost model uses: AWS list prices per region, one table a region, one place.

Each price names the AWS pricing page it comes from (the page's region selector gives the
region's figure) and the date it is taken as of, :data:`AS_OF`, so that a bill prices every item
at the same moment. They were not fetched by this code (the build machine has no web access):
they are the published list prices as known on that date, without free tiers, volume discounts
past the first tier, savings plans or reserved capacity. A month is 730 hours; a GB is 2**30
bytes. When AWS changes a price, check them all and move :data:`AS_OF` with them; ``rdss bench
cost --prices`` prints the table of the deployment's region.

The deployment's region (``region`` in cdk.json, else ``CDK_DEFAULT_REGION``) selects the table:
:func:`priced_in` sets it for the bill being computed, :func:`usd` reads it. A region without a
table is refused (:class:`UnknownRegion`), never priced at another region's prices.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass

MONTH_HOURS = 730
MONTH_SECONDS = MONTH_HOURS * 3600
GB = 2**30


@dataclass(frozen=True)
class Price:
    usd: float
    unit: str
    source: str
    as_of: str
    note: str = ""


_KINESIS = "https://aws.amazon.com/kinesis/data-streams/pricing/"
_DYNAMODB = "https://aws.amazon.com/dynamodb/pricing/"
_LAMBDA = "https://aws.amazon.com/lambda/pricing/"
_FIREHOSE = "https://aws.amazon.com/firehose/pricing/"
_S3 = "https://aws.amazon.com/s3/pricing/"
_CLOUDWATCH = "https://aws.amazon.com/cloudwatch/pricing/"
_SQS = "https://aws.amazon.com/sqs/pricing/"
_EVENTBRIDGE = "https://aws.amazon.com/eventbridge/pricing/"
_MSK = "https://aws.amazon.com/msk/pricing/"
_XRAY = "https://aws.amazon.com/xray/pricing/"
_KMS = "https://aws.amazon.com/kms/pricing/"
_GLUE = "https://aws.amazon.com/glue/pricing/"
_PRIVATELINK = "https://aws.amazon.com/privatelink/pricing/"
#: The date every price is taken as of (ISO 8601).
AS_OF = "2025-06-01"
_AS_OF = AS_OF

#: US East (N. Virginia).
US_EAST_1: dict[str, Price] = {
    # Kinesis Data Streams
    "kinesis.shard_hour": Price(0.015, "shard-hour", _KINESIS, _AS_OF, "provisioned mode"),
    "kinesis.extended_retention": Price(
        0.020, "shard-hour", _KINESIS, _AS_OF, "provisioned, retention over 24 h and up to 7 days"
    ),
    "kinesis.put_payload_units": Price(0.014, "million 25 KB units", _KINESIS, _AS_OF, "provisioned mode"),
    "kinesis.on_demand_stream_hour": Price(0.04, "stream-hour", _KINESIS, _AS_OF),
    "kinesis.on_demand_data_in": Price(0.08, "GB", _KINESIS, _AS_OF, "each record rounded up to 1 KB"),
    "kinesis.on_demand_data_out": Price(0.04, "GB", _KINESIS, _AS_OF, "every reader's retrievals"),
    "kinesis.on_demand_extended_retention": Price(0.10, "GB-month", _KINESIS, _AS_OF, "over 24 h and up to 7 days"),
    # DynamoDB (Standard table class)
    "dynamodb.write_request_units": Price(
        0.625, "million WRU", _DYNAMODB, _AS_OF, "on-demand, after the 1 Nov 2024 price cut"
    ),
    "dynamodb.read_request_units": Price(0.125, "million RRU", _DYNAMODB, _AS_OF, "on-demand"),
    "dynamodb.wcu_hour": Price(0.00065, "WCU-hour", _DYNAMODB, _AS_OF, "provisioned"),
    "dynamodb.rcu_hour": Price(0.00013, "RCU-hour", _DYNAMODB, _AS_OF, "provisioned"),
    "dynamodb.storage": Price(0.25, "GB-month", _DYNAMODB, _AS_OF, "first 25 GB free, not counted here"),
    "dynamodb.pitr": Price(0.20, "GB-month", _DYNAMODB, _AS_OF, "continuous backups (point-in-time recovery)"),
    # Lambda (arm64, the processors' architecture)
    "lambda.requests": Price(0.20, "million requests", _LAMBDA, _AS_OF),
    "lambda.arm64_duration": Price(0.0000133334, "GB-second", _LAMBDA, _AS_OF, "first tier (6 billion GB-s)"),
    # Firehose
    "firehose.ingestion": Price(
        0.029, "GB", _FIREHOSE, _AS_OF, "Direct PUT and Kinesis source, first 500 TB; each record rounded up to 5 KB"
    ),
    "firehose.msk_ingestion": Price(
        0.055, "GB", _FIREHOSE, _AS_OF, "Amazon MSK source, no rounding (the least certain price here: verify)"
    ),
    # S3
    "s3.standard": Price(0.023, "GB-month", _S3, _AS_OF, "first 50 TB"),
    "s3.standard_ia": Price(0.0125, "GB-month", _S3, _AS_OF, "128 KB minimum object size, 30-day minimum"),
    "s3.glacier_ir": Price(0.004, "GB-month", _S3, _AS_OF, "Glacier Instant Retrieval, 90-day minimum"),
    "s3.deep_archive": Price(0.00099, "GB-month", _S3, _AS_OF, "Glacier Deep Archive, 180-day minimum"),
    "s3.put_requests": Price(0.005, "thousand requests", _S3, _AS_OF, "PUT, COPY, POST, LIST"),
    "s3.transition_ia": Price(0.01, "thousand transitions", _S3, _AS_OF, "lifecycle transition to Standard-IA"),
    "s3.transition_glacier_ir": Price(0.02, "thousand transitions", _S3, _AS_OF, "to Glacier Instant Retrieval"),
    "s3.transition_deep_archive": Price(0.05, "thousand transitions", _S3, _AS_OF, "to Glacier Deep Archive"),
    # CloudWatch, X-Ray, KMS, Glue
    "logs.ingestion": Price(0.50, "GB", _CLOUDWATCH, _AS_OF, "Standard log class, first tier"),
    "logs.storage": Price(0.03, "GB-month", _CLOUDWATCH, _AS_OF, "archived (compressed) bytes"),
    "cloudwatch.metrics": Price(0.30, "metric-month", _CLOUDWATCH, _AS_OF, "custom metrics, first 10,000"),
    "cloudwatch.alarms": Price(0.10, "alarm-month", _CLOUDWATCH, _AS_OF, "standard resolution, one metric"),
    "cloudwatch.dashboards": Price(3.00, "dashboard-month", _CLOUDWATCH, _AS_OF),
    "xray.traces": Price(5.00, "million traces recorded", "https://aws.amazon.com/xray/pricing/", _AS_OF),
    "kms.keys": Price(1.00, "key-month", "https://aws.amazon.com/kms/pricing/", _AS_OF, "customer managed"),
    "kms.requests": Price(0.03, "10,000 requests", "https://aws.amazon.com/kms/pricing/", _AS_OF),
    "glue.dpu_hour": Price(
        0.44, "DPU-hour", "https://aws.amazon.com/glue/pricing/", _AS_OF, "Spark jobs, 1 min minimum"
    ),
    # the peers' services
    "sqs.requests": Price(0.40, "million requests", _SQS, _AS_OF, "standard queues; each 64 KB of a request is one"),
    "eventbridge.custom_events": Price(1.00, "million events", _EVENTBRIDGE, _AS_OF, "each 64 KB is one event"),
    "eventbridge.archive_processed": Price(0.10, "GB", _EVENTBRIDGE, _AS_OF, "events archived"),
    "eventbridge.archive_storage": Price(0.023, "GB-month", _EVENTBRIDGE, _AS_OF),
    "msk_serverless.cluster_hour": Price(0.75, "cluster-hour", _MSK, _AS_OF),
    "msk_serverless.partition_hour": Price(0.0015, "partition-hour", _MSK, _AS_OF),
    "msk_serverless.storage": Price(0.10, "GB-month", _MSK, _AS_OF),
    "msk_serverless.data_in": Price(0.10, "GB", _MSK, _AS_OF),
    "msk_serverless.data_out": Price(0.05, "GB", _MSK, _AS_OF),
    "vpc.interface_endpoint_hour": Price(
        0.01, "endpoint-AZ-hour", "https://aws.amazon.com/privatelink/pricing/", _AS_OF, "interface endpoints"
    ),
}


#: Europe (London): the same items, the same pages (their "Europe (London)" figures), the same date.
EU_WEST_2: dict[str, Price] = {
    # Kinesis Data Streams
    "kinesis.shard_hour": Price(0.0176, "shard-hour", _KINESIS, _AS_OF, "provisioned mode"),
    "kinesis.extended_retention": Price(
        0.0235, "shard-hour", _KINESIS, _AS_OF, "provisioned, retention over 24 h and up to 7 days"
    ),
    "kinesis.put_payload_units": Price(0.0165, "million 25 KB units", _KINESIS, _AS_OF, "provisioned mode"),
    "kinesis.on_demand_stream_hour": Price(0.047, "stream-hour", _KINESIS, _AS_OF),
    "kinesis.on_demand_data_in": Price(0.094, "GB", _KINESIS, _AS_OF, "each record rounded up to 1 KB"),
    "kinesis.on_demand_data_out": Price(0.047, "GB", _KINESIS, _AS_OF, "every reader's retrievals"),
    "kinesis.on_demand_extended_retention": Price(0.118, "GB-month", _KINESIS, _AS_OF, "over 24 h and up to 7 days"),
    # DynamoDB (Standard table class)
    "dynamodb.write_request_units": Price(
        0.7425, "million WRU", _DYNAMODB, _AS_OF, "on-demand, after the 1 Nov 2024 price cut"
    ),
    "dynamodb.read_request_units": Price(0.1485, "million RRU", _DYNAMODB, _AS_OF, "on-demand"),
    "dynamodb.wcu_hour": Price(0.000772, "WCU-hour", _DYNAMODB, _AS_OF, "provisioned"),
    "dynamodb.rcu_hour": Price(0.0001544, "RCU-hour", _DYNAMODB, _AS_OF, "provisioned"),
    "dynamodb.storage": Price(0.2575, "GB-month", _DYNAMODB, _AS_OF, "first 25 GB free, not counted here"),
    "dynamodb.pitr": Price(0.206, "GB-month", _DYNAMODB, _AS_OF, "continuous backups (point-in-time recovery)"),
    # Lambda (arm64): London's request and duration prices are N. Virginia's
    "lambda.requests": Price(0.20, "million requests", _LAMBDA, _AS_OF),
    "lambda.arm64_duration": Price(0.0000133334, "GB-second", _LAMBDA, _AS_OF, "first tier (6 billion GB-s)"),
    # Firehose
    "firehose.ingestion": Price(
        0.031, "GB", _FIREHOSE, _AS_OF, "Direct PUT and Kinesis source, first 500 TB; each record rounded up to 5 KB"
    ),
    "firehose.msk_ingestion": Price(
        0.059, "GB", _FIREHOSE, _AS_OF, "Amazon MSK source, no rounding (the least certain price here: verify)"
    ),
    # S3
    "s3.standard": Price(0.024, "GB-month", _S3, _AS_OF, "first 50 TB"),
    "s3.standard_ia": Price(0.0131, "GB-month", _S3, _AS_OF, "128 KB minimum object size, 30-day minimum"),
    "s3.glacier_ir": Price(0.005, "GB-month", _S3, _AS_OF, "Glacier Instant Retrieval, 90-day minimum"),
    "s3.deep_archive": Price(0.0018, "GB-month", _S3, _AS_OF, "Glacier Deep Archive, 180-day minimum"),
    "s3.put_requests": Price(0.0053, "thousand requests", _S3, _AS_OF, "PUT, COPY, POST, LIST"),
    "s3.transition_ia": Price(0.01, "thousand transitions", _S3, _AS_OF, "lifecycle transition to Standard-IA"),
    "s3.transition_glacier_ir": Price(0.02, "thousand transitions", _S3, _AS_OF, "to Glacier Instant Retrieval"),
    "s3.transition_deep_archive": Price(0.054, "thousand transitions", _S3, _AS_OF, "to Glacier Deep Archive"),
    # CloudWatch, X-Ray, KMS, Glue
    "logs.ingestion": Price(0.5985, "GB", _CLOUDWATCH, _AS_OF, "Standard log class, first tier"),
    "logs.storage": Price(0.0315, "GB-month", _CLOUDWATCH, _AS_OF, "archived (compressed) bytes"),
    "cloudwatch.metrics": Price(0.30, "metric-month", _CLOUDWATCH, _AS_OF, "custom metrics, first 10,000"),
    "cloudwatch.alarms": Price(0.10, "alarm-month", _CLOUDWATCH, _AS_OF, "standard resolution, one metric"),
    "cloudwatch.dashboards": Price(3.00, "dashboard-month", _CLOUDWATCH, _AS_OF),
    "xray.traces": Price(5.00, "million traces recorded", _XRAY, _AS_OF),
    "kms.keys": Price(1.00, "key-month", _KMS, _AS_OF, "customer managed"),
    "kms.requests": Price(0.03, "10,000 requests", _KMS, _AS_OF),
    "glue.dpu_hour": Price(0.47, "DPU-hour", _GLUE, _AS_OF, "Spark jobs, 1 min minimum"),
    # the peers' services
    "sqs.requests": Price(0.40, "million requests", _SQS, _AS_OF, "standard queues; each 64 KB of a request is one"),
    "eventbridge.custom_events": Price(1.00, "million events", _EVENTBRIDGE, _AS_OF, "each 64 KB is one event"),
    "eventbridge.archive_processed": Price(0.10, "GB", _EVENTBRIDGE, _AS_OF, "events archived"),
    "eventbridge.archive_storage": Price(0.024, "GB-month", _EVENTBRIDGE, _AS_OF),
    "msk_serverless.cluster_hour": Price(0.84, "cluster-hour", _MSK, _AS_OF),
    "msk_serverless.partition_hour": Price(0.0017, "partition-hour", _MSK, _AS_OF),
    "msk_serverless.storage": Price(0.11, "GB-month", _MSK, _AS_OF),
    "msk_serverless.data_in": Price(0.11, "GB", _MSK, _AS_OF),
    "msk_serverless.data_out": Price(0.055, "GB", _MSK, _AS_OF),
    "vpc.interface_endpoint_hour": Price(0.011, "endpoint-AZ-hour", _PRIVATELINK, _AS_OF, "interface endpoints"),
}
#: Price tables by region code.
REGIONS: Mapping[str, Mapping[str, Price]] = {"us-east-1": US_EAST_1, "eu-west-2": EU_WEST_2}
#: The table :func:`usd` reads outside :func:`priced_in` (a bill always sets its own).
DEFAULT_REGION = "us-east-1"
#: Backwards-compatible name of the default table.
PRICES = US_EAST_1
_REGION: ContextVar[str] = ContextVar("rdss_cost_region", default=DEFAULT_REGION)


class UnknownRegion(ValueError):
    """A region the model has no price table for."""

    def __init__(self, region: str | None) -> None:
        super().__init__(
            f"no price table for region {region!r}: the cost model prices {', '.join(sorted(REGIONS))} "
            "(add a table to rdss/cost/prices.py, or price with --region)"
        )


def table(region: str | None) -> Mapping[str, Price]:
    """The price table of ``region``; :class:`UnknownRegion` when there is none."""
    if region is None or region not in REGIONS:
        raise UnknownRegion(region)
    return REGIONS[region]


@contextlib.contextmanager
def priced_in(region: str | None) -> Iterator[str]:
    """Price everything in the block at ``region``'s table."""
    table(region)
    assert region is not None
    token = _REGION.set(region)
    try:
        yield region
    finally:
        _REGION.reset(token)


def usd(name: str) -> float:
    """The price ``name`` in US dollars per its unit, in the region being priced."""
    return REGIONS[_REGION.get()][name].usd
