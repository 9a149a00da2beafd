"""``rdss bench archive``: what archiving costs per record, measured on realistic messages.

The figures a cost model needs (docs/operators.md, "What the archive costs"), from
:class:`rdss.model.workload.Workload`'s realistic mix framed and packed exactly as the archiver does:

* bytes per record: the payload, its archive entry, what Firehose billed per record before
  entries (it read the stream and rounded each record up to 5 KB) and what S3 stored per record
  before (the buffer's raw lines, newline-delimited, gzip-compressed whole);
* per batch size (the records of one archiver invocation on one shard): the gzip member bytes
  per record, the records per Firehose record, and the bytes Firehose bills per record (each
  member rounded up to 5 KB);
* the archiver's CPU time per record (framing and gzip), on this machine;
* how many records one invocation can carry (Lambda's 6 MB event limit, base64 data).
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field

import orjson

from rdss.archive import entries as archive
from rdss.bench.figures import Measured
from rdss.model.workload import Workload

#: Firehose bills ingestion per record rounded up to this (Direct PUT and Kinesis source alike).
BILLING_STEP = 5 * 1024
#: Lambda's limit on a synchronous invocation's event, and what each Kinesis record adds to it
#: besides its base64 data (its members as Lambda writes them: 592 bytes in rdss.local.events).
EVENT_LIMIT = 6 * 1024 * 1024
EVENT_RECORD_OVERHEAD = 600
BATCH_SIZES = (1, 10, 100, 1000, 10_000)


@dataclass
class Batch:
    """One batch size's figures."""

    records: int
    members: int
    member_bytes_per_record: float
    records_per_member: float
    billed_bytes_per_record: float
    microseconds_per_record: float


@dataclass
class Figures(Measured):
    messages: int
    raw_bytes_per_record: float
    entry_bytes_per_record: float
    billed_bytes_per_record_before: float
    stored_bytes_per_record_before: float
    records_per_invocation_limit: int
    batches: list[Batch] = field(default_factory=list)


def run(messages: int = 10_000, *, seed: int = 7) -> Figures:
    payloads = [orjson.dumps(m) for m in Workload(seed).mix(messages)]
    lines = [
        archive.frame(
            payload,
            stream="rdss-prod-input",
            shard=f"shardId-{index % 4:012d}",
            sequence_number=f"4966{index:052d}",
            partition_key=orjson.loads(payload)["messageHeader"]["messageId"],
            arrival=1_764_064_800.0 + index / 1000,
        )
        for index, payload in enumerate(payloads)
    ]
    raw = statistics.fmean(len(p) for p in payloads)
    figures = Figures(
        messages=len(payloads),
        raw_bytes_per_record=raw,
        entry_bytes_per_record=statistics.fmean(len(line) + 1 for line in lines),
        billed_bytes_per_record_before=statistics.fmean(_billed(len(p)) for p in payloads),
        stored_bytes_per_record_before=len(archive.encode_legacy(payloads)) / len(payloads),
        records_per_invocation_limit=int(EVENT_LIMIT // (raw * 4 / 3 + EVENT_RECORD_OVERHEAD)),
    )
    for size in BATCH_SIZES:
        if size > len(lines):
            break
        batches = [lines[start : start + size] for start in range(0, len(lines) - size + 1, size)]
        started = time.process_time()
        members = [archive.pack(batch) for batch in batches]
        seconds = time.process_time() - started
        packed = [m for batch in members for m in batch]
        records = sum(len(batch) for batch in batches)
        figures.batches.append(
            Batch(
                records=size,
                members=len(packed),
                member_bytes_per_record=sum(len(m.data) for m in packed) / records,
                records_per_member=records / len(packed),
                billed_bytes_per_record=sum(_billed(len(m.data)) for m in packed) / records,
                microseconds_per_record=seconds / records * 1e6,
            )
        )
    return figures


def _billed(size: int) -> int:
    return max(1, math.ceil(size / BILLING_STEP)) * BILLING_STEP
