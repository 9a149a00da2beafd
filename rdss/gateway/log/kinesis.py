"""The Kinesis backend (``kinesis://<env>``): streams of one deployment, DynamoDB state.

Publishing is :class:`rdss.aws.putrecords.PutRecordsBatcher` (500 records a call, failed entries
retried alone with the configured backoff, GENERR005 logged on giving up). Consuming is
:class:`rdss.gateway.streams.PartitionedConsumer` over :class:`KinesisLog`, with leases and
checkpoints in the deployment's ``checkpoints`` table. The Local Data Repository is the
application's own (``ldr=``, :func:`rdss.gateway.backend.local_data_repository`): by default a
SQLite file on this host; never the deployment's ``messages`` table, where the broker claims
bare messageIds (an entry there would make it drop a producer's message as a duplicate).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from rdss.aws.clients import CLIENT_CONFIG, assumed_session
from rdss.aws.clients import client as aws_client
from rdss.aws.failures import Answered, aws_code, describe, unusable
from rdss.aws.putrecords import MAX_RECORD_DATA
from rdss.deployment.topology import Deployment, lease_key
from rdss.gateway.backend import (
    Backend,
    Settings,
    TransportError,
    local_data_repository,
    state_directory,
)
from rdss.gateway.checkpoints import DynamoLeaseStore
from rdss.gateway.leases import PartitionInfo
from rdss.gateway.log.base import LogTransport
from rdss.gateway.streams import LogRecord, ReadResult, StartAt
from rdss.gateway.url import GatewayURL, URLError
from rdss.model.rejection import DirectoryClaimChecks, Rejector
from rdss.repository.entries import Repository
from rdss.repository.sqlite import SqliteRepository

_log = logging.getLogger(__name__)

#: The project's retry and timeout settings, without botocore's client-side parameter validation:
#: the gateway builds every request itself, and validating a 100-item TransactWriteItems or a
#: 500-record PutRecords in Python cost a quarter of a batch send's time.
GATEWAY_CLIENT_CONFIG = CLIENT_CONFIG.merge(Config(parameter_validation=False))

#: GetRecords refusals that mean "not now" (5 reads/s/shard): an empty read, retried next poll.
_READ_THROTTLED = frozenset(
    {"ProvisionedThroughputExceededException", "LimitExceededException", "KMSThrottlingException"}
)


class KinesisLog:
    """One stream's shards as a :class:`rdss.gateway.streams.PartitionLog`."""

    concurrent = True

    def __init__(self, kinesis: Any, stream: str, channel: str) -> None:
        self.kinesis = kinesis
        self.stream = stream
        self.channel = channel
        # shard -> (iterator, last position read or None); the iterator is Kinesis's cursor
        self._cursors: dict[str, tuple[str | None, str | None, StartAt]] = {}
        self._ending: dict[str, str | None] = {}
        self._lock = threading.Lock()

    def partitions(self) -> list[PartitionInfo]:
        shards: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {"StreamName": self.stream}
        while True:
            try:
                response = self.kinesis.list_shards(**kwargs)
            except ClientError as error:
                if aws_code(error) == "ResourceNotFoundException":
                    raise TransportError(f"stream {self.stream} does not exist") from error
                raise
            shards.extend(response["Shards"])
            token = response.get("NextToken")
            if not token:
                break
            kwargs = {"NextToken": token}
        listed = []
        with self._lock:
            for shard in shards:
                ending = shard.get("SequenceNumberRange", {}).get("EndingSequenceNumber")
                self._ending[shard["ShardId"]] = ending
                parents = tuple(p for p in (shard.get("ParentShardId"), shard.get("AdjacentParentShardId")) if p)
                listed.append(PartitionInfo(shard["ShardId"], parents, ending is not None))
        return listed

    def open(self, partition: str, start: StartAt) -> None:
        iterator = self._iterator(partition, start)
        last = None
        if start.kind == "after":
            last = start.position
        elif start.kind == "at" and start.position is not None:
            last = str(int(start.position) - 1)
        with self._lock:
            self._cursors[partition] = (iterator, last, start)

    def read(self, partition: str, limit: int) -> ReadResult:
        with self._lock:
            iterator, last, start = self._cursors[partition]
        if iterator is None:
            return ReadResult([], ended=True)
        try:
            response = self.kinesis.get_records(ShardIterator=iterator, Limit=min(limit, 10_000))
        except ClientError as error:
            code = aws_code(error)
            if code == "ExpiredIteratorException":  # iterators last five minutes: take a new one
                self.open(partition, StartAt("after", last) if last is not None else start)
                return ReadResult([])
            if code in _READ_THROTTLED:
                _log.debug("GetRecords on %s/%s throttled", self.stream, partition)
                return ReadResult([])
            raise
        records = [
            LogRecord(
                r["SequenceNumber"], r["Data"], r.get("PartitionKey"), _epoch(r.get("ApproximateArrivalTimestamp"))
            )
            for r in response["Records"]
        ]
        if records:
            last = records[-1].position
        following = response.get("NextShardIterator")
        ended = following is None or self._drained(partition, last, records)
        with self._lock:
            if partition in self._cursors:
                self._cursors[partition] = (None if ended else following, last, start)
        return ReadResult(records, ended)

    def forget(self, partition: str) -> None:
        with self._lock:
            self._cursors.pop(partition, None)

    def _drained(self, partition: str, last: str | None, records: list[LogRecord]) -> bool:
        """A closed shard read to its ending sequence number. Kinesis says so by returning no
        next iterator; emulators (moto) keep returning one, so also check the shard's range."""
        if records:
            return False
        with self._lock:
            ending = self._ending.get(partition)
        return ending is not None and int(last or 0) >= int(ending)

    def _iterator(self, partition: str, start: StartAt) -> str | None:
        kwargs: dict[str, Any] = {"StreamName": self.stream, "ShardId": partition}
        if start.kind == "earliest":
            kwargs["ShardIteratorType"] = "TRIM_HORIZON"
        elif start.kind == "latest":
            kwargs["ShardIteratorType"] = "LATEST"
        else:
            kwargs["ShardIteratorType"] = "AFTER_SEQUENCE_NUMBER" if start.kind == "after" else "AT_SEQUENCE_NUMBER"
            kwargs["StartingSequenceNumber"] = start.position
        iterator: str | None = self.kinesis.get_shard_iterator(**kwargs).get("ShardIterator")
        return iterator


def _refused(error: ClientError) -> bool:
    """AWS answered, and refused the caller this call: the deployment is there."""
    return aws_code(error) in ("AccessDenied", "AccessDeniedException")


def _epoch(value: Any) -> float | None:
    if value is None:
        return None
    return value.timestamp() if hasattr(value, "timestamp") else float(value)


class KinesisTransport(LogTransport):
    """The streams of one deployment as a :class:`rdss.gateway.backend.Transport`."""

    scheme = "kinesis"
    #: Every message enters the deployment through ``input``: Firehose archives that channel (the
    #: spec's Audit Log) and the broker routes each message by its content, so a send named for
    #: a routed channel is published there (:meth:`rdss.gateway.send.Sender.entry`).
    entry_channel = "input"

    def __init__(
        self,
        deployment: Deployment,
        settings: Settings,
        *,
        kinesis: Any,
        dynamodb: Any,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        # once the deployment has answered, a connection refused or reset is it restarting
        # (rdss local up, a proxy): sends are retried with the backoff, GENERR005 on giving up
        self.answered = Answered()
        for client in (kinesis, dynamodb):
            self.answered.watch(client)
        super().__init__(settings, kinesis, clock=clock, retry_on=self.answered.transient)
        self.deployment = deployment
        self.kinesis = kinesis
        self.dynamodb = dynamodb

    def address(self, channel: str) -> str:
        override = self.settings.channels.get(channel)
        if override is not None:
            return override
        try:
            return self.deployment.stream(channel)
        except KeyError:
            known = ", ".join(c.name for c in self.deployment.topology.channels)
            raise TransportError(f"unknown channel {channel!r}: the topology has {known}") from None

    def check(self, channels: Sequence[str]) -> None:
        """Fail now if the deployment cannot be reached, or a channel's stream is not there (a
        service that runs for days checks at its start, rather than retrying a typo for ever).
        A refusal of the call itself (a role without ListShards) says the deployment answers.

        Raises:
            TransportError: unreachable, no credentials or region, or a stream missing.
        """
        for channel in channels:
            address = self.address(channel)
            try:
                self.kinesis.list_shards(StreamName=address, MaxResults=1)
            except ClientError as error:
                if aws_code(error) == "ResourceNotFoundException":
                    raise TransportError(f"stream {address} does not exist") from None
                if not unusable(aws_code(error)) or _refused(error):
                    continue
                raise TransportError(describe(error)) from None
            except BotoCoreError as error:
                raise TransportError(describe(error)) from None

    def log(self, address: str, channel: str) -> KinesisLog:
        return KinesisLog(self.kinesis, address, channel)

    def leases(self, group: str, address: str) -> DynamoLeaseStore:
        return DynamoLeaseStore(self.dynamodb, self.deployment.table("checkpoints"), lease_key(group, address))


def open_backend(url: GatewayURL, settings: Settings) -> Backend:
    """The backend for ``kinesis://<env>?endpoint=&region=&prefix=&ldr=&role=&external_id=``."""
    deployment = Deployment(url.name, prefix=url.param("prefix") or "rdss")
    kwargs: dict[str, Any] = {}
    endpoint, region = url.param("endpoint"), url.param("region")
    if endpoint:
        kwargs["endpoint_url"] = endpoint
    if region:
        kwargs["region_name"] = region
    kwargs["config"] = GATEWAY_CLIENT_CONFIG
    role = url.param("role")
    session = (
        assumed_session(
            role,
            external_id=url.param("external_id"),
            session_name=f"rdss-gateway-{settings.application}"[:64],
            region=region,
            endpoint=endpoint,
        )
        if role
        else None
    )
    kinesis = settings.clients.get("kinesis") or aws_client("kinesis", session, **kwargs)
    dynamodb = settings.clients.get("dynamodb") or aws_client("dynamodb", session, **kwargs)
    # The repository's table is the application's own (in a vendor's account): reached with the
    # gateway's own credentials, never the deployment's role, which may touch no table but its
    # group's checkpoints.
    own_dynamodb = (lambda: aws_client("dynamodb", **kwargs)) if role else (lambda: dynamodb)
    repository = local_data_repository(
        url, settings, lambda: _default_repository(deployment, settings), dynamodb=own_dynamodb
    )
    # a record too large to travel decorated is kept on this host: a vendor's gateway has no
    # bucket of the deployment's to keep it in
    rejector = Rejector(MAX_RECORD_DATA, DirectoryClaimChecks(state_directory()))
    return Backend(KinesisTransport(deployment, settings, kinesis=kinesis, dynamodb=dynamodb), repository, rejector)


def _default_repository(deployment: Deployment, settings: Settings) -> Repository:
    """A SQLite file on this host; in AWS (Lambda, ECS...) local disk does not outlast the task,
    so there the application must name a table of its own."""
    if os.environ.get("AWS_EXECUTION_ENV"):
        raise URLError(
            "a gateway running in AWS keeps its Local Data Repository in a DynamoDB table of its own: "
            "add ldr=dynamodb://TABLE to the kinesis:// URL"
        )
    name = f"kinesis-{deployment.prefix}-{deployment.environment}.sqlite"
    return SqliteRepository(state_directory() / name, settings.application)
