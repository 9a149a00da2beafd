"""The log transports (Kinesis, the memory bus): one base, specialised by two small classes.

Both logs answer ``put_records``, so both publish the same way through
:class:`rdss.aws.putrecords.PutRecordsBatcher` (500 records a call, failed entries retried alone
after the backoff, GENERR005 logged on giving up, one :class:`rdss.gateway.backend.Outcome` per
message in the order given), and both consume through
:class:`rdss.gateway.streams.PartitionedConsumer` with a :class:`rdss.gateway.leases.LeaseCoordinator`
for a group. A subclass says only where a channel is (:meth:`LogTransport.address`), how to read
it (:meth:`LogTransport.log`) and where a group's leases live (:meth:`LogTransport.leases`).
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence

from rdss.aws.failures import transient
from rdss.aws.putrecords import PutRecordsBatcher, Record
from rdss.gateway.backend import BrokerFunction, Consumer, Outcome, Outgoing, Settings, StartPosition
from rdss.gateway.checkpoints import LATEST, TRIM_HORIZON, LeaseStore
from rdss.gateway.leases import LeaseCoordinator, worker_id
from rdss.gateway.streams import PartitionedConsumer, PartitionLog


class LogTransport(ABC):
    """A :class:`rdss.gateway.backend.Transport` over a partitioned log."""

    scheme: str
    #: The transport's optional capabilities (:class:`rdss.gateway.backend.Transport`): a log has
    #: neither unless its subclass says so.
    entry_channel: str | None = None
    inline: BrokerFunction | None = None

    def __init__(
        self,
        settings: Settings,
        put_records: object,
        *,
        clock: Callable[[], float] = time.monotonic,
        retry_on: Callable[[BaseException], bool] = transient,
    ) -> None:
        """
        Args:
            put_records: what answers ``put_records`` (a Kinesis client, the memory bus).
            retry_on: which failures of a PutRecords call are retried with the backoff.
        """
        self.settings = settings
        self.clock = clock
        self.batcher = PutRecordsBatcher(put_records, backoff=settings.backoff, retry_on=retry_on)

    @abstractmethod
    def address(self, channel: str) -> str:
        """The stream name of a logical channel."""

    @abstractmethod
    def log(self, address: str, channel: str) -> PartitionLog:
        """A reader of the stream ``address`` (logical ``channel``)."""

    @abstractmethod
    def leases(self, group: str, address: str) -> LeaseStore:
        """Where ``group`` keeps its leases and checkpoints of the stream ``address``."""

    def publish(self, messages: Sequence[Outgoing]) -> list[Outcome]:
        return publish(self.batcher, self.address, messages)

    def consumer(
        self, channel: str, *, group: str | None, start: StartPosition = "earliest", background: bool = True
    ) -> Consumer:
        address = self.address(channel)
        log = self.log(address, channel)
        coordinator = None
        if group is not None:
            coordinator = LeaseCoordinator(
                self.leases(group, address),
                worker_id(),
                log.partitions,
                lease_duration=self.settings.lease_duration,
                start=TRIM_HORIZON if start == "earliest" else LATEST,
                clock=self.clock,
            )
        return PartitionedConsumer(log, coordinator=coordinator, start=start, background=background, clock=self.clock)

    def close(self) -> None:  # noqa: B027 - a default, not a hook to fill in
        """Nothing to release by default (boto3 clients need no closing; the bus outlives gateways)."""


def publish(batcher: PutRecordsBatcher, address: Callable[[str], str], messages: Sequence[Outgoing]) -> list[Outcome]:
    """Put every message on the stream ``address(message.channel)``; one outcome per message."""
    records = [Record(address(m.channel), m.payload, m.key, token=index) for index, m in enumerate(messages)]
    report = batcher.put(records)
    outcomes: dict[int, Outcome] = {}
    for delivered in report.delivered:
        index = delivered.record.token
        outcomes[index] = Outcome(messages[index], partition=delivered.shard_id, position=delivered.sequence_number)
    for failed in report.failed:
        index = failed.record.token
        outcomes[index] = Outcome(messages[index], failed.error_code, failed.error_message, failed.retries_exhausted)
    return [outcomes.get(index) or Outcome(m, "Unknown", "no outcome reported") for index, m in enumerate(messages)]
