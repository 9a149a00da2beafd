"""Redrive: put the batches Lambda gave up on back on their channel (``rdss redrive``).

When a processor's event source mapping gives up on a batch (retries exhausted, records too
old), Lambda parks an invocation record in the processor's SQS on-failure queue: a *pointer* -
stream, shard, first and last sequence number - not the records. :func:`redrive` follows each
pointer:

1. it reads the records from the stream (``AT_SEQUENCE_NUMBER`` from the first, up to the last);
   a range the stream no longer holds (past its retention) is looked for in the audit archive;
2. it puts them back on the same channel, each under the partition key it was put with and with
   an explicit hash key inside its shard's range, so they land on the shard they came from;
3. it deletes the pointer only once every record was accepted (PutRecords acknowledged them);
   a pointer it could not honour stays in the queue, and the report says why.

A record put back is a new record: the broker judges every record of ``input`` by its content
and knows it by the identity Kinesis gave it, never by anything in the record (a mark in the
partition key would be a producer's to forge too). What the parked record's delivery left in
the broker's Local Data Repository is settled first (:mod:`rdss.processors.redrive_claims`): a record
whose outputs went out (its claim's batch ledger lists it) is not put back; a message claimed
by the parked record but never sent has that claim released, so the new record is not dropped
as its duplicate; and each record put back is noted with the record it became. So a batch whose
records had partly gone out, or a redrive run twice, routes nothing twice. (The sequencer needs
none of this: it stages parts by position, and a part that arrives again changes nothing.)

A range past the stream's retention is looked for in the audit archive. Its entries carry each
record's identity (:mod:`rdss.archive.entries`): the entries of the range's shard and sequence numbers
are its records, exactly. An archive written before entries holds bare bytes, matched through
the Local Data Repository: an archived message claimed by a record of the range is that record
(settled as that record); a message valid on arrival that nobody claimed was never processed
(put back as it is). Legacy records with no trustworthy messageId cannot be matched
and are reported, as is a range older than the repository's memory, where "nobody claimed it"
no longer means "never processed".

The archiver's parked batches are records that were never archived: they are not put back on
their channel (its consumers would get them twice) but archived now, with their identities,
through the channel's delivery stream (:meth:`rdss.archive.ArchiverApp.write`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import KW_ONLY, InitVar, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from rdss.archive import entries as archive
from rdss.aws.failures import aws_code
from rdss.aws.putrecords import PutRecordsBatcher, Record
from rdss.deployment.topology import RDSS, Deployment
from rdss.model.retry import Backoff
from rdss.model.validation import validate
from rdss.processors.parked import Pointer
from rdss.processors.redrive_claims import RedriveClaims
from rdss.repository.dynamodb import LocalDataRepository
from rdss.repository.entries import RETENTION_SECONDS, claimable_id

_log = logging.getLogger(__name__)

#: Long enough to fetch and put back one batch; a pointer not finished by then shows again.
VISIBILITY_SECONDS = 300
#: Firehose delivers a record up to 15 minutes after it arrived: the archive hours to search.
_ARCHIVE_LAG = timedelta(hours=1)
#: Stop trusting "unclaimed" this long before the repository forgets claims.
_CLAIM_MARGIN = timedelta(hours=1)


@dataclass(frozen=True)
class Found:
    """A record to put back: its bytes and the stream record it was (None: not known, from an
    archive written before entries)."""

    data: bytes
    identity: str | None
    #: The stream record as it was read (the archiver frames it again so).
    partition_key: str | None = None
    sequence_number: str | None = None
    arrival: datetime | None = None


@dataclass
class BatchOutcome:
    """What became of one pointer."""

    processor: str
    pointer: Pointer | None
    #: The logical channel the records were put back on.
    channel: str | None = None
    #: Records found (and, unless a dry run, put back).
    records: int = 0
    #: Where they were found: ``stream`` or ``archive``.
    source: str = ""
    #: Records found but not put back: their outputs went out, or a run put them back before.
    left: int = 0
    #: Why the pointer could not be honoured in full (it stays in the queue); None when it was.
    problem: str | None = None
    #: The SQS message id, for a message that is not a pointer at all.
    message_id: str = ""
    found: list[Found] = field(default_factory=list, repr=False)

    @property
    def recovered(self) -> bool:
        return self.problem is None

    def line(self, dry_run: bool) -> str:
        what = self.pointer.describe() if self.pointer else f"queue message {self.message_id}"
        archiving = self.processor == "archiver"
        if self.problem is not None:
            done = f"; {self.records} record(s) {'archived' if archiving else 'put back'}"
            done = done if self.records and not dry_run else ""
            return f"{self.processor}: NOT RECOVERED {what}: {self.problem}{done}"
        verb = ("would archive" if dry_run else "archived") if archiving else "put back"
        verb = "would put back" if dry_run and verb == "put back" else verb
        left = f" ({self.left} of them processed or put back before: left alone)" if self.left else ""
        back = f"{self.records - self.left} record(s) of {self.channel}"
        return f"{self.processor}: {verb} {back} from the {self.source}{left}: {what}"


@dataclass
class RedriveReport:
    dry_run: bool
    batches: list[BatchOutcome] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Every pointer was honoured (or, in a dry run, could be)."""
        return all(b.recovered for b in self.batches)

    @property
    def records(self) -> int:
        return sum(b.records for b in self.batches if b.recovered)

    def lines(self) -> list[str]:
        lines = [b.line(self.dry_run) for b in self.batches]
        good = [b for b in self.batches if b.recovered]
        bad = len(self.batches) - len(good)
        verb = "would redrive" if self.dry_run else "redrove"
        summary = f"{verb} {len(good)} parked batch(es), {self.records} record(s)"
        if bad:
            summary += f"; {bad} batch(es) NOT recovered (left in the queue)"
        if not self.batches:
            summary = "no parked batches"
        return [*lines, summary]


@dataclass(eq=False)
class Redriver:
    """Follows the pointers in a deployment's on-failure queues (see the module docstring)."""

    deployment: Deployment
    _: KW_ONLY
    sqs: Any
    kinesis: Any
    s3: Any = None
    dynamodb: Any = None
    #: Firehose, where the archiver's parked batches are archived (rdss.archive).
    firehose: Any = None
    #: The retries of records put back (default: the batcher's own).
    backoff: InitVar[Backoff | None] = None
    clock: Callable[[], float] = time.time
    wait_seconds: int = 1
    batcher: PutRecordsBatcher = field(init=False)

    def __post_init__(self, backoff: Backoff | None) -> None:
        self.batcher = PutRecordsBatcher(self.kinesis, backoff=backoff) if backoff else PutRecordsBatcher(self.kinesis)

    def processors(self) -> list[str]:
        """Processors with an event source mapping (and so an on-failure queue of pointers)."""
        return [p.name for p in self.deployment.topology.processors if p.sources]

    def run(self, processors: Sequence[str] | None = None, *, dry_run: bool = False) -> RedriveReport:
        """Redrive every pointer of these processors' queues (default: all of them).

        Raises:
            LookupError: a processor is unknown or its on-failure queue does not exist.
        """
        report = RedriveReport(dry_run)
        for name in processors or self.processors():
            if name not in self.processors():
                raise LookupError(f"{name!r} is not a processor with an event source mapping")
            queue = self._queue_url(name)
            messages = list(self._messages(queue))
            outcomes: list[tuple[dict[str, Any], BatchOutcome]] = []
            trimmed: list[BatchOutcome] = []
            for message in messages:
                try:
                    outcome = self._from_stream(Pointer.parse(name, message))
                except ValueError as error:
                    outcome = BatchOutcome(name, None, problem=str(error), message_id=str(message.get("MessageId")))
                outcomes.append((message, outcome))
                if outcome.source == "archive":
                    trimmed.append(outcome)
            if trimmed:
                self._from_archive(trimmed)
            archives = bool(self.deployment.topology.processor(name).archives)
            for _, outcome in outcomes:
                if outcome.found and archives and not dry_run:
                    self._archive(outcome)
                elif outcome.found and not archives:
                    self._put_back(outcome, dry_run=dry_run)
                if outcome.records == 0 and outcome.problem is None and outcome.pointer is not None:
                    outcome.problem = "no records found"
                report.batches.append(outcome)
            kept = [m for m, o in outcomes if not (o.recovered and not dry_run)]
            for message, outcome in outcomes:
                if outcome.recovered and not dry_run:
                    self.sqs.delete_message(QueueUrl=queue, ReceiptHandle=message["ReceiptHandle"])
            # visible again at once (only now: while the queue was being read they would have come
            # round again), for the next run and for the parked-batches alarm
            for message in kept:
                self._release(queue, message)
        return report

    # -- the queue -----------------------------------------------------------------------------
    def _queue_url(self, processor: str) -> str:
        name = self.deployment.on_failure_queue(processor)
        try:
            url: str = self.sqs.get_queue_url(QueueName=name)["QueueUrl"]
        except ClientError as error:
            code = aws_code(error)
            if "NonExistentQueue" in code or "QueueDoesNotExist" in code:
                raise LookupError(
                    f"no on-failure queue {name} (is {self.deployment.environment!r} deployed?)"
                ) from error
            raise
        return url

    def _messages(self, queue: str) -> Iterable[dict[str, Any]]:
        """Every message of the queue once (each hidden while it is being handled)."""
        seen: set[str] = set()
        while True:
            response = self.sqs.receive_message(
                QueueUrl=queue,
                MaxNumberOfMessages=10,
                VisibilityTimeout=VISIBILITY_SECONDS,
                WaitTimeSeconds=self.wait_seconds,
            )
            fresh = [m for m in response.get("Messages", []) if m["MessageId"] not in seen]
            if not fresh:
                return
            for message in fresh:
                seen.add(message["MessageId"])
                yield message

    def _release(self, queue: str, message: Mapping[str, Any]) -> None:
        try:
            self.sqs.change_message_visibility(
                QueueUrl=queue, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
            )
        except ClientError:  # it shows again when its visibility timeout ends anyway
            _log.warning("could not make queue message %s visible again", message.get("MessageId"))

    # -- one pointer ---------------------------------------------------------------------------
    def _from_stream(self, pointer: Pointer) -> BatchOutcome:
        """The batch's records from its stream; ``source`` is ``archive`` when the stream no
        longer holds the start of the range (past its retention)."""
        outcome = BatchOutcome(pointer.processor, pointer, message_id=pointer.message_id)
        outcome.channel = self.deployment.channel_of_stream(pointer.stream)
        if outcome.channel is None:
            outcome.problem = f"{pointer.stream} is not a channel of {self.deployment.environment!r}"
            return outcome
        try:
            iterator = self.kinesis.get_shard_iterator(
                StreamName=pointer.stream,
                ShardId=pointer.shard_id,
                ShardIteratorType="AT_SEQUENCE_NUMBER",
                StartingSequenceNumber=pointer.start,
            )["ShardIterator"]
        except ClientError as error:
            code = aws_code(error)
            if code in ("ResourceNotFoundException", "InvalidArgumentException"):
                outcome.source = "archive"  # the shard (or that position in it) is past retention
                return outcome
            raise
        records: list[dict[str, Any]] = []
        end = int(pointer.end)
        while iterator:
            response = self.kinesis.get_records(ShardIterator=iterator, Limit=1000)
            batch = response["Records"]
            records.extend(r for r in batch if pointer.covers(r["SequenceNumber"]))
            if any(int(r["SequenceNumber"]) >= end for r in batch):
                break
            if not batch and not response.get("MillisBehindLatest"):
                break  # read to the end of what the shard holds
            iterator = response.get("NextShardIterator")
        if not records or records[0]["SequenceNumber"] != pointer.start:
            outcome.source = "archive"  # trimmed: the start is gone
            return outcome
        outcome.source = "stream"
        outcome.found = [
            Found(
                r["Data"],
                f"{pointer.shard_id}/{r['SequenceNumber']}",
                r["PartitionKey"],
                r["SequenceNumber"],
                r.get("ApproximateArrivalTimestamp"),
            )
            for r in records
        ]
        outcome.records = len(outcome.found)
        if len(records) != pointer.size:
            outcome.problem = f"the stream holds {len(records)} of the batch's {pointer.size} record(s)"
        return outcome

    def _from_archive(self, outcomes: list[BatchOutcome]) -> None:
        """Find the records of batches past the stream's retention in the audit archive.

        An archived message claimed by a record of a batch's range is that record. A message
        valid when it arrived that nobody claimed was never processed, but which batch it was in
        cannot be told: such messages are put back, and the batches short of records count as
        recovered only if there are as many of them as those batches miss together.
        """
        searchable: list[BatchOutcome] = []
        for outcome in outcomes:
            why = self._unsearchable(outcome)
            if why is None:
                searchable.append(outcome)
            else:
                outcome.problem = f"the stream no longer holds these records and {why}"
        if not searchable:
            return
        assert self.dynamodb is not None
        lines: dict[bytes, None] = {}
        objects: set[str] = set()
        seen = archive.Identities()
        for outcome in searchable:
            assert outcome.pointer is not None
            assert outcome.channel is not None
            prefix = self.deployment.topology.channel(outcome.channel).archive or ""
            for entry in archive.unique(self._archived(prefix, outcome.pointer, objects), seen):
                if entry.legacy:
                    lines[entry.payload] = None
                    continue
                for other in searchable:  # an entry names its record: in a range, or in none
                    assert other.pointer is not None
                    if entry.stream == other.pointer.stream and other.pointer.covers_record(entry.record or ""):
                        other.found.append(Found(entry.payload, entry.record, entry.partition_key))
        ids = {line: claimable_id(line) for line in lines}
        claims = LocalDataRepository(self.dynamodb, self.deployment.table("messages")).get(
            [i for i in ids.values() if i]
        )
        arrived = min(o.pointer.first_arrival for o in searchable if o.pointer and o.pointer.first_arrival)
        unclaimed: list[bytes] = []
        for line, named in ids.items():
            claim = claims.get(named or "")
            if claim is None:
                if named is not None and validate(line, now=arrived).valid:
                    unclaimed.append(line)  # valid when it arrived and never claimed: never processed
                continue
            claimed_by = str(claim.get("claimedBy", ""))
            for outcome in searchable:
                assert outcome.pointer is not None
                if outcome.pointer.covers_record(claimed_by):
                    outcome.found.append(Found(line, claimed_by))
        short = [o for o in searchable if o.pointer is not None and len(o.found) < o.pointer.size]
        missing = sum(o.pointer.size - len(o.found) for o in short if o.pointer is not None)
        if unclaimed:  # put back with the first batch short of records (or the first of all)
            (short or searchable)[0].found.extend(Found(line, None) for line in unclaimed)
        for outcome in searchable:
            outcome.records = len(outcome.found)
        if len(unclaimed) < missing:
            for outcome in short:
                assert outcome.pointer is not None
                outcome.problem = (
                    f"the stream no longer holds these records; the audit archive matched "
                    f"{len(unclaimed)} unprocessed record(s) to the {missing} missing from "
                    f"{len(short)} batch(es) (a record with no valid messageId cannot be matched)"
                )

    def _unsearchable(self, outcome: BatchOutcome) -> str | None:
        """Why the archive cannot stand in for the stream for this batch, or None if it can."""
        pointer, channel = outcome.pointer, outcome.channel
        assert pointer is not None
        assert channel is not None
        spec = self.deployment.topology.channel(channel)
        if spec.kind != "input" or spec.archive is None:
            return f"the {channel} channel is not archived"
        if pointer.first_arrival is None:
            return "the pointer gives no arrival time to find them by in the archive"
        now = datetime.fromtimestamp(self.clock(), UTC)
        if now - pointer.first_arrival > timedelta(seconds=RETENTION_SECONDS) - _CLAIM_MARGIN:
            return (
                "they are older than the Local Data Repository's claims, so the archive cannot tell "
                "which of its records were processed"
            )
        if self.s3 is None or self.dynamodb is None:
            return "there is no S3 and DynamoDB client to search the archive with"
        return None

    def _archived(self, prefix: str, pointer: Pointer, read: set[str]) -> list[archive.Entry]:
        """The entries of the archive objects delivered in the hours the batch could be in (each
        object once: ``read`` names those already read)."""
        assert pointer.first_arrival is not None
        hour = pointer.first_arrival.replace(minute=0, second=0, microsecond=0)
        last = (pointer.last_arrival or pointer.first_arrival) + _ARCHIVE_LAG
        bucket = self.deployment.bucket("audit")
        lines: list[archive.Entry] = []
        while hour <= last:
            paginator = self.s3.get_paginator("list_objects_v2")
            for page in paginator.paginate(Bucket=bucket, Prefix=archive.hour_prefix(prefix, hour)):
                for entry in page.get("Contents", []):
                    if entry["Key"] in read:
                        continue
                    read.add(entry["Key"])
                    body = self.s3.get_object(Bucket=bucket, Key=entry["Key"])["Body"].read()
                    lines.extend(archive.read(body))
            hour += timedelta(hours=1)
        return lines

    def _put_back(self, outcome: BatchOutcome, *, dry_run: bool) -> None:
        """Settle the records' claims (the broker's channel only), put back those that go back
        and note what each became; a refusal becomes the outcome's problem."""
        pointer, channel = outcome.pointer, outcome.channel
        assert pointer is not None
        assert channel is not None
        going, claims = list(enumerate(outcome.found)), None
        if self.deployment.topology.channel(channel).kind == "input":
            if self.dynamodb is None:
                outcome.problem = "there is no DynamoDB client to settle the broker's claims with"
                return
            claims = RedriveClaims(self.dynamodb, self.deployment.table("messages"), clock=self.clock)
            try:
                back = claims.settle([(f.identity, f.data) for f in outcome.found], dry_run=dry_run)
            except (ClientError, BotoCoreError) as error:
                outcome.problem = f"reading or releasing the broker's claims failed: {error}"
                return
            going = [(i, f) for (i, f), goes in zip(going, back, strict=True) if goes]
            outcome.left = len(outcome.found) - len(going)
        if dry_run:
            return
        stream = self.deployment.stream(channel)
        hash_key = self._shard_hash_key(stream, pointer.shard_id)
        records = [
            Record(
                stream,
                item.data,
                item.partition_key or _fresh_key(item.data, index),
                explicit_hash_key=hash_key,
                token=item.identity,
            )
            for index, item in going
        ]
        try:
            report = self.batcher.put(records)
        except (ClientError, BotoCoreError) as error:
            outcome.problem = f"putting the records back failed: {error}"
            return
        if report.failed:
            first = report.failed[0]
            outcome.problem = (
                f"{len(report.failed)} of {len(records)} record(s) not accepted by {stream} "
                f"({first.error_code}: {first.error_message})"
            )
        if claims is None:
            return
        moves = [(d.record.token, f"{d.shard_id}/{d.sequence_number}") for d in report.delivered if d.record.token]
        try:
            claims.note(moves)
        except (ClientError, BotoCoreError) as error:
            outcome.problem = outcome.problem or f"noting the records put back failed: {error}"

    def _archive(self, outcome: BatchOutcome) -> None:
        """Archive the records of an archiver's parked batch now, each with its identity."""
        from rdss.archive.app import rearchive

        assert outcome.pointer is not None
        records = [(f.data, f.sequence_number or "", f.partition_key, f.arrival) for f in outcome.found]
        try:
            outcome.problem = rearchive(
                self.deployment, self.firehose, self.s3, outcome.pointer.stream, outcome.pointer.shard_id, records
            )
        except (ClientError, BotoCoreError) as error:
            outcome.problem = f"archiving the records failed: {error}"

    def _shard_hash_key(self, stream: str, shard_id: str) -> str | None:
        """A hash key inside the shard's range, so put-back records land where they were."""
        try:
            for shard in self.kinesis.list_shards(StreamName=stream)["Shards"]:
                if shard["ShardId"] == shard_id:
                    return str(shard["HashKeyRange"]["StartingHashKey"])
        except ClientError:
            pass
        return None  # the shard is gone: any open shard will do


def _fresh_key(payload: bytes, index: int) -> str:
    return claimable_id(payload) or f"redrive-{index:08d}"


def redrive(
    deployment: Deployment,
    *,
    processors: Sequence[str] | None = None,
    dry_run: bool = False,
    clients: Callable[[str], Any] | None = None,
) -> RedriveReport:
    """Redrive a deployment's parked batches, for operators' scripts (what ``rdss redrive`` runs).

    Args:
        deployment: whose on-failure queues, streams, archive and repository to use.
        processors: whose queues (default: every processor with an event source mapping).
        dry_run: find the records, put nothing back, delete nothing.
        clients: service name -> boto3 client (default: :func:`rdss.aws.clients.client`, which honours
            ``AWS_ENDPOINT_URL`` - the embedded emulator, LocalStack or AWS).

    Raises:
        LookupError: a processor is unknown or its on-failure queue does not exist.
    """
    if clients is None:
        from rdss.aws.clients import client

        clients = client
    return Redriver(
        deployment,
        sqs=clients("sqs"),
        kinesis=clients("kinesis"),
        s3=clients("s3"),
        dynamodb=clients("dynamodb"),
        firehose=clients("firehose"),
    ).run(processors, dry_run=dry_run)


def deployed_names(deployment: Deployment, lambda_client: Any) -> Deployment:
    """``deployment`` with the bucket names its broker function was given: CloudFormation names
    the buckets on AWS, so they are read from the function's variables; without a function (the
    embedded emulator) the topology's own names stand."""
    try:
        configuration = lambda_client.get_function_configuration(FunctionName=deployment.function("broker"))
    except (ClientError, BotoCoreError):
        return deployment
    variables = (configuration.get("Environment") or {}).get("Variables") or {}
    buckets = {
        b.name: variables[f"RDSS_BUCKET_{b.name.upper()}"]
        for b in RDSS.buckets
        if f"RDSS_BUCKET_{b.name.upper()}" in variables
    }
    return Deployment(deployment.environment, prefix=deployment.prefix, bucket_names=buckets)
