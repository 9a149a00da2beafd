"""``rdss bench cost --peer``: what a user would build instead, priced by the same rules.

Each peer does the project's job - validate every message, de-duplicate it, route it to its
Data Type Channel, move bad ones aside, keep an audit archive - with the same measured figures
(message sizes, the classifier's CPU, log bytes per invocation), the same environment settings
(memory, log level and retention, bucket lifecycles, Glue) and the same price table:

- ``sqs-powertools``: producers send to an SQS queue in batches of 10; a Lambda function, mapped
  with the environment's batch size and batching window (as the project's broker is), validates,
  de-duplicates each record with Powertools' idempotency utility (a DynamoDB table in the
  claims table's capacity mode - provisioned where prod's is - at two write units a record: a
  conditional put, then an update; kept as long as the project's claims) and sends it to its
  type's queue in batches; one consumer per queue receives and
  deletes in tens; the function puts each record on a Firehose Direct PUT stream (billed in 5 KB
  steps) that writes the gzip audit archive.
- ``eventbridge``: producers put events on a custom bus with an archive (the audit archive:
  EventBridge's own, replayable, not in S3); a rule delivers each to an SQS queue read by the
  same validating, de-duplicating function, which puts the valid ones back as routed events
  (rules send them to each type's queue) and the invalid ones to an invalid queue.
- ``msk-serverless``: one MSK Serverless cluster, a topic per channel (as many partitions as the
  project has shards x parallelisation), the same function under Lambda's MSK event source
  (in the cluster's VPC: interface endpoints for Lambda and STS in two zones), producing routed
  records back to Kafka; Firehose (MSK source) writes the audit archive.

Where a peer's archive is not in S3 (EventBridge), it has no curated tables or Glue jobs either:
left out, which only makes that peer cheaper.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal

from rdss.cost.estimate import archive_items, call_seconds, curated_items, glue_items, table_units
from rdss.cost.prices import GB, MONTH_HOURS, priced_in, usd
from rdss.cost.rules import (
    ITEM_OVERHEAD_BYTES,
    Bill,
    Function,
    destinations,
    lambda_items,
    log_items,
    per_month,
    s3_storage,
)
from rdss.deployment.capacity import MEASURED, REJECTED_SHARE, ChannelLoad, Figures, Traffic, records_per_invocation
from rdss.deployment.settings import EnvironmentConfig
from rdss.repository.entries import RETENTION_SECONDS

Peer = Literal["sqs-powertools", "eventbridge", "msk-serverless"]
PEERS: tuple[Peer, ...] = ("sqs-powertools", "eventbridge", "msk-serverless")
#: SQS: at most 10 messages a request, each 64 KB of a request billed as one.
SQS_BATCH = 10
SQS_CHUNK = 64 * 1024
#: Lambda polls a queue with five long-polling pollers (20 s each when idle).
SQS_POLLERS = 5
SQS_IDLE_REQUESTS_PER_SECOND = SQS_POLLERS / 20
#: Firehose PutRecordBatch: at most 500 records a call.
FIREHOSE_BATCH = 500
#: Powertools' idempotency: a conditional put (in progress) and an update (completed) per record.
IDEMPOTENCY_CALLS = 2
IDEMPOTENCY_WRITE_UNITS = 2
#: EventBridge: 10 entries per PutEvents call, each 64 KB of an event billed as one.
EVENTS_PER_CALL = 10
EVENT_CHUNK = 64 * 1024
#: MSK Serverless's Lambda event source reaches Lambda and STS from the cluster's VPC.
VPC_ENDPOINTS = 2
VPC_ZONES = 2


def peer(
    name: Peer,
    settings: EnvironmentConfig,
    rate_per_second: float,
    *,
    figures: Figures = MEASURED,
    rejected_share: float = REJECTED_SHARE,
    region: str | None = None,
) -> Bill:
    """The bill of peer ``name`` for ``settings`` at ``rate_per_second`` (``rejected_share`` of
    the messages invalid), at ``region``'s prices (default: the deployment's own)."""
    builders: dict[str, Callable[[Bill, EnvironmentConfig, dict[str, ChannelLoad], Figures], None]] = {
        "sqs-powertools": _sqs_powertools,
        "eventbridge": _eventbridge,
        "msk-serverless": _msk_serverless,
    }
    if name not in builders:
        raise ValueError(f"unknown peer {name!r}; choose one of {', '.join(PEERS)}")
    loads = Traffic(rate_per_second, figures, rejected_share, consumers=settings.consumer_groups()).loads()
    with priced_in(region or settings.region) as priced:
        bill = Bill(settings.name, rate_per_second, region=priced)
        builders[name](bill, settings, loads, figures)
    return bill


def _function(
    settings: EnvironmentConfig, rate: float, n: float, loads: dict[str, ChannelLoad], figures: Figures, sends: float
) -> Function:
    """The validating, de-duplicating function: the broker's CPU, Powertools' two calls per
    record, ``sends`` calls per invocation to pass records on."""
    if not rate:
        return Function(0.0, 0.0, 0.0, settings.function("broker").memory_mb, 0.0)
    debug = settings.function("broker").log_level.upper() == "DEBUG"
    log = figures.log_bytes_per_invocation + (n * figures.debug_log_bytes_per_message if debug else 0.0)
    cpu = figures.broker_cpu_per_invocation + n * figures.broker_cpu_per_message
    return Function(rate / n, cpu, IDEMPOTENCY_CALLS * n + sends, settings.function("broker").memory_mb, log)


def _idempotency(bill: Bill, settings: EnvironmentConfig, rate: float, figures: Figures) -> None:
    """Powertools' idempotency table, in the claims table's capacity mode: two write units a
    record (a conditional put, then an update; records under 1 KB), never read on the happy path."""
    table_units(bill, settings, "idempotency", "", rate * IDEMPOTENCY_WRITE_UNITS, None)
    stored = rate * RETENTION_SECONDS * (figures.claim_item_bytes + ITEM_OVERHEAD_BYTES) / GB
    bill.add(
        "DynamoDB storage and backups",
        stored * (usd("dynamodb.storage") + usd("dynamodb.pitr")),
        f"{stored:.4g} GB of idempotency records x (${usd('dynamodb.storage')} + ${usd('dynamodb.pitr')} PITR)",
    )


def _router_items(bill: Bill, settings: EnvironmentConfig, function: Function, rate: float, figures: Figures) -> None:
    """What every peer runs alike: its one validating, de-duplicating function (invocations,
    Powertools' idempotency table, logs), and the function's metrics and alarms."""
    _idempotency(bill, settings, rate, figures)
    lambda_items(
        bill, {"router": function}, traced=settings.tracing == "active", call_seconds=call_seconds(bill, figures)
    )
    log_bytes = function.invocations_per_second * function.log_bytes
    log_items(bill, log_bytes, log_days=settings.retention.log_days, compression=figures.log_compression)
    _monitoring(bill, 1, 6, figures)


def _sqs_batch_requests(records_per_second: float, record_bytes: float, batch: float) -> float:
    """Requests to send (or receive) records in batches: one per batch per 64 KB of it."""
    if not records_per_second:
        return 0.0
    return records_per_second / batch * math.ceil(batch * record_bytes / SQS_CHUNK)


def _sqs_consumers(loads: dict[str, ChannelLoad]) -> float:
    """Routed and invalid queues: their consumers receive and delete in tens, and poll when idle."""
    requests = 0.0
    for name, load in loads.items():
        if name in ("input", "sequence"):  # a peer has no sequence channel
            continue
        batch = min(SQS_BATCH, max(1.0, load.records_per_second))
        requests += load.readers * (2 * _sqs_batch_requests(load.records_per_second, load.record_bytes, batch) + 0.05)
    return requests


def _sqs_requests(bill: Bill, per_second: float, explained: str) -> None:
    """The peer's SQS requests, ``per_second`` (``explained``: what they add up from), priced a month."""
    bill.add(
        "SQS requests",
        per_month(per_second) / 1e6 * usd("sqs.requests"),
        f"{explained} x month / 1e6 x ${usd('sqs.requests')}",
    )


def _monitoring(bill: Bill, functions: int, alarms: int, figures: Figures) -> None:
    bill.add(
        "CloudWatch metrics, alarms and dashboard",
        (figures.metric_series + functions) * usd("cloudwatch.metrics")
        + alarms * usd("cloudwatch.alarms")
        + usd("cloudwatch.dashboards"),
    )


def _sqs_batch(rate: float, settings: EnvironmentConfig) -> float:
    """Messages per invocation of a queue's event source mapping, with the environment's batch
    size and batching window (the broker's mapping's): what arrives for each of Lambda's pollers
    within the window (a second when there is none: a long poll returns what is there), at most
    the batch size; at least one."""
    if not rate:
        return 0.0
    events = settings.event_source
    window = max(1.0, float(events.max_batching_window_seconds))
    return min(float(events.batch_size), max(1.0, rate / SQS_POLLERS * window))


def _sqs_receives(rate: float, n: float) -> float:
    """ReceiveMessage (or DeleteMessageBatch) calls a second: at most 10 messages each."""
    return rate / min(float(SQS_BATCH), n) if n else 0.0


def _queue_fed_function(
    settings: EnvironmentConfig, rate: float, figures: Figures, loads: dict[str, ChannelLoad], sends: float
) -> tuple[Function, float]:
    """The function reading the input queue; returns it and its SQS requests per second."""
    n = _sqs_batch(rate, settings)
    function = _function(settings, rate, n, loads, figures, sends)
    receive = _sqs_receives(rate, n) + SQS_IDLE_REQUESTS_PER_SECOND
    return function, receive + _sqs_receives(rate, n)  # receives and batch deletes


def _sqs_powertools(bill: Bill, settings: EnvironmentConfig, loads: dict[str, ChannelLoad], figures: Figures) -> None:
    rate = loads["input"].records_per_second
    n = _sqs_batch(rate, settings)
    reached = destinations(loads, rate, n, per_call=SQS_BATCH)
    firehose = math.ceil(n / FIREHOSE_BATCH) if n else 0  # PutRecordBatch: 500 records a call
    function, polling = _queue_fed_function(settings, rate, figures, loads, reached + firehose)
    produce = _sqs_batch_requests(rate, figures.input_bytes, SQS_BATCH)
    route = (rate / n) * reached if n else 0.0
    consume = _sqs_consumers(loads)
    requests = produce + polling + route + consume
    _sqs_requests(
        bill,
        requests,
        f"({produce:.4g} sends + {polling:.4g} receives, deletes and idle polls ({n:.3g} messages an invocation)"
        f" + {route:.4g} routed sends + {consume:.4g} consumers') /s",
    )
    _router_items(bill, settings, function, rate, figures)
    archived = {c: loads[c] for c in ("input", "invalid", "error")}
    archive_items(bill, settings, archived, {}, figures, "per-record")
    curated_items(bill, settings, rate, figures)
    bill.add("KMS keys and requests", usd("kms.keys"), f"one key x ${usd('kms.keys')}")
    glue_items(bill, settings, rate)


def _eventbridge(bill: Bill, settings: EnvironmentConfig, loads: dict[str, ChannelLoad], figures: Figures) -> None:
    rate = loads["input"].records_per_second
    chunks = math.ceil(figures.input_bytes / EVENT_CHUNK)
    valid = rate - loads["invalid"].records_per_second
    bill.add(
        "EventBridge events",
        per_month(rate * chunks + valid * chunks) / 1e6 * usd("eventbridge.custom_events"),
        f"({rate:.4g} in + {valid:.4g} routed) events/s x {chunks} 64 KB chunks x month / 1e6"
        f" x ${usd('eventbridge.custom_events')}",
    )
    archived_gb = per_month(rate * figures.input_bytes) / GB
    bill.add(
        "EventBridge archive (processed)",
        archived_gb * usd("eventbridge.archive_processed"),
        f"{archived_gb:.4g} GB a month x ${usd('eventbridge.archive_processed')}",
    )
    lifecycle = settings.lifecycle("audit")
    held = min(12.0, lifecycle.expire_after_days / (365.25 / 12)) if lifecycle.expire_after_days else 12.0
    bill.add(
        "EventBridge archive (storage)",
        archived_gb * held * usd("eventbridge.archive_storage"),
        f"{archived_gb:.4g} GB a month x {held:.3g} months held x ${usd('eventbridge.archive_storage')}",
    )
    n = _sqs_batch(rate, settings)
    puts = math.ceil(n / EVENTS_PER_CALL) if n else 0
    function, polling = _queue_fed_function(settings, rate, figures, loads, puts)
    # EventBridge sends each event to its target queue one message at a time
    delivered = rate + valid
    requests = delivered + polling + _sqs_consumers(loads)
    _sqs_requests(
        bill,
        requests,
        f"({delivered:.4g} deliveries + {polling:.4g} receives and deletes + consumers') = {requests:.4g}/s",
    )
    _router_items(bill, settings, function, rate, figures)
    errors = {c: loads[c] for c in ("invalid", "error")}
    archive_items(bill, settings, errors, {}, figures, "per-record")
    bill.add("KMS keys and requests", usd("kms.keys"), f"one key x ${usd('kms.keys')}")


def _msk_serverless(bill: Bill, settings: EnvironmentConfig, loads: dict[str, ChannelLoad], figures: Figures) -> None:
    rate = loads["input"].records_per_second
    plan = settings.capacity_at(rate)
    partitions = {c: max(1, plan.shards[c] * settings.event_source.parallelization_factor) for c in loads}
    bill.add("MSK Serverless cluster-hours", MONTH_HOURS * usd("msk_serverless.cluster_hour"))
    bill.add(
        "MSK Serverless partition-hours", sum(partitions.values()) * MONTH_HOURS * usd("msk_serverless.partition_hour")
    )
    written = sum(load.bytes_per_second for load in loads.values())
    # readers: the project's, the input's second being Firehose (the archive)
    read = sum(load.readers * load.bytes_per_second for load in loads.values())
    bill.add("MSK Serverless data in", per_month(written) / GB * usd("msk_serverless.data_in"))
    bill.add("MSK Serverless data out", per_month(read) / GB * usd("msk_serverless.data_out"))
    held = written * settings.stream_retention_hours * 3600 / GB
    bill.add("MSK Serverless storage", held * usd("msk_serverless.storage"))
    n = records_per_invocation(
        rate, partitions["input"], settings.event_source.batch_size, settings.event_source.max_batching_window_seconds
    )
    function = _function(settings, rate, n, loads, figures, destinations(loads, rate, n))
    _router_items(bill, settings, function, rate, figures)
    bill.add("VPC interface endpoints", VPC_ENDPOINTS * VPC_ZONES * MONTH_HOURS * usd("vpc.interface_endpoint_hour"))
    archived = sum(loads[c].bytes_per_second for c in ("input", "invalid", "error"))
    bill.add("Firehose ingestion (MSK source)", per_month(archived) / GB * usd("firehose.msk_ingestion"))
    ratio = figures.gzip_bytes_per_entry(1000) / figures.archive_entry_bytes
    monthly = per_month(loads["input"].bytes_per_second) * ratio
    storage, transitions = s3_storage(
        monthly, per_month(1 / settings.archive.buffer_seconds), settings.lifecycle("audit")
    )
    bill.add("S3 archive storage (audit, errors)", storage)
    bill.add(
        "S3 requests and lifecycle transitions",
        transitions + per_month(3 / settings.archive.buffer_seconds) / 1000 * usd("s3.put_requests"),
    )
    curated_items(bill, settings, rate, figures)
    glue_items(bill, settings, rate)
