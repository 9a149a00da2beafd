"""``rdss bench cost --measure``: the per-message figures the cost model prices.

Realistic messages (:mod:`rdss.model.workload`) go through the real broker handler - the AMGI app
behind the Kinesis adaptor, as deployed - whose AWS clients are stubs that answer as an empty
table and an accepting stream would and record what they were sent: every record's bytes per
channel, every DynamoDB item (sized the way DynamoDB sizes items, so write units follow), every
call. Its Powertools log lines and EMF metric lines are captured as Lambda would ship them
(with the Lambda context Powertools adds, and Lambda's own START/END/REPORT lines). The same
records are framed as archive entries (rdss.archive.entries) and gzip-compressed in members of 1, 10, 100
and 1,000 entries, as the archiver writes one member per stream per invocation.
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import io
import math
import os
import statistics
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

import orjson

from rdss.amgi.kinesis import KinesisEventSourceMappingHandler
from rdss.archive import entries as archive
from rdss.bench.broker import events, processor_output_to
from rdss.deployment.capacity import MEASURED, WRITE_UNIT_BYTES, Figures
from rdss.deployment.topology import RDSS, Deployment, from_environment
from rdss.model.decoration import decorate
from rdss.observability.powertools import logger
from rdss.processors.broker import Broker

#: Member sizes the archive's compression is measured at.
MEMBER_SIZES = (1, 10, 100, 1000)
#: What Lambda itself writes per invocation (text format, active tracing), sized with real-looking ids.
_PLATFORM_LINES = (
    "START RequestId: {id} Version: $LATEST\n"
    "END RequestId: {id}\n"
    "REPORT RequestId: {id}\tDuration: 123.45 ms\tBilled Duration: 124 ms\tMemory Size: 1024 MB\t"
    "Max Memory Used: 181 MB\t\nXRAY TraceId: 1-6744f1c2-3b4e5f60718293a4b5c6d7e8\tSegmentId: 0a1b2c3d4e5f6071\t"
    "Sampled: true\t\n"
)
#: CloudWatch Logs bills each event's bytes plus 26 bytes.
_EVENT_OVERHEAD = 26


def item_bytes(item: dict[str, Any]) -> int:
    """An item's size as DynamoDB counts it: attribute names plus values (numbers: about one
    byte per two digits, plus one)."""
    size = 0
    for name, value in item.items():
        size += len(name.encode())
        ((kind, raw),) = value.items()
        if kind == "S":
            size += len(raw.encode())
        elif kind == "N":
            size += math.ceil(len(raw.lstrip("-").replace(".", "")) / 2) + 1
        elif kind == "SS":
            size += sum(len(s.encode()) for s in raw)
        else:
            size += 1
    return size


class _Recorder:
    """Stub Kinesis and DynamoDB clients that keep what they are sent."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.records: Counter[str] = Counter()
        self.record_bytes: Counter[str] = Counter()
        self.claims: list[int] = []
        self.ledgers: list[tuple[int, list[str]]] = []
        self.lookups = 0
        self.lock = threading.Lock()

    # Kinesis
    def put_records(self, StreamName: str, Records: list[dict[str, Any]]) -> dict[str, Any]:
        self.calls["PutRecords"] += 1
        self.records[StreamName] += len(Records)
        self.record_bytes[StreamName] += sum(len(r["Data"]) for r in Records)
        return {"FailedRecordCount": 0, "Records": [{"ShardId": "shardId-0", "SequenceNumber": "1"} for _ in Records]}

    # DynamoDB
    def batch_get_item(self, RequestItems: dict[str, Any], **_: Any) -> dict[str, Any]:
        self.calls["BatchGetItem"] += 1
        self.lookups += sum(len(request["Keys"]) for request in RequestItems.values())
        return {"Responses": {}, "UnprocessedKeys": {}}

    def put_item(self, Item: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        with self.lock:  # the claims are made from a pool of threads
            self.calls["PutItem"] += 1
            if "ConditionExpression" in kwargs:  # a claim
                self.claims.append(item_bytes(Item))
            else:  # the batch's ledger
                self.ledgers.append((item_bytes(Item), list(Item.get("records", {}).get("SS", []))))
        return {}


@contextlib.contextmanager
def _captured_logs(level: str) -> Iterator[io.StringIO]:
    """The processors' log lines and EMF metric lines (printed), as Lambda would ship them."""
    buffer = io.StringIO()
    # metrics are measured too, whatever the caller's environment says (tests disable them)
    disabled = os.environ.pop("POWERTOOLS_METRICS_DISABLED", None)
    previous_level = logger.log_level
    logger.setLevel(level)
    # what inject_lambda_context adds to every line in Lambda
    logger.append_keys(
        cold_start=False,
        function_name="rdss-prod-broker",
        function_memory_size="1024",
        function_arn="arn:aws:lambda:us-east-1:123456789012:function:rdss-prod-broker",
        function_request_id=str(uuid.uuid4()),
        xray_trace_id="1-6744f1c2-3b4e5f60718293a4b5c6d7e8",
    )
    try:
        with processor_output_to(buffer):
            yield buffer
    finally:
        logger.remove_keys(
            ["cold_start", "function_name", "function_memory_size", "function_arn", "function_request_id"]
        )
        logger.remove_keys(["xray_trace_id"])
        logger.setLevel(previous_level)
        if disabled is not None:
            os.environ["POWERTOOLS_METRICS_DISABLED"] = disabled


def _run(built: Sequence[dict[str, Any]], recorder: _Recorder) -> float:
    """CPU seconds of the broker handler over ``built`` events (lifespan start-up excluded)."""
    names = from_environment(Deployment("bench").environment_variables())
    handler = KinesisEventSourceMappingHandler(Broker(names=names, dynamodb=recorder), kinesis=recorder)
    handler({"Records": []}, None)
    started = time.process_time()
    for event in built:
        if handler(event, None)["batchItemFailures"]:
            raise AssertionError("the broker failed records on stub AWS")
    seconds = time.process_time() - started
    handler.close()
    return seconds


def _log_bytes(text: str) -> int:
    return len(text.encode()) + _EVENT_OVERHEAD * text.count("\n")


def frame(payload: bytes, index: int) -> bytes:
    """One archive entry line, as the archiver frames a record of ``rdss-prod-input``
    (:func:`rdss.archive.entries.frame`), with its newline."""
    entry = archive.frame(
        payload,
        stream="rdss-prod-input",
        shard="shardId-000000000003",
        sequence_number=str(49_650_000_000_000_000_000_000_000_000_000_000_000_000_000 + index * 7919),
        partition_key=str(uuid.UUID(int=index)),
        arrival=1_795_600_800.123,
    )
    return entry + b"\n"


def curated_bytes(payloads: Sequence[bytes]) -> float | None:
    """Parquet bytes per message of the curated table's columns (None without pyarrow, which
    only the ``glue`` extra installs)."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        return None
    rows = []
    for payload in payloads:
        message = orjson.loads(payload)
        header = message["messageHeader"]
        sequence, timings = header["messageSequence"], header["messageTimings"]
        rows.append(
            {
                "messageId": header["messageId"],
                "messageClass": header["messageClass"],
                "correlationId": header.get("correlationId"),
                "sequence": sequence["sequence"],
                "position": sequence["position"],
                "total": sequence["total"],
                "publishedTimestamp": timings["publishedTimestamp"],
                "expirationTimestamp": timings.get("expirationTimestamp"),
                "generator": header["generator"],
                "version": header["version"],
                "errorCode": None,
                "bodyBytes": len(orjson.dumps(message["messageBody"])),
                "archivedAt": "2026-11-25T10:00:00.123Z",
                "messageType": header["messageType"],
            }
        )
    written = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), written, compression="snappy")
    return len(written.getvalue()) / len(rows)


def measure(messages: int = 2000, *, batch: int = 100, seed: int = 11) -> Figures:
    """The figures, from ``messages`` workload messages in invocations of ``batch`` records."""
    if messages < 10 or batch < 1:
        raise ValueError("measure at least 10 messages in batches of at least 1")
    built = events(messages, batch, seed)
    payloads = [base64.b64decode(r["kinesis"]["data"]) for e in built for r in e["Records"]]
    deployment = Deployment("bench")

    recorder = _Recorder()
    with _captured_logs("INFO") as info:
        cpu = _run(built, recorder)
    invocations = len(built)
    # single-record invocations: what an invocation costs whatever its size
    singles = events(max(10, messages // 10), 1, seed + 1)
    with _captured_logs("INFO"):
        cpu_single = _run(singles, _Recorder())
    # cpu(n) = per_invocation + n * per_message, from invocations of `batch` records and of one
    single = cpu_single / len(singles)
    per_message = max(0.0, (cpu / invocations - single) / (batch - 1)) if batch > 1 else cpu / messages
    per_invocation = max(0.0, single - per_message)
    with _captured_logs("DEBUG") as debug:
        _run(built, _Recorder())

    platform = len(_PLATFORM_LINES.format(id=uuid.uuid4()).encode()) + 3 * _EVENT_OVERHEAD
    info_text = info.getvalue()
    series = {
        (metric["Name"], tuple(sorted(line[k] for d in directive["Dimensions"] for k in d)))
        for line in map(orjson.loads, filter(None, info_text.splitlines()))
        if "_aws" in line
        for directive in line["_aws"]["CloudWatchMetrics"]
        for metric in directive["Metrics"]
    }
    raw = info_text.encode()

    routed = {c.name: deployment.stream(c.name) for c in RDSS.channels_of("routed")}
    routed_records = sum(recorder.records[s] for s in routed.values())
    ledger_ids = [len(i.encode()) for _, ids in recorder.ledgers for i in ids]
    ledger_base = sum(size for size, _ in recorder.ledgers) - sum(ledger_ids)

    entries = [frame(p, i).rstrip(b"\n") for i, p in enumerate(payloads)]
    gzipped: dict[int, float] = {}
    for size in MEMBER_SIZES:
        total = sum(len(archive.member(entries[s : s + size])) for s in range(0, len(entries), size))
        gzipped[size] = round(total / len(entries), 1)
    started = time.process_time()
    for s in range(0, len(payloads), batch):
        archive.member(frame(p, s + i).rstrip(b"\n") for i, p in enumerate(payloads[s : s + batch]))
    archive_cpu = (time.process_time() - started) / len(payloads)

    description = "messageBody.objectValue: 4 is greater than the maximum of 3"
    decorated = [len(decorate(p, "GENERR001", description)) - len(p) for p in payloads[:200]]
    return Figures(
        input_bytes=round(sum(map(len, payloads)) / len(payloads), 1),
        routed_bytes=round(sum(recorder.record_bytes[s] for s in routed.values()) / routed_records, 1),
        routed_shares={c: round(recorder.records[s] / messages, 4) for c, s in routed.items()},
        reply_share=round(recorder.lookups / messages, 4),
        decoration_bytes=round(sum(decorated) / len(decorated), 1),
        claim_item_bytes=round(sum(recorder.claims) / len(recorder.claims), 1),
        claim_write_units=sum(math.ceil(size / WRITE_UNIT_BYTES) for size in recorder.claims) / len(recorder.claims),
        ledger_base_bytes=round(ledger_base / len(recorder.ledgers), 1),
        ledger_record_bytes=round(sum(ledger_ids) / len(ledger_ids), 1),
        reply_read_units=0.5,
        broker_cpu_per_message=round(per_message, 7),
        broker_cpu_per_invocation=round(per_invocation, 6),
        log_bytes_per_invocation=round(_log_bytes(info_text) / invocations + platform, 1),
        debug_log_bytes_per_message=round(max(0, _log_bytes(debug.getvalue()) - _log_bytes(info_text)) / messages, 1),
        log_compression=round(len(gzip.compress(raw, 6)) / len(raw), 3),
        metric_series=len(series),
        archive_entry_bytes=round(sum(len(e) + 1 for e in entries) / len(entries), 1),  # with its newline
        archive_gzip_bytes=gzipped,
        archive_cpu_per_entry=round(archive_cpu, 7),
        curated_bytes=round(curated_bytes(payloads) or MEASURED.curated_bytes, 1),
        sample=messages,
    )


class _CallTimer:
    """Times every data-plane call a botocore client makes (before-call to after-call)."""

    def __init__(self) -> None:
        self.seconds: list[float] = []
        self._started: dict[int, float] = {}

    def attach(self, client: Any) -> Any:
        client.meta.events.register("before-call.*.*", self._before)
        client.meta.events.register("after-call.*.*", self._after)
        return client

    def _before(self, context: dict[str, Any], **_: Any) -> None:
        self._started[id(context)] = time.perf_counter()

    def _after(self, context: dict[str, Any], **_: Any) -> None:
        started = self._started.pop(id(context), None)
        if started is not None:
            self.seconds.append(time.perf_counter() - started)


def call_latency(messages: int = 1000, *, batch: int = 100, seed: int = 13) -> tuple[float, int]:
    """The median (p50) seconds of an AWS call the real broker makes, and how many were timed:
    ``messages`` workload messages through the broker handler against the embedded emulator (as
    ``rdss bench broker`` runs it), every PutItem, PutRecords and BatchGetItem
    timed through botocore, HTTP included. A first batch warms the clients up, untimed."""
    from rdss.local.emulator import provision, start_embedded

    deployment = Deployment("bench")
    names = from_environment(deployment.environment_variables())
    endpoint = start_embedded()
    timer = _CallTimer()
    try:
        provision(endpoint, deployment)
        kinesis = timer.attach(endpoint.client("kinesis"))
        dynamodb = timer.attach(endpoint.client("dynamodb"))
        with _captured_logs("INFO"):
            handler = KinesisEventSourceMappingHandler(Broker(names=names, dynamodb=dynamodb), kinesis=kinesis)
            handler({"Records": []}, None)
            for event in events(batch, batch, seed=seed + 1, first=messages):
                handler(event, None)
            timer.seconds.clear()
            for event in events(messages, batch, seed):
                if handler(event, None)["batchItemFailures"]:
                    raise AssertionError("the broker failed records on the embedded emulator")
            handler.close()
    finally:
        endpoint.stop()
    if not timer.seconds:
        raise AssertionError("the broker made no AWS call")
    return statistics.median(timer.seconds), len(timer.seconds)
