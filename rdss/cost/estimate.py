"""``rdss bench cost``: what a deployment costs a month at a steady rate, item by item.

The bill is computed from the environment's ``cdk.json`` settings (:mod:`rdss.deployment.settings`, as the CDK
app reads them: stream and table capacity, retention, batch size, memory, log level, lifecycle rules, Glue
workers), the per-message figures the project measures (:mod:`rdss.deployment.capacity`,
``--measure``), the list prices of :mod:`rdss.cost.prices` and the rules of
:mod:`rdss.cost.rules`. Capacity is sized for the modelled rate by the same rules the CDK
app uses (:func:`rdss.deployment.capacity.plan`), as if the environment were deployed with
``traffic.rate_per_second`` set to it; an explicit shard count too small for the rate is raised
to what the rate needs, with a note.

The archive is priced as the archiver builds it (``archive="batched"``): an archiver function
reads input, invalid and error and writes each invocation's records to Firehose as one gzip
member of framed entries, so Firehose bills compressed bytes. ``archive="per-record"`` prices
the design before it, Firehose reading each stream and billing every record in 5 KB steps.
"""

from __future__ import annotations

import math
from typing import Literal

from rdss.cost.prices import GB, MONTH_HOURS, priced_in, usd
from rdss.cost.rules import (
    CALL_SECONDS,
    ITEM_OVERHEAD_BYTES,
    Bill,
    Function,
    batched_calls,
    destinations,
    firehose_billed_bytes,
    firehose_objects,
    lambda_items,
    log_items,
    per_month,
    s3_storage,
    shard_hours,
)
from rdss.deployment.capacity import (
    MEASURED,
    REJECTED_SHARE,
    ChannelLoad,
    Figures,
    Traffic,
    provisioned_units,
    records_per_invocation,
    shards_needed,
)
from rdss.deployment.settings import EnvironmentConfig
from rdss.deployment.topology import RDSS, Topology
from rdss.repository.dynamodb import CLAIM_CONCURRENCY
from rdss.repository.entries import RETENTION_SECONDS

Archive = Literal["batched", "per-record"]
#: Kinesis retention included in the shard price; extended retention goes to 168 hours.
BASE_RETENTION_HOURS = 24
EXTENDED_RETENTION_HOURS = 168
#: The sweep runs every 5 minutes; Glue runs the compaction and then the report.
SWEEPS_PER_SECOND = 1 / 300
GLUE_JOBS_PER_RUN = 2
#: A Glue job's start-up, and the records a G.1X worker compacts per second (the bench glue
#: job's 50,000/s on this machine's two cores, halved for safety).
GLUE_START_SECONDS = 60
GLUE_RECORDS_PER_WORKER_SECOND = 25_000
#: Customer managed keys: the messaging stack's and the analytics stack's.
KMS_KEYS = 2
#: Kinesis, DynamoDB and SQS re-use a data key about five minutes per client.
KMS_REQUESTS_PER_CLIENT_HOUR = 12
#: Alarms: the invalid and error channels' traffic, and per processor its errors, throttles,
#: on-failure depth and (a stream's reader) iterator age.
CHANNEL_ALARMS = 2
ON_DEMAND_SHARDS = 4
#: Keys per BatchGetItem.
LOOKUPS_PER_CALL = 100


def call_seconds(bill: Bill, figures: Figures) -> float:
    """The per-call latency a bill uses: the measured one, else the documented fallback (noted)."""
    if figures.call_seconds is not None:
        bill.notes.append(f"per-call latency {figures.call_seconds * 1000:.2f} ms p50, measured (--measure)")
        return figures.call_seconds
    bill.notes.append(
        f"per-call latency {CALL_SECONDS * 1000:.0f} ms p50: the fallback assumption, not measured "
        "(--measure times the broker's calls)"
    )
    return CALL_SECONDS


def project(
    settings: EnvironmentConfig,
    rate_per_second: float,
    *,
    figures: Figures = MEASURED,
    archive: Archive = "batched",
    rejected_share: float = REJECTED_SHARE,
    topology: Topology = RDSS,
    region: str | None = None,
) -> Bill:
    """The project's bill for ``settings`` at ``rate_per_second`` messages a second, of which
    ``rejected_share`` are rejected to ``invalid``, at the list prices of ``region`` (default: the
    deployment's own; :class:`rdss.cost.prices.UnknownRegion` for a region without a table)."""
    if settings.stream_retention_hours > EXTENDED_RETENTION_HOURS:
        raise ValueError(f"{settings.name}: retention over {EXTENDED_RETENTION_HOURS} h is not priced by the model")
    with priced_in(region or settings.region) as priced:
        bill = Bill(settings.name, rate_per_second, region=priced)
        _project(bill, settings, rate_per_second, figures, archive, rejected_share, topology)
    return bill


def _project(
    bill: Bill,
    settings: EnvironmentConfig,
    rate_per_second: float,
    figures: Figures,
    archive: Archive,
    rejected_share: float,
    topology: Topology,
) -> None:
    traffic = Traffic(rate_per_second, figures, rejected_share, consumers=settings.consumer_groups())
    loads = traffic.loads(topology)
    plan = settings.capacity_at(rate_per_second)
    shards = {}
    for name, load in loads.items():
        # an on-demand stream starts at 4 MiB/s in (four shards) and grows with its peak
        floor = ON_DEMAND_SHARDS if settings.stream_capacity.mode == "on-demand" else 1
        shards[name] = max(plan.shards[name], shards_needed(load), floor)
        if shards[name] > plan.shards[name] and settings.stream_capacity.mode == "provisioned":
            bill.notes.append(
                f"{name}: {plan.shards[name]} shard(s) in cdk.json cannot carry this rate; priced at {shards[name]}"
            )
    _kinesis(bill, settings, loads, shards)
    per_invocation = _batch(settings, rate_per_second, shards["input"])
    latency = call_seconds(bill, figures)
    _claims(bill, settings, rate_per_second, per_invocation, figures)
    functions = {"broker": _broker(settings, rate_per_second, per_invocation, loads, figures)}
    archived = {c.name: loads[c.name] for c in topology.channels if c.archive}
    if archive == "batched":
        functions["archiver"] = _archiver(settings, archived, shards, figures)
    functions["sweep"] = Function(
        SWEEPS_PER_SECOND,
        figures.broker_cpu_per_invocation,
        2,
        _memory(settings, "sweep"),
        figures.log_bytes_per_invocation,
    )
    lambda_items(bill, functions, traced=settings.tracing == "active", call_seconds=latency)
    archive_items(bill, settings, archived, shards, figures, archive)
    curated_items(bill, settings, rate_per_second, figures)
    log_bytes = sum(f.invocations_per_second * f.log_bytes for f in functions.values())
    log_items(bill, log_bytes, log_days=settings.retention.log_days, compression=figures.log_compression)
    alarms = alarm_count(topology) + (4 if archive == "batched" and not _has(topology, "archiver") else 0)
    metrics = figures.metric_series + len(functions)  # and each function's cold-start metric
    bill.add(
        "CloudWatch metrics, alarms and dashboard",
        metrics * usd("cloudwatch.metrics") + alarms * usd("cloudwatch.alarms") + usd("cloudwatch.dashboards"),
        f"{metrics} metrics x ${usd('cloudwatch.metrics')} + {alarms} alarms x ${usd('cloudwatch.alarms')}"
        f" + a dashboard ${usd('cloudwatch.dashboards')}",
    )
    clients = sum(s * (1 + loads[name].readers) for name, s in shards.items()) + len(topology.tables)
    bill.add(
        "KMS keys and requests",
        KMS_KEYS * usd("kms.keys") + clients * KMS_REQUESTS_PER_CLIENT_HOUR * MONTH_HOURS / 1e4 * usd("kms.requests"),
        f"{KMS_KEYS} keys x ${usd('kms.keys')} + {clients} clients (shards x (writer + readers), tables)"
        f" x {KMS_REQUESTS_PER_CLIENT_HOUR} data keys an hour x {MONTH_HOURS} h / 1e4 x ${usd('kms.requests')}",
    )
    glue_items(bill, settings, rate_per_second)


def alarm_count(topology: Topology = RDSS) -> int:
    """The alarms the stack raises: two on channels' traffic, four per stream-reading processor
    (errors, throttles, on-failure depth, iterator age) and three per scheduled one."""
    return CHANNEL_ALARMS + sum(4 if p.sources else 3 for p in topology.processors)


def _has(topology: Topology, processor: str) -> bool:
    return any(p.name == processor for p in topology.processors)


def _memory(settings: EnvironmentConfig, processor: str) -> int:
    return settings.function(processor).memory_mb


def _kinesis(bill: Bill, settings: EnvironmentConfig, loads: dict[str, ChannelLoad], shards: dict[str, int]) -> None:
    extended = max(0, settings.stream_retention_hours - BASE_RETENTION_HOURS)
    if settings.stream_capacity.mode == "provisioned":
        total = sum(shards.values())
        counts = ", ".join(f"{name} {n}" for name, n in shards.items())
        bill.add(
            "Kinesis shard-hours",
            shard_hours(total) * usd("kinesis.shard_hour"),
            f"{total} shards ({counts}; at least one a channel) x {MONTH_HOURS} h x ${usd('kinesis.shard_hour')}",
        )
        if extended:
            bill.add(
                "Kinesis extended retention",
                shard_hours(total) * usd("kinesis.extended_retention"),
                f"retention {settings.stream_retention_hours} h > {BASE_RETENTION_HOURS} h: {total} shards"
                f" x {MONTH_HOURS} h x ${usd('kinesis.extended_retention')}",
            )
        units = sum(load.records_per_second * math.ceil(load.record_bytes / 25_600) for load in loads.values())
        bill.add(
            "Kinesis PUT payload units",
            per_month(units) / 1e6 * usd("kinesis.put_payload_units"),
            f"{units:.4g} 25 KB units/s (every channel's records) x month / 1e6 x ${usd('kinesis.put_payload_units')}",
        )
        return
    bill.add(
        "Kinesis on-demand stream-hours",
        len(loads) * MONTH_HOURS * usd("kinesis.on_demand_stream_hour"),
        f"{len(loads)} streams x {MONTH_HOURS} h x ${usd('kinesis.on_demand_stream_hour')}",
    )
    written = sum(load.records_per_second * math.ceil(load.record_bytes / 1024) * 1024 for load in loads.values())
    bill.add(
        "Kinesis on-demand data in",
        per_month(written) / GB * usd("kinesis.on_demand_data_in"),
        f"{written:,.0f} bytes/s (records rounded up to 1 KB) x month / GB x ${usd('kinesis.on_demand_data_in')}",
    )
    read = sum(load.readers * load.bytes_per_second for load in loads.values())
    bill.add(
        "Kinesis on-demand data out",
        per_month(read) / GB * usd("kinesis.on_demand_data_out"),
        f"{read:,.0f} bytes/s read (every reader) x month / GB x ${usd('kinesis.on_demand_data_out')}",
    )
    if extended:
        held = sum(load.bytes_per_second for load in loads.values()) * extended * 3600 / GB
        bill.add(
            "Kinesis extended retention",
            held * usd("kinesis.on_demand_extended_retention"),
            f"{held:.4g} GB held {extended} h past 24 h x ${usd('kinesis.on_demand_extended_retention')}",
        )


def _claims(bill: Bill, settings: EnvironmentConfig, rate: float, per_invocation: float, figures: Figures) -> None:
    """The messages table: one claim per message (and the batch ledger), look-ups for replies."""
    writes = rate * figures.claim_write_units_per_message(per_invocation) if rate else 0.0
    reads = rate * figures.reply_share * figures.reply_read_units
    table_units(bill, settings, "claims", "look-ups", writes, reads)
    claims = rate * RETENTION_SECONDS * (figures.claim_item_bytes + ITEM_OVERHEAD_BYTES)
    ledgers = (rate / per_invocation if per_invocation else 0.0) * RETENTION_SECONDS
    ledger_bytes = figures.ledger_base_bytes + per_invocation * figures.ledger_record_bytes + ITEM_OVERHEAD_BYTES
    stored = (claims + ledgers * ledger_bytes) / GB
    bill.add(
        "DynamoDB storage and backups",
        stored * (usd("dynamodb.storage") + usd("dynamodb.pitr")),
        f"{stored:.4g} GB (claims and ledgers kept {RETENTION_SECONDS / 86_400:g} days)"
        f" x (${usd('dynamodb.storage')} + ${usd('dynamodb.pitr')} PITR)",
    )


def table_units(
    bill: Bill, settings: EnvironmentConfig, writing: str, reading: str, writes: float, reads: float | None
) -> None:
    """A table's writes (and reads: None for a table never read) in the claims table's capacity
    mode: provisioned units at the target utilisation, or on-demand request units."""
    capacity = settings.table_capacity
    if capacity.mode == "provisioned":
        target = capacity.target_utilization
        wcu = provisioned_units(writes, target)
        bill.add(
            f"DynamoDB {writing} (provisioned writes)",
            wcu * MONTH_HOURS * usd("dynamodb.wcu_hour"),
            f"{writes:.4g} write units/s / {target} target utilisation = {wcu} WCU x {MONTH_HOURS} h"
            f" x ${usd('dynamodb.wcu_hour')}",
        )
        if reads is not None:
            rcu = provisioned_units(reads, target)
            bill.add(
                f"DynamoDB {reading} (provisioned reads)",
                rcu * MONTH_HOURS * usd("dynamodb.rcu_hour"),
                f"{reads:.4g} read units/s / {target} = {rcu} RCU x {MONTH_HOURS} h x ${usd('dynamodb.rcu_hour')}",
            )
        return
    bill.add(
        f"DynamoDB {writing} (on-demand writes)",
        per_month(writes) / 1e6 * usd("dynamodb.write_request_units"),
        f"{writes:.4g} write units/s x month / 1e6 x ${usd('dynamodb.write_request_units')}",
    )
    if reads is not None:
        bill.add(
            f"DynamoDB {reading} (on-demand reads)",
            per_month(reads) / 1e6 * usd("dynamodb.read_request_units"),
            f"{reads:.4g} read units/s x month / 1e6 x ${usd('dynamodb.read_request_units')}",
        )


def _broker(
    settings: EnvironmentConfig, rate: float, n: float, loads: dict[str, ChannelLoad], figures: Figures
) -> Function:
    """The broker: claims (a conditional PutItem each, ten at a time), one PutRecords per
    channel the batch reaches, a look-up when it holds a reply, the ledger. It waits for its
    calls in turn, the claims a round of ten at a time."""
    if not rate:
        return Function(0.0, 0.0, 0.0, _memory(settings, "broker"), 0.0)
    waits = broker_calls(loads, rate, n, figures) - n + math.ceil(n / CLAIM_CONCURRENCY)
    debug = settings.function("broker").log_level.upper() == "DEBUG"
    log = figures.log_bytes_per_invocation + (n * figures.debug_log_bytes_per_message if debug else 0.0)
    cpu = figures.broker_cpu_per_invocation + n * figures.broker_cpu_per_message
    return Function(rate / n, cpu, waits, _memory(settings, "broker"), log)


def broker_calls(loads: dict[str, ChannelLoad], rate: float, n: float, figures: Figures) -> float:
    """AWS calls of one broker invocation of ``n`` records: its claims (a PutItem each), a
    PutRecords per 500 records of each channel it reaches, its return-address look-ups (100 keys
    a BatchGetItem), the ledger."""
    lookups = batched_calls(figures.reply_share, n, LOOKUPS_PER_CALL)
    return n + destinations(loads, rate, n) + lookups + 1


def _batch(settings: EnvironmentConfig, records_per_second: float, shards: int) -> float:
    """Records per invocation of a processor mapped to a stream of ``shards`` (its event source's
    batch size, batching window and parallelisation)."""
    events = settings.event_source
    readers = shards * events.parallelization_factor
    return records_per_invocation(records_per_second, readers, events.batch_size, events.max_batching_window_seconds)


def archiver_batch(settings: EnvironmentConfig, records_per_second: float, shards: int) -> float:
    """Records per invocation of the archiver on a stream of ``shards``: its own mappings' batch
    size and window (``archive`` in cdk.json, as stacks/processors.py deploys them), the event
    source's parallelisation."""
    readers = shards * settings.event_source.parallelization_factor
    archive = settings.archive
    return records_per_invocation(records_per_second, readers, archive.batch_size, archive.max_batching_window_seconds)


def _archiver(
    settings: EnvironmentConfig, archived: dict[str, ChannelLoad], shards: dict[str, int], figures: Figures
) -> Function:
    """One invocation per batch of each archived stream: frame, gzip, one PutRecordBatch."""
    invocations = cpu = 0.0
    for name, load in archived.items():
        n = archiver_batch(settings, load.records_per_second, shards[name])
        if n:
            invocations += load.records_per_second / n
            cpu += load.records_per_second * figures.archive_cpu_per_entry
    per_call = cpu / invocations if invocations else 0.0
    memory = _memory(settings, "archiver")
    return Function(
        invocations, figures.broker_cpu_per_invocation + per_call, 1, memory, figures.log_bytes_per_invocation
    )


def archive_items(
    bill: Bill,
    settings: EnvironmentConfig,
    archived: dict[str, ChannelLoad],
    shards: dict[str, int],
    figures: Figures,
    archive: Archive,
) -> None:
    """Firehose ingestion, and the audit and errors buckets (storage, PUTs, transitions)."""
    billed = puts = transitions = storage = 0.0
    by_bucket: dict[str, tuple[float, float]] = {}
    for name, load in archived.items():
        if archive == "batched":
            n = archiver_batch(settings, load.records_per_second, shards[name])
            member = n * figures.gzip_bytes_per_entry(n)
            members = load.records_per_second / n if n else 0.0
            billed += members * firehose_billed_bytes(member)
            written = members * member
        else:
            billed += load.records_per_second * firehose_billed_bytes(load.record_bytes)
            # Firehose gzips a whole buffer: the raw records compress as entries do in large members
            ratio = figures.gzip_bytes_per_entry(1000) / figures.archive_entry_bytes
            written = load.bytes_per_second * ratio
        bucket = "audit" if name == "input" else "errors"
        objects = firehose_objects(written, settings.archive.buffer_seconds, settings.archive.buffer_mib)
        previous = by_bucket.get(bucket, (0.0, 0.0))
        by_bucket[bucket] = (previous[0] + per_month(written), previous[1] + objects)
        puts += objects
    for bucket, (monthly, objects) in by_bucket.items():
        held, moved = s3_storage(monthly, objects, settings.lifecycle(bucket))
        storage += held
        transitions += moved
    how = "one gzip member per archiver batch" if archive == "batched" else "each record"
    bill.add(
        "Firehose ingestion",
        per_month(billed) / GB * usd("firehose.ingestion"),
        f"{billed:,.0f} billed bytes/s ({how}, rounded up to 5 KB) x month / GB x ${usd('firehose.ingestion')}",
    )
    bill.add(
        "S3 archive storage (audit, errors)",
        storage,
        "12th month: each month's gzip bytes held in the tier its age reaches (the buckets' lifecycles)",
    )
    bill.add(
        "S3 requests and lifecycle transitions",
        puts / 1000 * usd("s3.put_requests") + transitions,
        f"{puts:,.0f} objects a month (buffer {settings.archive.buffer_seconds} s or {settings.archive.buffer_mib}"
        f" MiB) / 1000 x ${usd('s3.put_requests')} + ${transitions:.2f} of transitions",
    )


def curated_items(bill: Bill, settings: EnvironmentConfig, rate: float, figures: Figures) -> None:
    """The compaction job's Parquet (one object per day and message type: few requests)."""
    monthly = per_month(rate) * figures.curated_bytes
    held, moved = s3_storage(monthly, 30 * 8, settings.lifecycle("curated"))
    bill.add(
        "S3 curated storage",
        held + moved,
        f"{monthly / GB:.4g} GB a month ({figures.curated_bytes} Parquet bytes a message),"
        " 12th month, the curated lifecycle",
    )


def glue_items(bill: Bill, settings: EnvironmentConfig, rate: float) -> None:
    """The daily compaction and report (only where a schedule is configured)."""
    if not settings.analytics.compaction_schedule:
        return
    workers = settings.analytics.glue_workers
    seconds = GLUE_START_SECONDS + rate * 86_400 / (workers * GLUE_RECORDS_PER_WORKER_SECOND)
    dpu_hours = workers * max(seconds, 60) / 3600 * GLUE_JOBS_PER_RUN * 365.25 / 12
    bill.add(
        "Glue jobs",
        dpu_hours * usd("glue.dpu_hour"),
        f"{workers} workers x {max(seconds, 60):,.0f} s x {GLUE_JOBS_PER_RUN} jobs a day x 30.4 days"
        f" = {dpu_hours:.4g} DPU-h x ${usd('glue.dpu_hour')}",
    )
