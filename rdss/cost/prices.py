"""The prices the cost model uses: AWS list prices per region, a row an item, a column a region.

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


@dataclass(frozen=True)
class _Item:
    """One priced item: its unit, its pricing page, and its list price in each region of
    :data:`_REGION_CODES`, in that order (the page's region selector gives each)."""

    unit: str
    source: str
    usd: tuple[float, ...]
    note: str = ""


#: The regions priced: the columns of :data:`_ITEMS`.
_REGION_CODES = ("us-east-1", "eu-west-2")
#: Every item the model prices, once: its unit, page and note are the same in every region, only
#: the figure differs (so that a region cannot lack an item, or name it otherwise).
_ITEMS: dict[str, _Item] = {
    # Kinesis Data Streams
    "kinesis.shard_hour": _Item("shard-hour", _KINESIS, (0.015, 0.0176), "provisioned mode"),
    "kinesis.extended_retention": _Item(
        "shard-hour", _KINESIS, (0.02, 0.0235), "provisioned, retention over 24 h and up to 7 days"
    ),
    "kinesis.put_payload_units": _Item("million 25 KB units", _KINESIS, (0.014, 0.0165), "provisioned mode"),
    "kinesis.on_demand_stream_hour": _Item("stream-hour", _KINESIS, (0.04, 0.047)),
    "kinesis.on_demand_data_in": _Item("GB", _KINESIS, (0.08, 0.094), "each record rounded up to 1 KB"),
    "kinesis.on_demand_data_out": _Item("GB", _KINESIS, (0.04, 0.047), "every reader's retrievals"),
    "kinesis.on_demand_extended_retention": _Item("GB-month", _KINESIS, (0.1, 0.118), "over 24 h and up to 7 days"),
    # DynamoDB (Standard table class)
    "dynamodb.write_request_units": _Item(
        "million WRU", _DYNAMODB, (0.625, 0.7425), "on-demand, after the 1 Nov 2024 price cut"
    ),
    "dynamodb.read_request_units": _Item("million RRU", _DYNAMODB, (0.125, 0.1485), "on-demand"),
    "dynamodb.wcu_hour": _Item("WCU-hour", _DYNAMODB, (0.00065, 0.000772), "provisioned"),
    "dynamodb.rcu_hour": _Item("RCU-hour", _DYNAMODB, (0.00013, 0.0001544), "provisioned"),
    "dynamodb.storage": _Item("GB-month", _DYNAMODB, (0.25, 0.2575), "first 25 GB free, not counted here"),
    "dynamodb.pitr": _Item("GB-month", _DYNAMODB, (0.2, 0.206), "continuous backups (point-in-time recovery)"),
    # Lambda (arm64, the processors' architecture): London's request and duration prices are N. Virginia's
    "lambda.requests": _Item("million requests", _LAMBDA, (0.2, 0.2)),
    "lambda.arm64_duration": _Item("GB-second", _LAMBDA, (0.0000133334, 0.0000133334), "first tier (6 billion GB-s)"),
    # Firehose
    "firehose.ingestion": _Item(
        "GB", _FIREHOSE, (0.029, 0.031), "Direct PUT and Kinesis source, first 500 TB; each record rounded up to 5 KB"
    ),
    "firehose.msk_ingestion": _Item(
        "GB", _FIREHOSE, (0.055, 0.059), "Amazon MSK source, no rounding (the least certain price here: verify)"
    ),
    # S3
    "s3.standard": _Item("GB-month", _S3, (0.023, 0.024), "first 50 TB"),
    "s3.standard_ia": _Item("GB-month", _S3, (0.0125, 0.0131), "128 KB minimum object size, 30-day minimum"),
    "s3.glacier_ir": _Item("GB-month", _S3, (0.004, 0.005), "Glacier Instant Retrieval, 90-day minimum"),
    "s3.deep_archive": _Item("GB-month", _S3, (0.00099, 0.0018), "Glacier Deep Archive, 180-day minimum"),
    "s3.put_requests": _Item("thousand requests", _S3, (0.005, 0.0053), "PUT, COPY, POST, LIST"),
    "s3.transition_ia": _Item("thousand transitions", _S3, (0.01, 0.01), "lifecycle transition to Standard-IA"),
    "s3.transition_glacier_ir": _Item("thousand transitions", _S3, (0.02, 0.02), "to Glacier Instant Retrieval"),
    "s3.transition_deep_archive": _Item("thousand transitions", _S3, (0.05, 0.054), "to Glacier Deep Archive"),
    # CloudWatch, X-Ray, KMS, Glue
    "logs.ingestion": _Item("GB", _CLOUDWATCH, (0.5, 0.5985), "Standard log class, first tier"),
    "logs.storage": _Item("GB-month", _CLOUDWATCH, (0.03, 0.0315), "archived (compressed) bytes"),
    "cloudwatch.metrics": _Item("metric-month", _CLOUDWATCH, (0.3, 0.3), "custom metrics, first 10,000"),
    "cloudwatch.alarms": _Item("alarm-month", _CLOUDWATCH, (0.1, 0.1), "standard resolution, one metric"),
    "cloudwatch.dashboards": _Item("dashboard-month", _CLOUDWATCH, (3.0, 3.0)),
    "xray.traces": _Item("million traces recorded", _XRAY, (5.0, 5.0)),
    "kms.keys": _Item("key-month", _KMS, (1.0, 1.0), "customer managed"),
    "kms.requests": _Item("10,000 requests", _KMS, (0.03, 0.03)),
    "glue.dpu_hour": _Item("DPU-hour", _GLUE, (0.44, 0.47), "Spark jobs, 1 min minimum"),
    # the peers' services
    "sqs.requests": _Item("million requests", _SQS, (0.4, 0.4), "standard queues; each 64 KB of a request is one"),
    "eventbridge.custom_events": _Item("million events", _EVENTBRIDGE, (1.0, 1.0), "each 64 KB is one event"),
    "eventbridge.archive_processed": _Item("GB", _EVENTBRIDGE, (0.1, 0.1), "events archived"),
    "eventbridge.archive_storage": _Item("GB-month", _EVENTBRIDGE, (0.023, 0.024)),
    "msk_serverless.cluster_hour": _Item("cluster-hour", _MSK, (0.75, 0.84)),
    "msk_serverless.partition_hour": _Item("partition-hour", _MSK, (0.0015, 0.0017)),
    "msk_serverless.storage": _Item("GB-month", _MSK, (0.1, 0.11)),
    "msk_serverless.data_in": _Item("GB", _MSK, (0.1, 0.11)),
    "msk_serverless.data_out": _Item("GB", _MSK, (0.05, 0.055)),
    "vpc.interface_endpoint_hour": _Item("endpoint-AZ-hour", _PRIVATELINK, (0.01, 0.011), "interface endpoints"),
}


def _prices(region: str) -> dict[str, Price]:
    """The price table of one of :data:`_REGION_CODES`."""
    column = _REGION_CODES.index(region)
    return {name: Price(item.usd[column], item.unit, item.source, AS_OF, item.note) for name, item in _ITEMS.items()}


#: US East (N. Virginia).
US_EAST_1 = _prices("us-east-1")
#: Europe (London): the same items, the same pages (their "Europe (London)" figures), the same date.
EU_WEST_2 = _prices("eu-west-2")
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
