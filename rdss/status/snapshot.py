"""A deployment's state at a glance (``rdss status``), read from the deployment itself.

What an operator asks first, on one screen: how much each channel carried in the last hour and
day; how far behind each consumer group is (the age of the oldest record it has not read yet);
what reached ``invalid`` and ``error``, by error code; the batches parked for ``rdss redrive``;
the sequences still open; the vendors and what they may do; the newest archive object and the
records on ``input`` not archived since; the alarms in ALARM; the replays (``rdss replay``) and
their progress.

Everything is read where the deployment keeps it - the streams, the ``checkpoints`` and
``sequences`` tables, the on-failure queues, IAM, the archive buckets, CloudWatch - the same on
the local runtime, LocalStack and AWS. Counting a channel reads its records of the last day, at
most ``limit`` a channel (the count then says it is a floor). A source that cannot be read is
named in :attr:`Status.unread`, never a reason to fail the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from botocore.exceptions import BotoCoreError, ClientError

from rdss.archive import entries as archive
from rdss.deployment.topology import Deployment
from rdss.model import timestamps

#: The most records read from one channel to count it (a busy channel's count is a floor).
DEFAULT_LIMIT = 100_000

_HOUR = timedelta(hours=1)
_DAY = timedelta(days=1)
#: The partition key a consumer's move carries (rdss.model.rejection.moved_key): not the broker's verdict.
_MOVED = "moved:"


@dataclass
class ChannelCounts:
    """Records one channel received in the last hour and the last day."""

    channel: str
    stream: str
    last_hour: int = 0
    last_day: int = 0
    #: The count stopped at the limit: there were at least this many.
    capped: bool = False
    #: When the newest record arrived.
    newest: datetime | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "channel": self.channel,
            "stream": self.stream,
            "lastHour": self.last_hour,
            "lastDay": self.last_day,
            "capped": self.capped,
            "newest": timestamps.format(self.newest) if self.newest else None,
        }


@dataclass
class GroupLag:
    """How far one consumer group is behind on one channel."""

    group: str
    channel: str
    #: Shards (partitions) the group has a checkpoint for.
    shards: int
    #: Age in seconds of the oldest record the group has not read yet (0: caught up).
    oldest_unread_seconds: float
    #: Workers holding its leases now.
    owners: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "channel": self.channel,
            "shards": self.shards,
            "oldestUnreadSeconds": round(self.oldest_unread_seconds, 1),
            "owners": list(self.owners),
        }


@dataclass
class Status:
    """One deployment's state at one moment (see the module docstring)."""

    environment: str
    at: datetime
    channels: list[ChannelCounts] = field(default_factory=list)
    lag: list[GroupLag] = field(default_factory=list)
    #: channel (invalid, error) -> error code -> records in the last day (the broker's and the
    #: sequencer's moves; consumers' own moves are counted apart, under ``moved``)
    codes: dict[str, dict[str, int]] = field(default_factory=dict)
    #: channel -> records consumers moved there in the last day
    moved: dict[str, int] = field(default_factory=dict)
    #: processor -> batches parked in its on-failure queue
    parked: dict[str, int] = field(default_factory=dict)
    #: open sequences: how many, and the age in seconds of the oldest
    open_sequences: int = 0
    oldest_sequence_seconds: float | None = None
    #: vendor -> what its role may do: the channels it may put on ("produces") and read ("consumes")
    vendors: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    #: bucket -> its newest archive object (key, written)
    archives: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: records on ``input`` that arrived after the newest audit object was written
    archive_backlog: int | None = None
    alarms: list[str] = field(default_factory=list)
    #: the replays (``rdss replay``), as :func:`replay_rows` reads them
    replays: list[dict[str, Any]] = field(default_factory=list)
    #: sources that could not be read, and why
    unread: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "environment": self.environment,
            "at": timestamps.format(self.at),
            "channels": [c.as_dict() for c in self.channels],
            "lag": [g.as_dict() for g in self.lag],
            "errorCodes": self.codes,
            "movedByConsumers": self.moved,
            "parkedBatches": self.parked,
            "openSequences": {
                "count": self.open_sequences,
                "oldestSeconds": None if self.oldest_sequence_seconds is None else round(self.oldest_sequence_seconds),
            },
            "vendors": self.vendors,
            "archives": self.archives,
            "archiveBacklog": self.archive_backlog,
            "alarms": self.alarms,
            "replays": self.replays,
            "unread": self.unread,
        }


@dataclass(frozen=True)
class Record:
    """One stream record as the snapshot reads it: when it arrived, its bytes, its partition key."""

    arrived: datetime | None
    data: bytes
    partition_key: str


class Snapshot:
    """Reads one deployment's state (:meth:`take`)."""

    def __init__(
        self,
        deployment: Deployment,
        client: Callable[[str], Any],
        *,
        limit: int = DEFAULT_LIMIT,
        now: Callable[[], datetime] = timestamps.now,
    ) -> None:
        self.deployment = deployment
        self.client = client
        self.limit = limit
        self.now = now
        #: arrivals of the records read from ``input``: what the archive may not hold yet
        self._inputs: list[datetime] | None = None

    def take(self) -> Status:
        status = Status(self.deployment.environment, self.now())
        self._inputs = None
        steps: list[tuple[str, Callable[[Status], None]]] = [
            ("channels", self._channels),
            ("lag", self._lag),
            ("parked", self._parked),
            ("sequences", self._sequences),
            ("vendors", self._vendors),
            ("archives", self._archives),
            ("alarms", self._alarms),
            ("replays", self._replays),
        ]
        for name, step in steps:
            try:
                step(status)
            except (ClientError, BotoCoreError, OSError) as error:  # one source down: the rest still shows
                status.unread[name] = _why(error)
        return status

    # -- the channels ----------------------------------------------------------------------------
    def _channels(self, status: Status) -> None:
        kinesis = self.client("kinesis")
        hour_ago, day_ago = status.at - _HOUR, status.at - _DAY
        inputs: list[datetime] = []
        for channel in self.deployment.topology.channels:
            stream = self.deployment.stream(channel.name)
            counts = ChannelCounts(channel.name, stream)
            try:
                records = list(self._read(kinesis, stream, day_ago))
            except ClientError as error:
                status.unread[f"channel {channel.name}"] = _why(error)
                status.channels.append(counts)
                continue
            counts.capped = len(records) >= self.limit
            for record in records:
                counts.last_day += 1
                if record.arrived is not None:
                    counts.last_hour += record.arrived >= hour_ago
                    counts.newest = max(counts.newest or record.arrived, record.arrived)
                if channel.name in ("invalid", "error"):
                    self._count_code(status, channel.name, record)
                if channel.name == "input" and record.arrived is not None:
                    inputs.append(record.arrived)
            status.channels.append(counts)
        self._inputs = inputs

    def _count_code(self, status: Status, channel: str, record: Record) -> None:
        if record.partition_key.startswith(_MOVED):
            status.moved[channel] = status.moved.get(channel, 0) + 1
            return
        code = "unknown"
        try:
            header = orjson.loads(record.data).get("messageHeader")
            if isinstance(header, dict) and isinstance(header.get("errorCode"), str):
                code = header["errorCode"]
        except (orjson.JSONDecodeError, AttributeError):
            pass
        counted = status.codes.setdefault(channel, {})
        counted[code] = counted.get(code, 0) + 1

    def _read(self, kinesis: Any, stream: str, since: datetime) -> Iterator[Record]:
        """The records of ``stream`` from ``since`` on, at most :attr:`limit`."""
        return read_records(kinesis, stream, since, self.limit)

    # -- consumer groups -------------------------------------------------------------------------
    def _lag(self, status: Status) -> None:
        dynamodb, kinesis = self.client("dynamodb"), self.client("kinesis")
        streams = {self.deployment.stream(c.name): c.name for c in self.deployment.topology.channels}
        rows: dict[tuple[str, str], list[dict[str, Any]]] = {}
        pages = dynamodb.get_paginator("scan").paginate(TableName=self.deployment.table("checkpoints"))
        for page in pages:
            for item in page.get("Items", []):
                lease = item.get("lease", {}).get("S", "")
                group, _, stream = lease.rpartition("#")
                if not group or stream not in streams:
                    continue  # not a gateway consumer's row (a replay's, a future kind)
                rows.setdefault((group, stream), []).append(item)
        for (group, stream), items in sorted(rows.items()):
            oldest = 0.0
            for item in items:
                age = self._unread_age(kinesis, stream, item, status.at)
                oldest = max(oldest, age)
            owners = tuple(sorted({i["leaseOwner"]["S"] for i in items if "leaseOwner" in i}))
            status.lag.append(GroupLag(group, streams[stream], len(items), oldest, owners))

    def _unread_age(self, kinesis: Any, stream: str, item: dict[str, Any], now: datetime) -> float:
        """Seconds since the first record after the row's checkpoint arrived; 0 when none waits."""
        checkpoint = item.get("checkpoint", {}).get("S", "")
        shard = item.get("shardId", {}).get("S", "")
        if checkpoint in ("SHARD_END", "LATEST") or not shard:
            return 0.0
        arguments: dict[str, Any] = {"StreamName": stream, "ShardId": shard}
        if checkpoint == "TRIM_HORIZON":
            arguments["ShardIteratorType"] = "TRIM_HORIZON"
        else:
            arguments |= {"ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "StartingSequenceNumber": checkpoint}
        try:
            iterator = kinesis.get_shard_iterator(**arguments)["ShardIterator"]
            records = kinesis.get_records(ShardIterator=iterator, Limit=1)["Records"]
        except ClientError:  # a shard gone past retention, or closed: nothing left to read there
            return 0.0
        arrived = _arrival(records[0]) if records else None
        return max(0.0, (now - arrived).total_seconds()) if arrived else 0.0

    # -- parked batches, open sequences ----------------------------------------------------------
    def _parked(self, status: Status) -> None:
        sqs = self.client("sqs")
        for processor in self.deployment.topology.processors:
            if not processor.sources:  # a scheduled processor: no mapping parks its batches
                continue
            name = self.deployment.on_failure_queue(processor.name)
            try:
                url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
                attributes = sqs.get_queue_attributes(
                    QueueUrl=url,
                    AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
                )["Attributes"]
            except ClientError as error:
                status.unread[f"on-failure queue {name}"] = _why(error)
                continue
            status.parked[processor.name] = int(attributes.get("ApproximateNumberOfMessages", 0)) + int(
                attributes.get("ApproximateNumberOfMessagesNotVisible", 0)
            )

    def _sequences(self, status: Status) -> None:
        dynamodb = self.client("dynamodb")
        oldest: float | None = None
        pages = dynamodb.get_paginator("scan").paginate(
            TableName=self.deployment.table("sequences"),
            FilterExpression="#s = :pending",
            ExpressionAttributeNames={"#s": "status"},
            ExpressionAttributeValues={":pending": {"S": "PENDING"}},
        )
        now = status.at.timestamp()
        for page in pages:
            for item in page.get("Items", []):
                status.open_sequences += 1
                first = item.get("firstSeen", {}).get("N")
                if first is not None:
                    age = max(0.0, now - float(first))
                    oldest = age if oldest is None else max(oldest, age)
        status.oldest_sequence_seconds = oldest

    # -- vendors, archives, alarms ---------------------------------------------------------------
    def _vendors(self, status: Status) -> None:
        iam = self.client("iam")
        prefix = f"{self.deployment.prefix}-{self.deployment.environment}-vendor-"
        for page in iam.get_paginator("list_roles").paginate():
            for role in page.get("Roles", []):
                name = role["RoleName"]
                if name.startswith(prefix):
                    status.vendors[name[len(prefix) :]] = self._role_access(iam, name)

    def _role_access(self, iam: Any, role: str) -> dict[str, list[str]]:
        """The channels the role's policies (attached and inline) let it put on and read."""
        statements: list[dict[str, Any]] = []
        for attached in iam.list_attached_role_policies(RoleName=role).get("AttachedPolicies", []):
            policy = iam.get_policy(PolicyArn=attached["PolicyArn"])["Policy"]
            version = iam.get_policy_version(PolicyArn=attached["PolicyArn"], VersionId=policy["DefaultVersionId"])
            statements += _statements(version["PolicyVersion"]["Document"])
        for name in iam.list_role_policies(RoleName=role).get("PolicyNames", []):
            statements += _statements(iam.get_role_policy(RoleName=role, PolicyName=name)["PolicyDocument"])
        streams = {self.deployment.stream(c.name): c.name for c in self.deployment.topology.channels}
        access: dict[str, set[str]] = {"produces": set(), "consumes": set()}
        for statement in statements:
            actions = statement.get("Action", [])
            actions = {actions} if isinstance(actions, str) else set(actions)
            resources = statement.get("Resource", [])
            resources = [resources] if isinstance(resources, str) else resources
            named = {streams[r.rsplit("/", 1)[-1]] for r in resources if r.rsplit("/", 1)[-1] in streams}
            if actions & {"kinesis:PutRecord", "kinesis:PutRecords", "kinesis:*"}:
                access["produces"] |= named
            if actions & {"kinesis:GetRecords", "kinesis:*"}:
                access["consumes"] |= named
        return {what: sorted(channels) for what, channels in access.items()}

    def _archives(self, status: Status) -> None:
        s3 = self.client("s3")
        newest_audit: datetime | None = None
        for channel in self.deployment.topology.channels:
            if channel.archive is None:
                continue
            bucket = self.deployment.bucket(self.deployment.topology.archive_bucket(channel.name))
            found = _newest_object(s3, bucket, channel.archive, status.at)
            if found is not None:
                key, written = found
                status.archives[channel.name] = {"bucket": bucket, "key": key, "written": timestamps.format(written)}
                if channel.name == "input":
                    newest_audit = written
        if self._inputs is not None:
            status.archive_backlog = sum(
                1 for arrived in self._inputs if newest_audit is None or arrived > newest_audit
            )

    def _alarms(self, status: Status) -> None:
        cloudwatch = self.client("cloudwatch")
        prefix = f"{self.deployment.prefix}-{self.deployment.environment}"
        for page in cloudwatch.get_paginator("describe_alarms").paginate(AlarmNamePrefix=prefix, StateValue="ALARM"):
            status.alarms.extend(alarm["AlarmName"] for alarm in page.get("MetricAlarms", []))

    def _replays(self, status: Status) -> None:
        status.replays = replay_rows(self.client("dynamodb"), self.deployment.table("checkpoints"))


def replay_rows(dynamodb: Any, table: str) -> list[dict[str, Any]]:
    """The replays kept in the checkpoints table, oldest first: each one's name, status, times,
    counts (``selected`` is what its last complete run selected: None until one completes) and
    options (``selection`` and ``into``, as ``rdss replay start`` was given them)."""
    from rdss.processors.replay_progress import Progress

    rows = []
    for row in Progress(dynamodb, table).list():
        try:
            options = orjson.loads(row.get("options") or "{}")
        except orjson.JSONDecodeError:
            options = {}
        options = options if isinstance(options, dict) else {}
        rows.append(
            {
                "name": row["name"],
                "status": row.get("status"),
                "created": row.get("created"),
                "updated": row.get("updated"),
                "sent": row.get("sent", 0),
                "selected": row.get("selected"),
                "into": options.get("into"),
                "selection": options.get("selection") if isinstance(options.get("selection"), dict) else {},
            }
        )
    return sorted(rows, key=lambda r: (str(r["created"]), str(r["name"])))


def read_records(kinesis: Any, stream: str, since: datetime, limit: int) -> Iterator[Record]:
    """The records of ``stream`` from ``since`` on, at most ``limit`` (every shard, oldest first
    within a shard): what the counts and the console's charts are made of."""
    read = 0
    for shard in kinesis.list_shards(StreamName=stream)["Shards"]:
        iterator = kinesis.get_shard_iterator(
            StreamName=stream, ShardId=shard["ShardId"], ShardIteratorType="AT_TIMESTAMP", Timestamp=since
        )["ShardIterator"]
        while iterator and read < limit:
            response = kinesis.get_records(ShardIterator=iterator, Limit=min(10_000, limit - read))
            for r in response["Records"]:
                read += 1
                yield Record(_arrival(r), r["Data"], r.get("PartitionKey", ""))
            if not response["Records"] and not response.get("MillisBehindLatest"):
                break
            iterator = response.get("NextShardIterator")


def _newest_object(s3: Any, bucket: str, base: str, now: datetime) -> tuple[str, datetime] | None:
    """The newest object under ``base`` in the last day's hour prefixes, newest hour first."""
    hour = now
    for _ in range(25):
        newest: tuple[str, datetime] | None = None
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=archive.hour_prefix(base, hour)):
            for entry in page.get("Contents", []):
                written = entry["LastModified"].astimezone(UTC)
                if newest is None or written > newest[1]:
                    newest = (entry["Key"], written)
        if newest is not None:
            return newest
        hour -= _HOUR
    return None


def _statements(document: Any) -> list[dict[str, Any]]:
    """A policy document's Allow statements."""
    if isinstance(document, str):
        document = orjson.loads(document)
    statements = document.get("Statement", []) if isinstance(document, dict) else []
    if isinstance(statements, dict):
        statements = [statements]
    return [s for s in statements if isinstance(s, dict) and s.get("Effect") == "Allow"]


def _arrival(record: dict[str, Any]) -> datetime | None:
    arrival = record.get("ApproximateArrivalTimestamp")
    return arrival.astimezone(UTC) if isinstance(arrival, datetime) else None


def _why(error: Exception) -> str:
    if isinstance(error, ClientError):
        details = error.response.get("Error", {})
        return f"{details.get('Code', 'error')}: {details.get('Message', '')}".strip()
    return str(error) or type(error).__name__
