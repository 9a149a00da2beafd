"""The rules every bill follows, the project's and the peers': Lambda, logs, traces, S3.

A bill is the 12th month of running at a steady rate (storage then holds up to a year of
archives, tiered by the environment's lifecycle rules). What is assumed rather than measured is
named here, once, with why.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rdss.cost.prices import GB, MONTH_HOURS, MONTH_SECONDS, usd
from rdss.deployment.settings import BucketLifecycle

#: The month a bill is for: storage holds this many months of archives.
MONTH = 12
DAYS_PER_MONTH = 365.25 / 12
#: Lambda gives a full vCPU at 1,769 MB and a share below it; the measured CPU seconds (this
#: build machine) are taken as a vCPU's.
FULL_VCPU_MB = 1769
#: The fallback round trip of one AWS data-plane call (DynamoDB, Kinesis, SQS, Firehose,
#: PutRecordBatch included): the time a function waits and is billed for. Used only when the
#: figures carry no measured latency (:attr:`rdss.deployment.capacity.Figures.call_seconds`, which
#: ``rdss bench cost --measure`` measures on the broker's own calls); the bill then says it is the
#: fallback. It is a median (p50), the one percentile every latency of the model is: a bill sums
#: many calls, so the typical call is the figure to multiply, not the slow tail.
CALL_SECONDS = 0.012
#: The percentile :data:`CALL_SECONDS` (and every latency the model assumes) is.
LATENCY_PERCENTILE = "p50"
#: X-Ray's default sampling rule: the first request each second, and 5 % of the others.
TRACE_RESERVOIR_PER_SECOND = 1.0
TRACE_RATE = 0.05
#: S3 leaves objects under 128 KB in Standard (its default minimum size for transitions).
TRANSITION_MIN_OBJECT_BYTES = 128 * 1024
#: DynamoDB adds about 100 bytes to each item's size for storage.
ITEM_OVERHEAD_BYTES = 100


@dataclass
class Bill:
    """A monthly bill, item by item, in US dollars."""

    env: str
    rate_per_second: float
    items: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: Per item, how it was computed: formulas with their inputs (``bench cost --explain``).
    formulas: dict[str, list[str]] = field(default_factory=dict)
    #: The region whose price table priced the bill.
    region: str = ""

    def add(self, item: str, dollars: float, formula: str = "") -> None:
        self.items[item] = self.items.get(item, 0.0) + dollars
        if formula:
            self.formulas.setdefault(item, []).append(formula)

    @property
    def total(self) -> float:
        return sum(self.items.values())

    @property
    def messages_per_month(self) -> float:
        return self.rate_per_second * MONTH_SECONDS

    @property
    def usd_per_million(self) -> float:
        return self.total / self.messages_per_month * 1e6 if self.rate_per_second else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "env": self.env,
            "rate_per_second": self.rate_per_second,
            "region": self.region,
            "items": {name: round(dollars, 2) for name, dollars in self.items.items()},
            "total_usd_per_month": round(self.total, 2),
            "usd_per_million": round(self.usd_per_million, 4),
        }


def per_month(per_second: float) -> float:
    return per_second * MONTH_SECONDS


@dataclass(frozen=True)
class Function:
    """A function's steady work: invocations per second, each taking ``cpu_seconds`` of CPU
    and waiting for ``calls`` AWS calls one after another (calls made together count once), at
    ``memory_mb``."""

    invocations_per_second: float
    cpu_seconds: float
    calls: float
    memory_mb: int
    log_bytes: float

    def seconds(self, call_seconds: float = CALL_SECONDS) -> float:
        """Billed duration of one invocation (1 ms steps), each AWS call taking ``call_seconds``."""
        share = min(1.0, self.memory_mb / FULL_VCPU_MB)
        milliseconds = (self.cpu_seconds / share + self.calls * call_seconds) * 1000
        return math.ceil(round(milliseconds, 6)) / 1000  # 56.000000000000001 ms is 56


def lambda_items(
    bill: Bill, functions: Mapping[str, Function], *, traced: bool = True, call_seconds: float = CALL_SECONDS
) -> None:
    """Requests, duration (arm64) and, with active tracing, X-Ray traces (Lambda's own sampling:
    the first invocation each second and 5 % of the others, per function)."""
    requests = sum(f.invocations_per_second for f in functions.values())
    bill.add(
        "Lambda requests",
        per_month(requests) / 1e6 * usd("lambda.requests"),
        f"{requests:.4g} invocations/s x month / 1e6 x ${usd('lambda.requests')}",
    )
    gb_seconds = sum(
        f.invocations_per_second * f.seconds(call_seconds) * f.memory_mb / 1024 for f in functions.values()
    )
    shapes = "; ".join(
        f"{name}: {f.invocations_per_second:.4g}/s x ({f.cpu_seconds * 1000:.3g} ms CPU at {f.memory_mb} MB"
        f" + {f.calls:.3g} calls in turn x {call_seconds * 1000:.3g} ms)"
        f" = {f.seconds(call_seconds) * 1000:.0f} ms billed"
        for name, f in functions.items()
    )
    bill.add(
        "Lambda duration",
        per_month(gb_seconds) * usd("lambda.arm64_duration"),
        f"sum of invocations/s x billed s x GB, x month x ${usd('lambda.arm64_duration')}/GB-s ({shapes})",
    )
    if traced:
        traces = sum(
            min(f.invocations_per_second, TRACE_RESERVOIR_PER_SECOND)
            + TRACE_RATE * max(0.0, f.invocations_per_second - TRACE_RESERVOIR_PER_SECOND)
            for f in functions.values()
        )
        bill.add(
            "X-Ray traces",
            per_month(traces) / 1e6 * usd("xray.traces"),
            f"per function min(invocations/s, 1) + 5 % of the rest = {traces:.4g} traces/s x month / 1e6"
            f" x ${usd('xray.traces')}",
        )


def log_items(bill: Bill, bytes_per_second: float, *, log_days: int, compression: float) -> None:
    """CloudWatch Logs: ingestion, and storage of what the retention keeps (compressed)."""
    monthly = per_month(bytes_per_second) / GB
    bill.add(
        "CloudWatch Logs ingestion",
        monthly * usd("logs.ingestion"),
        f"{bytes_per_second:,.0f} log bytes/s x month = {monthly:.4g} GB x ${usd('logs.ingestion')}",
    )
    kept_months = min(log_days / DAYS_PER_MONTH, MONTH)
    bill.add(
        "CloudWatch Logs storage",
        monthly * kept_months * compression * usd("logs.storage"),
        f"{monthly:.4g} GB x {kept_months:.3g} months kept ({log_days} days) x {compression} compressed"
        f" x ${usd('logs.storage')}",
    )


_TIERS = (
    ("infrequent_access_after_days", "s3.standard_ia", "s3.transition_ia"),
    ("glacier_after_days", "s3.glacier_ir", "s3.transition_glacier_ir"),
    ("deep_archive_after_days", "s3.deep_archive", "s3.transition_deep_archive"),
)


def s3_storage(bytes_per_month: float, objects_per_month: float, lifecycle: BucketLifecycle) -> tuple[float, float]:
    """(storage, transitions) in the bill's month: each earlier month's objects sit in the tier
    their age puts them in, or are gone past the expiry. Objects under 128 KB stay in Standard."""
    if bytes_per_month <= 0:
        return 0.0, 0.0
    movable = objects_per_month and bytes_per_month / objects_per_month >= TRANSITION_MIN_OBJECT_BYTES
    tiers = [
        (days, price, transition)
        for attribute, price, transition in _TIERS
        if movable and (days := getattr(lifecycle, attribute)) is not None
    ]
    storage = 0.0
    for month in range(MONTH):
        age = (month + 0.5) * DAYS_PER_MONTH
        if lifecycle.expire_after_days is not None and age >= lifecycle.expire_after_days:
            continue
        price = "s3.standard"
        for days, tier, _ in tiers:
            if age >= days:
                price = tier
        storage += bytes_per_month / GB * usd(price)
    # each month's objects cross every threshold already reached within the bill's year
    transitions = sum(
        objects_per_month / 1000 * usd(transition) for days, _, transition in tiers if days < MONTH * DAYS_PER_MONTH
    )
    return storage, transitions


def firehose_objects(bytes_per_second: float, buffer_seconds: int, buffer_mib: int) -> float:
    """Objects a delivery stream writes a month: one per buffer interval, or per full buffer."""
    if bytes_per_second <= 0:
        return 0.0
    per_object = min(bytes_per_second * buffer_seconds, buffer_mib * 1024 * 1024)
    return per_month(bytes_per_second) / per_object


def firehose_billed_bytes(record_bytes: float) -> float:
    """Firehose bills each record in 5 KB steps."""
    return math.ceil(record_bytes / 5120) * 5120


def batched_calls(share: float, records: float, per_call: int) -> float:
    """Expected calls to pass on the ``share`` of ``records`` records that goes one way, at most
    ``per_call`` records a call: the chance any goes at all when few do, else full calls."""
    if share <= 0 or records <= 0:
        return 0.0
    expected = share * records
    return float(math.ceil(expected / per_call)) if expected >= 1 else 1 - (1 - share) ** records


def destinations(
    loads: Mapping[str, Any], rate: float, records: float, source: str = "input", per_call: int = 500
) -> float:
    """Expected send calls of one invocation of ``records`` records: per channel its traffic
    reaches (its share of what leaves ``source``), ``per_call`` records a call (PutRecords: 500)."""
    if not rate:
        return 0.0
    shares = [load.records_per_second / rate for name, load in loads.items() if name != source]
    return sum(batched_calls(share, records, per_call) for share in shares)


def shard_hours(shards: int) -> float:
    return shards * MONTH_HOURS
