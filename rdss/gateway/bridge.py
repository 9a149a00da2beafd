"""The Messaging Bridge (EIP): the messages of some channels, moved from one messaging system to
another - Kinesis to RabbitMQ or back (or either to the memory bus) - by two gateways.

For each channel, the bridge reads the source as a consumer group (``bridge`` by default: a
restarted bridge resumes from the group's checkpoints on Kinesis, from its durable queues on
RabbitMQ) and sends what it read to the same channel on the target through the target
gateway's :class:`rdss.gateway.send.Sender` (classifier, TO_SEND, publish with confirms or
PutRecords, SENT). A source record is settled only after the target acknowledged it, so:

* **at least once**: nothing is settled that the target did not take; a bridge killed at any
  point reads again what it had not settled;
* **duplicates dropped on the far side**: before sending, the bridge looks every messageId up in
  the target's Local Data Repository (under its own application name); one already SENT is
  settled without sending again. What remains is the window between the target's acknowledgement
  and the SENT write, which the far side's own receivers close (a gateway receiver drops a
  messageId it already RECEIVED);
* **nothing lost when a side drops its connection**: a failed send is retried, with a backoff
  growing to 30 s, until it goes through or the bridge is stopped (then unsettled); a failed read
  is retried the same way.

A record that fails the classifier is not forwarded as it is: it goes, decorated, to the
target's ``invalid`` or ``error`` channel (the same classification as everywhere else), keyed as
its consumer group's move (``moved:bridge``), as every consumer's move is. From RabbitMQ the
group's consumer classifies on receipt, as every RabbitMQ consumer does, so such a record is moved
to RabbitMQ's own ``invalid`` or ``error`` queue, keyed the same, before the bridge reads it (and
is not in :class:`BridgeStats`).
Sequence parts travel as they are, each its own record.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rdss.gateway import Gateway
from rdss.gateway.backend import Consumer, Delivery, Outgoing
from rdss.gateway.exceptions import MessageRefused, SendFailed, UnusableName
from rdss.model.errors import ErrorCode
from rdss.model.rejection import moved_key
from rdss.model.retry import PATIENT, Backoff, Streak
from rdss.model.validation import Verdict, validate
from rdss.observability.outside import message_fields
from rdss.repository.entries import SENT

_log = logging.getLogger(__name__)

#: The Data Type Channels: what a bridge moves unless told otherwise.
DEFAULT_CHANNELS = ("metadata", "vocabulary", "responses")

#: Retries of a failing side: 0.2 s doubling to 30 s (jittered), for as long as the bridge runs.
RETRY = PATIENT


@dataclass
class BridgeStats:
    """What a bridge did."""

    #: Records read from the source.
    read: int = 0
    #: Records the target acknowledged.
    forwarded: int = 0
    #: Records already SENT by this bridge (or twice in one read): settled, not sent again.
    duplicates: int = 0
    #: Records that failed the classifier, moved decorated to the target's invalid/error channel.
    rejected: int = 0
    #: Failed attempts on either side (each retried).
    failures: int = 0
    #: Seconds from the first record read to the last one forwarded.
    busy_seconds: float = 0.0
    per_channel: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class Bridge:
    """Moves ``channels`` from the ``source`` gateway's messaging system to the ``target``'s."""

    def __init__(
        self,
        source: Gateway,
        target: Gateway,
        channels: Sequence[str] = DEFAULT_CHANNELS,
        *,
        group: str = "bridge",
        batch_size: int = 500,
        poll_interval: float = 0.5,
        retry: Backoff = RETRY,
        owns_gateways: bool = False,
    ) -> None:
        """
        Args:
            group: the consumer group on the source, and the application name of the bridge's
                entries in the target's Local Data Repository.
            batch_size: records read per channel per poll.
            poll_interval: how long to wait when every channel is empty.
            owns_gateways: :meth:`close` closes the two gateways too.
        """
        if not channels:
            raise ValueError("a bridge needs at least one channel")
        self.source = source
        self.target = target
        self.channels = list(channels)
        self.group = group
        self.batch_size = batch_size
        self.poll_interval = poll_interval
        #: Failed attempts on either side in a row: the wait grows with them, a move restarts it.
        self.retrying = Streak(retry)
        self.owns_gateways = owns_gateways
        self.stats = BridgeStats()
        self._consumers: dict[str, Consumer] = {}
        self._first_read: float | None = None

    def run(
        self,
        *,
        stop: threading.Event | None = None,
        idle_timeout: float | None = None,
        max_messages: int | None = None,
    ) -> BridgeStats:
        """Move messages until ``stop`` is set, nothing arrived for ``idle_timeout`` seconds, or
        ``max_messages`` records were settled."""
        stop = stop or threading.Event()
        idle_since = time.monotonic()
        try:
            while not stop.is_set():
                moved = self.step(stop)
                if moved:
                    idle_since = time.monotonic()
                    if max_messages is not None and self.stats.forwarded + self.stats.duplicates >= max_messages:
                        break
                    continue
                if idle_timeout is not None and time.monotonic() - idle_since >= idle_timeout:
                    break
                stop.wait(self.poll_interval)
        finally:
            self.close()
        return self.stats

    def step(self, stop: threading.Event | None = None) -> int:
        """One read of every channel, each record forwarded and settled; the records settled."""
        stop = stop or threading.Event()
        moved = 0
        wait = self.poll_interval if len(self.channels) == 1 else 0.0
        for channel in self.channels:
            consumer = self._consumer(channel, stop)
            if consumer is None:
                continue
            try:
                deliveries = consumer.poll(self.batch_size, wait=wait)
                # a broker pushes a few at a time: gather what is already there into one batch,
                # so the target's calls (and its Local Data Repository's) carry many at once
                for _ in range(10):
                    if not deliveries or len(deliveries) >= self.batch_size:
                        break
                    more = consumer.poll(self.batch_size - len(deliveries))
                    if not more:
                        break
                    deliveries.extend(more)
            except Exception as error:  # the source dropped: read again after a pause
                self._failed(f"reading {channel}", error, stop)
                continue
            if not deliveries:
                consumer.commit()
                continue
            if self._first_read is None:
                self._first_read = time.monotonic()
            self.stats.read += len(deliveries)
            if not self._forward(channel, deliveries, stop):
                return moved  # stopped before the target took them: leave them unsettled
            consumer.settle(deliveries)
            consumer.commit()
            self.retrying.succeeded()
            moved += len(deliveries)
            self.stats.per_channel[channel] = self.stats.per_channel.get(channel, 0) + len(deliveries)
            self.stats.busy_seconds = time.monotonic() - self._first_read
        return moved

    def close(self) -> None:
        """Checkpoint what was settled and release the source consumers (and the gateways, when
        the bridge owns them)."""
        for consumer in self._consumers.values():
            try:
                consumer.close()
            except Exception as error:
                _log.warning("closing a source consumer failed: %s", error)
        self._consumers.clear()
        if self.owns_gateways:
            self.source.close()
            self.target.close()

    # -- forwarding ----------------------------------------------------------------------------
    def _forward(self, channel: str, deliveries: Sequence[Delivery], stop: threading.Event) -> bool:
        """Send ``deliveries`` on; True once the target has every one (or it was a duplicate or
        moved to invalid/error), False if stopped first."""
        payloads: dict[str, bytes] = {}
        rejected: list[Outgoing] = []
        received = _log.isEnabledFor(logging.INFO)
        for delivery in deliveries:
            verdict = validate(delivery.payload, size_limit=None)
            if received:
                _log.info("Message received", extra=message_fields(verdict.header or {}, channel))
            if not verdict.valid or verdict.header is None:
                outgoing = self._rejected(delivery.payload, verdict, None)
                rejected.append(outgoing)
                _log.warning(
                    "bridge: a record of %s moved to %s: %s %s",
                    channel,
                    outgoing.channel,
                    verdict.error_code,
                    verdict.error_description,
                    extra=message_fields(verdict.header or {}, channel, errorCode=verdict.error_code),
                )
                continue
            message_id = str(verdict.header["messageId"])
            if message_id in payloads:
                self.stats.duplicates += 1
                continue
            payloads[message_id] = delivery.payload
        statuses = self._attempt(lambda: self.target.repository.statuses(list(payloads)), "reading the ledger", stop)
        if statuses is None:
            return False
        for message_id in [m for m in payloads if statuses.get(m) == SENT]:
            del payloads[message_id]
            self.stats.duplicates += 1
        while payloads:
            receipts: Sequence[object]
            try:
                # where a broker routes by content (Kinesis), everything enters through its entry
                # channel: what arrived on one channel here may be routed to another there
                receipts = self.target.sender.send(list(payloads.values()), self.target.sender.entry(channel))
            except SendFailed as failed:
                receipts = failed.sent
                self._failed(f"sending to {channel}", failed, stop)
            except MessageRefused as refused:  # expired since it was classified: to the error channel
                sent_ids = list(payloads)
                for refusal in refused.refusals:
                    message_id = sent_ids[refusal.index]
                    payload = payloads.pop(message_id)
                    rejected.append(self._rejected(payload, refusal.error_code, refusal.error_description))
                continue
            except Exception as error:  # the target dropped: try again after a pause
                receipts = []
                self._failed(f"sending to {channel}", error, stop)
            for receipt in receipts:
                if payloads.pop(getattr(receipt, "message_id", ""), None) is not None:
                    self.stats.forwarded += 1
            if payloads and stop.is_set():
                return False
        return self._reject(rejected, stop)

    def _rejected(self, payload: bytes, reason: Verdict | ErrorCode, description: str | None) -> Outgoing:
        """The target's record for a message it will not take (decorated, or a claim check),
        keyed as the move of the bridge's consumer group (:func:`rdss.model.rejection.moved_key`)."""
        rejection = self.target.rejector.reject(payload, reason, description)
        return Outgoing(rejection.channel, rejection.record, moved_key(self.group), rejection.headers)

    def _reject(self, rejected: list[Outgoing], stop: threading.Event) -> bool:
        while rejected:
            try:
                outcomes = self.target.transport.publish(rejected)
            except Exception as error:
                self._failed("moving invalid records", error, stop)
                outcomes = []
            done = {id(o.message) for o in outcomes if o.ok}
            self.stats.rejected += len(done)
            rejected = [r for r in rejected if id(r) not in done]
            if rejected:
                if stop.is_set():
                    return False
                self._failed("moving invalid records", RuntimeError("not acknowledged"), stop)
        return True

    # -- failures ------------------------------------------------------------------------------
    def _consumer(self, channel: str, stop: threading.Event) -> Consumer | None:
        consumer = self._consumers.get(channel)
        if consumer is None:
            try:
                consumer = self.source.transport.consumer(channel, group=self.group, start="earliest")
            except UnusableName:
                raise  # no retry makes a name fit
            except Exception as error:
                self._failed(f"opening {channel}", error, stop)
                return None
            self._consumers[channel] = consumer
        return consumer

    def _attempt(self, operation: Callable[[], Any], what: str, stop: threading.Event) -> Any:
        while not stop.is_set():
            try:
                return operation()
            except Exception as error:
                self._failed(what, error, stop)
        return None

    def _failed(self, what: str, error: BaseException, stop: threading.Event) -> None:
        self.stats.failures += 1
        delay = self.retrying.failed()
        _log.warning("bridge: %s failed (%s); retrying in %.1f s", what, error, delay)
        stop.wait(delay)


def open_bridge(
    source_url: str,
    target_url: str,
    channels: Sequence[str] = DEFAULT_CHANNELS,
    *,
    group: str = "bridge",
    declare: Sequence[str] = (),
    lease_duration: float = 10.0,
    **options: Any,
) -> Bridge:
    """A bridge between two gateway URLs (it owns the two gateways).

    Args:
        declare: consumer groups whose queues to create on a RabbitMQ target first (consumers own
            their queues; a message nobody's queue is bound for would be refused).
        lease_duration: on a Kinesis source, how soon a restarted bridge takes over the shards of
            one that died (seconds).

    Raises:
        URLError, TransportError: a URL is malformed or its messaging system unreachable.
    """
    source = Gateway(source_url, application=group, lease_duration=lease_duration)
    try:
        target = Gateway(target_url, application=group)
    except BaseException:
        source.close()
        raise
    try:
        # a side that cannot be reached, or lacks a channel, is a mistake to say at once: once
        # running, the bridge retries a side that drops, which would hide it
        for side in (source, target):
            check = getattr(side.transport, "check", None)
            if check is not None:
                check(channels)
        declare_queues = getattr(target.transport, "declare", None)
        if declare and declare_queues is not None:
            for channel in channels:
                for name in declare:
                    declare_queues(channel, name)
    except BaseException:
        source.close()
        target.close()
        raise
    return Bridge(source, target, channels, group=group, owns_gateways=True, **options)
