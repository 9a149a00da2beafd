"""What a message costs in capacity, and how much capacity a rate of messages needs.

The per-message figures (:class:`Figures`) are measured by the project itself
(``rdss bench cost --measure``, :mod:`rdss.bench.cost_measure`): realistic messages from
:mod:`rdss.model.workload` through the real broker handler on stub AWS clients that record what
they are sent (record bytes per channel, DynamoDB item sizes, calls), the Powertools log lines
and EMF metrics it prints, and the archive entries (rdss.archive.entries) gzip-compressed in members of
many entries. :data:`MEASURED` holds the latest run; a unit test re-measures a sample and fails
when they drift apart.

The sizing rules here are shared by the CDK app (prod's shard counts and the claims table's
capacity, ``stacks/channels.py`` and ``stacks/state.py``) and the cost model
(:mod:`rdss.cost.estimate`), so what is deployed and what is priced cannot differ.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from rdss.deployment.topology import RDSS, Topology

MIB = 1024 * 1024
#: A provisioned shard takes 1 MiB/s or 1,000 records/s in, and gives 2 MiB/s out, shared by
#: every reader that is not an enhanced fan-out consumer.
SHARD_IN_BYTES = MIB
SHARD_IN_RECORDS = 1000
SHARD_OUT_BYTES = 2 * MIB
#: A write unit covers 1 KB of item (a plain write: a transactional one costs two per KB).
WRITE_UNIT_BYTES = 1024
#: Share of messages rejected to ``invalid``: the workload's messages are all valid, real
#: producers send some bad ones. An assumption, not a measurement.
REJECTED_SHARE = 0.01


@dataclass(frozen=True)
class Figures:
    """Per-message figures measured on realistic traffic (see the module's docstring)."""

    #: Mean record on ``input``, as producers send it.
    input_bytes: float
    #: Mean record on a routed channel (the broker appends its messageHistory hop).
    routed_bytes: float
    #: Share of valid messages per routed channel (the workload's mix of types).
    routed_shares: Mapping[str, float]
    #: Share of messages that are replies (a Document answering a Read): one return-address
    #: look-up each.
    reply_share: float
    #: Bytes a rejected record gains (errorCode and errorDescription in its header).
    decoration_bytes: float
    #: A claim's item in the ``messages`` table (DynamoDB's size: names plus values).
    claim_item_bytes: float
    #: Write units per claim: a conditional PutItem, one unit per KB.
    claim_write_units: float
    #: The batch ledger item: its fixed bytes, and the bytes each listed record adds.
    ledger_base_bytes: float
    ledger_record_bytes: float
    #: Read units per return-address look-up (BatchGetItem, eventually consistent, < 4 KB).
    reply_read_units: float
    #: CPU seconds of the broker handler: per message, and per invocation whatever its size.
    broker_cpu_per_message: float
    broker_cpu_per_invocation: float
    #: Log bytes the broker prints per invocation at INFO (its "batch handled" line and its
    #: EMF metric lines, with the Lambda context Powertools adds), and per message more at DEBUG.
    log_bytes_per_invocation: float
    debug_log_bytes_per_message: float
    #: Compressed / raw size of those log lines (CloudWatch Logs stores them compressed).
    log_compression: float
    #: Distinct EMF metric series (name and dimensions) the broker emits on this traffic.
    metric_series: int
    #: An archive entry (one line of JSON framing the record: rdss.archive.entries), raw.
    archive_entry_bytes: float
    #: Gzip bytes per entry when a member holds n entries, by n (the archiver writes one member
    #: per stream per invocation).
    archive_gzip_bytes: Mapping[int, float]
    #: CPU seconds to frame and gzip one entry.
    archive_cpu_per_entry: float
    #: A message's row in the curated Parquet (header columns, no body; snappy).
    curated_bytes: float
    #: Workload messages the figures come from.
    sample: int = 0
    #: Median (p50) seconds of one AWS data-plane call, timed on every call the real broker makes
    #: against the embedded emulator (``rdss bench cost --measure``: real HTTP through botocore).
    #: None when not measured: the cost model then uses its documented fallback
    #: (:data:`rdss.cost.rules.CALL_SECONDS`) and says so.
    call_seconds: float | None = None

    def as_dict(self) -> dict[str, Any]:
        """The figures as JSON values (member sizes as strings)."""
        values = asdict(self)
        values["archive_gzip_bytes"] = {str(n): b for n, b in self.archive_gzip_bytes.items()}
        return values

    def gzip_bytes_per_entry(self, entries_per_member: float) -> float:
        """Gzip bytes per entry for members of ``entries_per_member`` entries: the figure measured
        at the largest member size not above it (more entries per member only compress better)."""
        sizes = sorted(self.archive_gzip_bytes)
        chosen = max([n for n in sizes if n <= max(1.0, entries_per_member)], default=sizes[0])
        return self.archive_gzip_bytes[chosen]

    def ledger_write_units(self, records: float) -> int:
        """Write units of one batch ledger listing ``records`` records (a plain PutItem)."""
        return max(1, math.ceil((self.ledger_base_bytes + records * self.ledger_record_bytes) / WRITE_UNIT_BYTES))

    def claim_write_units_per_message(self, records_per_invocation: float) -> float:
        """Claims plus the ledger's share, per message, at a batch of ``records_per_invocation``."""
        n = max(1.0, records_per_invocation)
        return self.claim_write_units + self.ledger_write_units(n) / n


#: ``rdss bench cost --figures --measure`` on 25 Nov 2026: 2,000 workload messages (seed 11) in
#: invocations of 100 records (CPU seconds on this project's 2-core build machine).
MEASURED = Figures(
    input_bytes=3680.2,
    routed_bytes=3794.2,
    routed_shares={"metadata": 0.7885, "vocabulary": 0.0995, "responses": 0.112},
    reply_share=0.112,
    decoration_bytes=105.0,
    claim_item_bytes=359.5,
    claim_write_units=1.0,
    ledger_base_bytes=74.0,
    ledger_record_bytes=65.0,
    reply_read_units=0.5,
    broker_cpu_per_message=0.0001847,
    broker_cpu_per_invocation=0.000973,
    log_bytes_per_invocation=2354.0,
    debug_log_bytes_per_message=602.7,
    log_compression=0.048,
    metric_series=5,
    archive_entry_bytes=4211.7,
    archive_gzip_bytes={1: 1593.9, 10: 737.7, 100: 590.9, 1000: 575.3},
    archive_cpu_per_entry=0.0001,
    curated_bytes=95.2,
    sample=2000,
)


@dataclass(frozen=True)
class ChannelLoad:
    """What one channel carries: records and bytes per second, and how many read it."""

    records_per_second: float
    bytes_per_second: float
    readers: int

    @property
    def record_bytes(self) -> float:
        return self.bytes_per_second / self.records_per_second if self.records_per_second else 0.0


@dataclass(frozen=True)
class Traffic:
    """A steady rate of realistic messages into ``input``."""

    rate_per_second: float
    figures: Figures = MEASURED
    rejected_share: float = REJECTED_SHARE
    #: Consumer groups reading each routed channel (vendors; one when none is configured).
    consumers: Mapping[str, int] = field(default_factory=dict)

    def loads(self, topology: Topology = RDSS) -> dict[str, ChannelLoad]:
        """Every channel's load. Sequences are not part of the realistic mix (no message nears
        the 1,000,000-byte limit), so ``sequence`` carries nothing; ``error`` carries only
        infrastructure failures, none in steady state."""
        f = self.figures
        valid = self.rate_per_second * (1 - self.rejected_share)
        rejected = self.rate_per_second * self.rejected_share
        loads: dict[str, ChannelLoad] = {}
        for channel in topology.channels:
            if channel.kind == "input":
                # the broker and the archiver read input
                load = ChannelLoad(self.rate_per_second, self.rate_per_second * f.input_bytes, 2)
            elif channel.kind == "routed":
                records = valid * f.routed_shares.get(channel.name, 0.0)
                load = ChannelLoad(records, records * f.routed_bytes, max(1, self.consumers.get(channel.name, 1)))
            elif channel.kind == "invalid":
                load = ChannelLoad(rejected, rejected * (f.input_bytes + f.decoration_bytes), 1)
            else:  # sequence (the sequencer reads it), error (the archiver reads it)
                load = ChannelLoad(0.0, 0.0, 1)
            loads[channel.name] = load
        return loads


def shards_needed(load: ChannelLoad, headroom: float = 1.0) -> int:
    """Provisioned shards for ``load`` times ``headroom``: bytes and records in, bytes out to
    every reader; at least one."""
    need = max(
        load.bytes_per_second / SHARD_IN_BYTES,
        load.records_per_second / SHARD_IN_RECORDS,
        load.readers * load.bytes_per_second / SHARD_OUT_BYTES,
    )
    return max(1, math.ceil(need * headroom - 1e-9))


def records_per_invocation(records_per_second: float, slots: int, batch_size: int, window_seconds: float) -> float:
    """Records in one invocation of an event source mapping: a batch fills up to ``batch_size``
    or for ``window_seconds``, per slot (shards x parallelization factor); at least one."""
    if records_per_second <= 0:
        return 0.0
    per_slot = records_per_second / max(1, slots)
    return min(float(batch_size), max(1.0, per_slot * max(window_seconds, 0.0)))


def provisioned_units(units_per_second: float, target_utilization: float) -> int:
    """Capacity units auto scaling holds for a steady load at ``target_utilization``; at least one."""
    return max(1, math.ceil(units_per_second / target_utilization - 1e-9))


@dataclass(frozen=True)
class Plan:
    """The capacity a deployment holds for a traffic: shards per channel and the claims table's
    provisioned units (when provisioned)."""

    shards: Mapping[str, int]
    #: Records in one broker invocation at the planned rate.
    records_per_invocation: float
    write_units: int
    read_units: int


def plan(
    traffic: Traffic,
    *,
    headroom: float,
    explicit_shards: Mapping[str, int],
    parallelization: int,
    batch_size: int,
    window_seconds: float,
    target_utilization: float,
    topology: Topology = RDSS,
) -> Plan:
    """Shards per channel (an explicit count - the channel's own, else ``default`` - wins over
    the count sized from ``traffic`` x ``headroom``) and the claims table's capacity for
    ``traffic`` at ``target_utilization``."""
    loads = traffic.loads(topology)
    shards = {
        name: int(explicit_shards.get(name, explicit_shards.get("default", shards_needed(load, headroom))))
        for name, load in loads.items()
    }
    (source,) = (c.name for c in topology.channels_of("input"))
    rate = traffic.rate_per_second
    per_invocation = records_per_invocation(rate, shards[source] * parallelization, batch_size, window_seconds)
    f = traffic.figures
    writes = rate * f.claim_write_units_per_message(per_invocation)
    reads = rate * f.reply_share * f.reply_read_units
    return Plan(
        shards=shards,
        records_per_invocation=per_invocation,
        write_units=provisioned_units(writes, target_utilization),
        read_units=provisioned_units(reads, target_utilization),
    )
