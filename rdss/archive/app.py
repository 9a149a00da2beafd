"""The archiver: an AMGI app that keeps every record of the archived channels in the archive.

Per batch (one shard's records of ``input``, ``invalid`` or ``error``):

1. frame every record as an archive entry (:func:`rdss.archive.entries.frame`): its exact bytes, the
   stream, shard, sequence number, partition key and arrival time the event source mapping
   gives;
2. pack the entries into gzip members of at most 1,000 KiB (:func:`rdss.archive.entries.pack`), each
   one Firehose record, so Firehose bills compressed bytes and its 5 KB rounding per record is
   lost in the size of each;
3. put them on the channel's Direct PUT delivery stream with PutRecordBatch, retrying only the
   records that failed; a member that does not fit one Firehose record even alone (a single
   large record that does not compress) is stored by the archiver itself, an object of its own
   named as Firehose names objects, under the channel's archive prefix;
4. ack every record whose member went out, nack the others (ReportBatchItemFailures): the
   mapping delivers them again, and readers count a record archived twice once (its identity).

Content never fails a batch: any bytes frame. Only infrastructure failures nack.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Self

from rdss.amgi.batch import BatchApp, receive_batch
from rdss.amgi.types import Receive, Send
from rdss.archive import entries as archive
from rdss.archive.delivery import FirehoseWriter, ObjectStore
from rdss.deployment.topology import RDSS, Deployment, Resolved, Topology, from_environment
from rdss.observability.powertools import Tally, emit_counts, logger, tracer


class ArchiverApp(BatchApp):
    """Frames the records of the archived channels and writes them to their delivery streams."""

    processor = "archiver"

    def __init__(
        self,
        *,
        names: Resolved,
        firehose: Any,
        s3: Any,
        topology: Topology = RDSS,
        writer: FirehoseWriter | None = None,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        level: int = archive.COMPRESSION_LEVEL,
    ) -> None:
        """
        Args:
            firehose: a Firehose client (PutRecordBatch), or anything with its ``put_record_batch``
                (the local runtime's delivery streams).
            s3: stores a member too large for one Firehose record.
        """
        archived = [c.name for c in topology.archived()]
        #: stream name -> the channel it is
        self.channels = {names.stream(channel): channel for channel in archived}
        self.delivery_streams = {channel: names.delivery_stream(channel) for channel in archived}
        self.stores = {
            channel: ObjectStore(
                s3,
                names.bucket(topology.archive_bucket(channel)),
                topology.channel(channel).archive or "",
                names.delivery_stream(channel),
            )
            for channel in archived
        }
        self.writer = writer or FirehoseWriter(firehose)
        self.now = now
        self.level = level

    @classmethod
    def from_environment(cls) -> Self:
        """The archiver as the CDK app (or the local runtime) deployed it."""
        from rdss.aws.clients import lazy_client

        # made when first used, not at import: see rdss.aws.clients.LazyClient
        return cls(names=from_environment(), firehose=lazy_client("firehose"), s3=lazy_client("s3"))

    @tracer.capture_method
    async def handle_batch(self, scope: Any, receive: Receive, send: Send) -> None:
        events = await receive_batch(receive)
        started = time.perf_counter()
        stream = str(scope.get("address", ""))
        channel = self.channels.get(stream)
        if channel is None:  # a mapping wired to a stream that is not archived: say so, lose nothing
            for event in events:
                await send({"type": "message.nack", "id": event["id"], "message": f"{stream} is not archived"})
            logger.error("records of a stream that is not archived", extra={"address": stream})
            return
        lines = [_frame(stream, event) for event in events]
        members = archive.pack(lines, level=self.level)
        failed = self.deliver(channel, members)
        tally = Tally()
        for index, event in enumerate(events):
            if index in failed:
                tally.add("outcome", "nacked")
                await send({"type": "message.nack", "id": event["id"], "message": failed[index]})
            else:
                tally.add("outcome", "archived")
                await send({"type": "message.ack", "id": event["id"]})
        emit_counts(self.processor, tally)
        logger.info(
            "batch archived",
            extra={
                "address": stream,
                "records": len(events),
                "members": len(members),
                "entryBytes": sum(len(line) + 1 for line in lines),
                "gzipBytes": sum(len(m.data) for m in members),
                "nacked": len(failed),
                "milliseconds": round((time.perf_counter() - started) * 1000, 1),
            },
        )

    def write(self, stream: str, lines: list[bytes]) -> dict[int, str]:
        """Archive entry ``lines`` of a stream now (``rdss redrive`` re-archives a parked batch so);
        the entries (by index) that did not go, and why."""
        return self.deliver(self.channels[stream], archive.pack(lines, level=self.level))

    def deliver(self, channel: str, members: list[archive.Member]) -> dict[int, str]:
        """Write the members; the records (by index in the batch) whose member did not go, and why."""
        failed: dict[int, str] = {}
        regular = [m for m in members if not m.oversize]
        for member in members:
            if not member.oversize:
                continue
            try:
                key = self.stores[channel].put(member.data, self.now())
            except Exception as error:  # S3 refused or is unreachable: the mapping retries the record
                failed.update(dict.fromkeys(range(member.start, member.end), f"archive object not written: {error}"))
            else:
                logger.info("an entry too large for one Firehose record stored as its own object", extra={"key": key})
        undelivered = self.writer.put(self.delivery_streams[channel], [m.data for m in regular])
        for miss in undelivered:
            member = regular[miss.index]
            why = f"not archived ({miss.error_code}: {miss.error_message}); retry"
            failed.update(dict.fromkeys(range(member.start, member.end), why))
        return failed


def _frame(stream: str, event: dict[str, Any]) -> bytes:
    binding = event.get("bindings", {}).get("kinesis", {})
    return archive.frame(
        event.get("payload") or b"",
        stream=stream,
        shard=str(binding.get("shard_id") or ""),
        sequence_number=str(binding.get("sequence_number") or event["id"]),
        partition_key=binding.get("partition_key"),
        arrival=binding.get("approximate_arrival_timestamp"),
    )


def rearchive(
    deployment: Deployment,
    firehose: Any,
    s3: Any,
    stream: str,
    shard: str,
    records: list[tuple[bytes, str, str | None, datetime | None]],
) -> str | None:
    """Archive records of one shard now (``rdss redrive`` of the archiver's parked batches):
    ``(payload, sequence number, partition key, arrival)`` each. None when all went, else why not."""
    names = from_environment(deployment.environment_variables(), deployment.topology)
    app = ArchiverApp(names=names, firehose=firehose, s3=s3, topology=deployment.topology)
    lines = [
        archive.frame(data, stream=stream, shard=shard, sequence_number=sequence, partition_key=key, arrival=arrival)
        for data, sequence, key, arrival in records
    ]
    failed = app.write(stream, lines)
    if failed:
        return f"{len(failed)} of {len(lines)} record(s) not archived: {next(iter(failed.values()))}"
    return None
