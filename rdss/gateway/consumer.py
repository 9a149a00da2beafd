"""Receiving: the polling consumer and the event-driven consumer (EIP), transactionally.

:class:`Receiver` is the Polling Consumer: ``receive(timeout)`` blocks until a message is
ready (or the timeout passes), the application processes it, then calls :meth:`Receiver.ack`
(or :meth:`Receiver.nack` to have it delivered again). :func:`listen` is the Event-Driven
Consumer on top of it: it calls a handler for each message and acks when the handler returns,
nacks when it raises. (:mod:`rdss.gateway.amgi` serves an AMGI application the same way.)

Between the channel and the application, in order:

* classification (:func:`rdss.validation.validate`, at delivery time): an expired message
  (GENERR003) is not delivered but moved, decorated, to the ``error`` channel - the spec's Error
  Message Queue, archived for operators (when reading ``error`` or ``invalid`` themselves it is
  logged and skipped instead, so nothing loops); any other invalid message is logged with its
  code and skipped (routing invalid messages is the broker's job, and it already did);
* de-duplication: a messageId already in the Local Data Repository is dropped, not delivered:
  RECEIVED (or in flight in this receiver) means a duplicate - Kinesis delivers at least once;
  TO_SEND or SENT means the application's own message coming back, which the spec also says to
  discard ("a client ... will receive the sent Message back again"). Give producer and consumer
  different ``application`` names to see one's messages in the other;
* reassembly: parts of a sequence are held until all have arrived, then delivered as one whole
  message; while held they keep the partition's checkpoint behind them, so a restart reads them
  again. A sequence past its expiry (GENERR003) or waiting longer than ``sequence_timeout``
  (GENERR006) goes to the error channel, parts and all, as the sweep does in the deployed system;
* Message Selector: a predicate on the header; messages it rejects are settled, not delivered;
* Message Throttle: at most N messages a second are handed over.

Acknowledging records RECEIVED (durable at once) and settles the message's records; positions
are checkpointed before each poll and every ``commit_interval`` seconds - after the application
returned, never before (the spec's transactional receive). A crash between the two costs nothing:
the records are read again and dropped as duplicates.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson

from rdss import timestamps
from rdss.errors import ErrorCode
from rdss.gateway.backend import Consumer, Delivery, Outcome, Outgoing, TransportError
from rdss.gateway.repository import RECEIVED, Entry, Repository
from rdss.gateway.throttle import Throttle
from rdss.logs import message_fields
from rdss.messages import Message
from rdss.rejection import Rejector
from rdss.sequences import Reassembler, SequenceError
from rdss.validation import Verdict, validate, validate_message

_log = logging.getLogger(__name__)

#: A Message Selector: receives the messageHeader, returns True to deliver the message.
Selector = Callable[[Mapping[str, Any]], bool]
Publish = Callable[[Sequence[Outgoing]], list[Outcome]]

#: Default time an incomplete sequence is held when its message sets no expiry (as the sweep's).
SEQUENCE_TIMEOUT = 3600.0
_RECENT = 10_000
_UNLIMITED = Rejector()


def select(
    *, message_type: str | Sequence[str] | None = None, message_class: str | Sequence[str] | None = None
) -> Selector:
    """A selector accepting these message types and/or classes, e.g.
    ``select(message_type="MetadataCreate")``."""
    types = {message_type} if isinstance(message_type, str) else set(message_type or ())
    classes = {message_class} if isinstance(message_class, str) else set(message_class or ())

    def selector(header: Mapping[str, Any]) -> bool:
        return (not types or header.get("messageType") in types) and (
            not classes or header.get("messageClass") in classes
        )

    return selector


@dataclass(frozen=True)
class Received:
    """A whole message handed to the application, and the records it came in."""

    message: Message
    #: As it travelled for a whole message (byte for byte); re-serialised when reassembled.
    payload: bytes
    channel: str
    deliveries: tuple[Delivery, ...]
    #: The headers of those records (one per part), for the Local Data Repository.
    parts: tuple[Mapping[str, Any], ...]

    @property
    def header(self) -> Mapping[str, Any]:
        header: Mapping[str, Any] = self.message["messageHeader"]
        return header

    @property
    def message_id(self) -> str:
        return str(self.header["messageId"])

    @property
    def message_type(self) -> str:
        return str(self.header["messageType"])

    @property
    def message_class(self) -> str:
        return str(self.header["messageClass"])

    @property
    def body(self) -> Any:
        return self.message.get("messageBody")


@dataclass
class ReceiveStats:
    """What a receiver did with the records it read."""

    delivered: int = 0
    acked: int = 0
    redelivered: int = 0
    duplicates: int = 0
    #: This application's own messages (TO_SEND or SENT in its repository) coming back.
    own: int = 0
    filtered: int = 0
    invalid: int = 0
    #: Expired messages (and parts of expired or timed-out sequences) moved to the error channel.
    expired: int = 0
    #: Records read from the channel.
    records: int = 0
    #: Seconds the throttle held deliveries back.
    throttled_seconds: float = 0.0

    def as_dict(self) -> dict[str, float]:
        return dict(self.__dict__)


@dataclass
class _Held:
    """Parts of one sequence waiting for the rest: position -> (delivery, header)."""

    parts: dict[int, tuple[Delivery, Mapping[str, Any]]] = field(default_factory=dict)


class Receiver:
    """A transactional Polling Consumer of one channel (see the module docstring)."""

    def __init__(
        self,
        consumer: Consumer,
        repository: Repository,
        *,
        publish: Publish,
        rejector: Rejector | None = _UNLIMITED,
        selector: Selector | None = None,
        throttle: float | None = None,
        batch_size: int = 100,
        poll_interval: float = 1.0,
        sequence_timeout: float = SEQUENCE_TIMEOUT,
        commit_interval: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        now: Callable[[], datetime] = timestamps.now,
    ) -> None:
        self.consumer = consumer
        self.channel = consumer.channel
        self.repository = repository
        self.publish = publish
        #: How records that will not be delivered are moved; None: logged and settled instead
        #: (a receiver of the invalid or error channel itself, so nothing loops).
        self.rejector = rejector
        self.selector = selector
        self.throttle = Throttle(throttle, clock=clock, sleep=sleep) if throttle else None
        self.batch_size = batch_size
        self.poll_interval = poll_interval
        self.sequence_timeout = sequence_timeout
        self.commit_interval = commit_interval
        self.clock = clock
        self.sleep = sleep
        self.now = now
        self.stats = ReceiveStats()
        self._ready: deque[Received] = deque()
        self._reassembler = Reassembler(clock=clock)
        self._held: dict[str, _Held] = {}
        self._order: dict[str, int] = {}  # delivery id -> arrival order, for rewinds
        self._counter = itertools.count()
        self._in_flight: set[str] = set()
        self._recent: OrderedDict[str, None] = OrderedDict()
        self._last_commit = clock()
        self._closed = False

    # -- the polling consumer ------------------------------------------------------------------
    def receive(self, timeout: float | None = None) -> Received | None:
        """The next message, waiting up to ``timeout`` seconds (None: until one arrives).

        The caller owns it until :meth:`ack` or :meth:`nack`; unanswered messages are delivered
        again after a restart.
        """
        deadline = None if timeout is None else self.clock() + timeout
        while True:
            received = self._next_ready()
            if received is not None:
                return received
            self.commit()
            self._time_out_sequences()
            deliveries = self.consumer.poll(self.batch_size)
            if deliveries:
                self._classify(deliveries)
                continue
            remaining = None if deadline is None else deadline - self.clock()
            if remaining is not None and remaining <= 0:
                return None
            self.sleep(self.poll_interval if remaining is None else min(self.poll_interval, remaining))

    def receive_batch(self, max_messages: int = 100, timeout: float | None = None) -> list[Received]:
        """Up to ``max_messages``: waits as :meth:`receive` for the first, then takes only what
        is already read (no further waiting)."""
        first = self.receive(timeout)
        if first is None:
            return []
        return [first, *self.take_ready(max_messages - 1)]

    def take_ready(self, max_messages: int) -> list[Received]:
        """Up to ``max_messages`` of the messages already read, without polling."""
        batch: list[Received] = []
        while len(batch) < max_messages and self._ready:
            received = self._next_ready()
            if received is None:
                break
            batch.append(received)
        return batch

    def ack(self, received: Received | Sequence[Received]) -> None:
        """Processed: record RECEIVED in the Local Data Repository, then settle the records.

        Raises:
            Exception: the repository could not be written; the message is not settled and will
                be delivered again.
        """
        items = [received] if isinstance(received, Received) else list(received)
        if not items:
            return
        self.repository.record([Entry.of(header, RECEIVED) for item in items for header in item.parts])
        for item in items:
            self.consumer.settle(item.deliveries)
            for delivery in item.deliveries:
                self._order.pop(delivery.id, None)
            for header in item.parts:
                self._forget(str(header["messageId"]), recent=True)
        self.stats.acked += len(items)
        if self.clock() - self._last_commit >= self.commit_interval:
            self.commit()

    def nack(self, received: Received) -> None:
        """Not processed: deliver it again. Its partition is rewound to it, so the messages after
        it in that partition come again too (those already acknowledged are then dropped as
        duplicates); what this receiver had read beyond it is forgotten."""
        self.stats.redelivered += 1
        dropped: list[Delivery] = list(received.deliveries)
        for header in received.parts:
            self._forget(str(header["messageId"]))
        for partition in {d.partition for d in received.deliveries}:
            first = min(self._order.get(d.id, -1) for d in received.deliveries if d.partition == partition)
            dropped.extend(self._drop_after(partition, first))
        for delivery in dropped:
            self._order.pop(delivery.id, None)
        self.consumer.redeliver(dropped)

    def commit(self) -> None:
        """Checkpoint what has been settled (done before every poll and on close anyway)."""
        self.consumer.commit()
        self._last_commit = self.clock()

    def close(self) -> None:
        """Checkpoint, release leases. Messages received but not acknowledged come again later."""
        if not self._closed:
            self._closed = True
            self.consumer.close()

    def __enter__(self) -> Receiver:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def __iter__(self) -> Receiver:
        return self

    def __next__(self) -> Received:
        """Iterating waits for messages forever (acknowledge each one)."""
        received = self.receive()
        assert received is not None
        return received

    # -- from records to messages --------------------------------------------------------------
    def _classify(self, deliveries: list[Delivery]) -> None:
        now = self.now()
        self.stats.records += len(deliveries)
        verdicts = [validate(d.payload, now=now) for d in deliveries]
        ids = [
            str(v.header["messageId"])
            for v in verdicts
            if v.header is not None and (v.valid or v.error_code is ErrorCode.GENERR003)
        ]
        statuses = self.repository.statuses(ids) if ids else {}
        skipped: list[Delivery] = []
        expired: list[tuple[Delivery, ErrorCode, str]] = []
        for delivery, verdict in zip(deliveries, verdicts, strict=True):
            self._order[delivery.id] = next(self._counter)
            if verdict.error_code is ErrorCode.GENERR003:
                expired.append((delivery, ErrorCode.GENERR003, verdict.error_description or ""))
                continue
            if not verdict.valid or verdict.message is None:
                _log.warning(
                    "%s: record %s skipped: %s %s",
                    self.channel,
                    delivery.id,
                    verdict.error_code,
                    verdict.error_description,
                    extra=message_fields(verdict.header or {}, self.channel, errorCode=verdict.error_code),
                )
                self.stats.invalid += 1
                skipped.append(delivery)
                continue
            header = verdict.message["messageHeader"]
            message_id = str(header["messageId"])
            status = statuses.get(message_id)
            if status is not None and status != RECEIVED:
                self.stats.own += 1  # TO_SEND / SENT: this application's own message, come back
                skipped.append(delivery)
                continue
            if status == RECEIVED or message_id in self._recent or message_id in self._in_flight:
                self.stats.duplicates += 1
                skipped.append(delivery)
                continue
            if verdict.is_part:
                skipped.extend(self._hold(delivery, verdict, now))
            else:
                self._in_flight.add(message_id)
                self._offer(Received(verdict.message, delivery.payload, self.channel, (delivery,), (header,)))
        self.consumer.settle(skipped)
        for delivery in skipped:
            self._order.pop(delivery.id, None)
        self._to_error(expired)

    def _hold(self, delivery: Delivery, verdict: Verdict, now: datetime) -> list[Delivery]:
        """Hold one part; deliver its sequence when complete. Returns deliveries to settle."""
        assert verdict.message is not None
        header = verdict.message["messageHeader"]
        sequence = header["messageSequence"]
        held = self._held.setdefault(sequence["sequence"], _Held())
        if sequence["position"] in held.parts:  # the same part again (another messageId)
            self.stats.duplicates += 1
            return [delivery]
        held.parts[sequence["position"]] = (delivery, header)
        self._in_flight.add(str(header["messageId"]))
        try:
            whole = self._reassembler.add(verdict.message)
        except SequenceError as error:
            _log.warning("%s: sequence %s dropped: %s", self.channel, sequence["sequence"], error)
            return self._release(sequence["sequence"])
        if whole is None:
            return []
        del self._held[sequence["sequence"]]
        ordered = [held.parts[position] for position in sorted(held.parts)]
        check = validate_message(whole, now=now)
        if not check.valid:
            _log.warning(
                "%s: sequence %s skipped: %s %s",
                self.channel,
                sequence["sequence"],
                check.error_code,
                check.error_description,
            )
            self.stats.invalid += 1
            for _, part in ordered:
                self._forget(str(part["messageId"]))
            return [d for d, _ in ordered]
        self._offer(
            Received(
                whole, orjson.dumps(whole), self.channel, tuple(d for d, _ in ordered), tuple(h for _, h in ordered)
            )
        )
        return []

    def _offer(self, received: Received) -> None:
        if self.selector is not None and not self.selector(received.header):
            self.stats.filtered += 1
            self.consumer.settle(received.deliveries)
            for header in received.parts:
                self._forget(str(header["messageId"]))
            return
        self._ready.append(received)

    def _next_ready(self) -> Received | None:
        owned = set(self.consumer.partitions())
        for sequence, held in list(self._held.items()):
            if any(d.partition not in owned for d, _ in held.parts.values()):
                self._release(sequence)  # the partition's new owner reads these parts again
        while self._ready:
            received = self._ready.popleft()
            if any(d.partition not in owned for d in received.deliveries):
                for header in received.parts:  # another worker owns the partition now
                    self._forget(str(header["messageId"]))
                continue
            if self.throttle is not None:
                before = self.throttle.waited
                self.throttle.wait()
                self.stats.throttled_seconds += self.throttle.waited - before
            if _expired(received.header, self.now()):  # delivery is attempted now, not at read time
                for header in received.parts:
                    self._forget(str(header["messageId"]))
                self._to_error([(d, ErrorCode.GENERR003, "expirationTimestamp passed") for d in received.deliveries])
                continue
            self.stats.delivered += 1
            _log.info("Message received", extra=message_fields(received.header, self.channel))
            return received
        return None

    # -- rewinds, timeouts, the error channel --------------------------------------------------
    def _drop_after(self, partition: str, first: int) -> list[Delivery]:
        """Forget what was read from ``partition`` at or after arrival ``first``; return it."""
        dropped: list[Delivery] = []
        keep: deque[Received] = deque()
        for received in self._ready:
            if any(d.partition == partition and self._order.get(d.id, -1) >= first for d in received.deliveries):
                dropped.extend(received.deliveries)
                for header in received.parts:
                    self._forget(str(header["messageId"]))
            else:
                keep.append(received)
        self._ready = keep
        for sequence, held in list(self._held.items()):
            later = {
                p for p, (d, _) in held.parts.items() if d.partition == partition and self._order.get(d.id, -1) >= first
            }
            if not later:
                continue
            parts = self._reassembler.discard(sequence)
            for position in later:
                delivery, header = held.parts.pop(position)
                dropped.append(delivery)
                self._forget(str(header["messageId"]))
            for part in parts:
                if part["messageHeader"]["messageSequence"]["position"] not in later:
                    self._reassembler.add(part)
            if not held.parts:
                del self._held[sequence]
        return dropped

    def _release(self, sequence: str) -> list[Delivery]:
        """Forget a held sequence entirely; return its deliveries."""
        self._reassembler.discard(sequence)
        held = self._held.pop(sequence, _Held())
        for _, header in held.parts.values():
            self._forget(str(header["messageId"]))
        return [d for d, _ in held.parts.values()]

    def _time_out_sequences(self) -> None:
        now = self.now()
        for incomplete in self._reassembler.incomplete():
            header = incomplete.parts[0]["messageHeader"]
            if _expired(header, now):
                code, why = ErrorCode.GENERR003, "the sequence expired before all its parts arrived"
            elif self.clock() - incomplete.first_seen > self.sequence_timeout:
                code = ErrorCode.GENERR006
                why = f"parts {list(incomplete.positions)} of {incomplete.total} after {self.sequence_timeout:g} s"
            else:
                continue
            self._to_error([(d, code, why) for d in self._release(incomplete.sequence)])

    def _to_error(self, items: list[tuple[Delivery, ErrorCode, str]]) -> None:
        """Move records, decorated, to the channel of their code (or log them), then settle them."""
        if not items:
            return
        self.stats.expired += len(items)
        done = [d for d, _, _ in items]
        if self.rejector is None:
            for delivery, code, why in items:
                _log.warning("%s: record %s not delivered: %s %s", self.channel, delivery.id, code, why)
        else:
            moving: list[tuple[Delivery, Outgoing]] = []
            for delivery, code, why in items:
                try:
                    rejection = self.rejector.reject(delivery.payload, code, why)
                except Exception as error:  # not settled: read again after a restart, never lost
                    _log.error("%s: record %s (%s) could not be moved: %s", self.channel, delivery.id, code, error)
                    done.remove(delivery)
                    continue
                key = delivery.key or delivery.id
                moving.append((delivery, Outgoing(rejection.channel, rejection.record, key, rejection.headers)))
            outcomes = self.publish([outgoing for _, outgoing in moving]) if moving else []
            for outcome, (delivery, outgoing) in zip(outcomes, moving, strict=True):
                if outcome.ok:
                    _log.warning(
                        "%s: record %s moved to %s: %s",
                        self.channel,
                        delivery.id,
                        outgoing.channel,
                        outgoing.headers.get("errorCode"),
                        extra={
                            "channel": outgoing.channel,
                            "errorCode": outgoing.headers.get("errorCode"),
                            "record": delivery.id,
                        },
                    )
                else:  # the message was not going to be delivered anyway: say so loudly
                    _log.error(
                        "%s: record %s (%s) could not be moved to %s: %s %s",
                        self.channel,
                        delivery.id,
                        outgoing.headers["errorCode"],
                        outgoing.channel,
                        ErrorCode.GENERR005 if outcome.retries_exhausted else ErrorCode.GENERR006,
                        outcome.error_code,
                    )
        self.consumer.settle(done)
        for delivery in done:
            self._order.pop(delivery.id, None)

    def _forget(self, message_id: str, *, recent: bool = False) -> None:
        self._in_flight.discard(message_id)
        if recent:
            self._recent[message_id] = None
            if len(self._recent) > _RECENT:
                self._recent.popitem(last=False)


def _expired(header: Mapping[str, Any], now: datetime) -> bool:
    stamp = (header.get("messageTimings") or {}).get("expirationTimestamp")
    if not stamp:
        return False
    try:
        return timestamps.parse(stamp) <= now
    except ValueError:
        return False


Handler = Callable[[Received], object]


def listen(
    receiver: Receiver,
    handler: Handler,
    *,
    stop: threading.Event | None = None,
    max_messages: int | None = None,
    idle_timeout: float | None = None,
    retry_delay: float = 0.1,
) -> ReceiveStats:
    """The Event-Driven Consumer: call ``handler`` with each message as it arrives.

    The handler returning acknowledges the message; raising has it delivered again (after a
    pause growing from ``retry_delay`` up to 30 s while failures repeat). Runs until ``stop`` is
    set, ``max_messages`` were acknowledged, or nothing arrived for ``idle_timeout`` seconds.
    """
    stop = stop or threading.Event()
    idle_since = receiver.clock()
    handled = failures = 0
    while not stop.is_set() and (max_messages is None or handled < max_messages):
        received = receive_or_wait(receiver, stop)
        if received is None:
            if idle_timeout is not None and receiver.clock() - idle_since >= idle_timeout:
                break
            continue
        idle_since = receiver.clock()
        try:
            handler(received)
        except Exception:
            failures += 1
            _log.exception(
                "%s: the handler failed on %s; it will be delivered again", receiver.channel, received.message_id
            )
            receiver.nack(received)
            stop.wait(min(30.0, retry_delay * 2 ** (failures - 1)))
            continue
        failures = 0
        try:
            receiver.ack(received)
        except TransportError:
            raise
        except Exception:  # not recorded RECEIVED: have it again rather than lose it
            _log.exception(
                "%s: could not record %s as RECEIVED; it will be delivered again", receiver.channel, received.message_id
            )
            receiver.nack(received)
            continue
        handled += 1
    receiver.commit()
    return receiver.stats


def receive_or_wait(receiver: Receiver, stop: threading.Event) -> Received | None:
    """One :meth:`Receiver.receive` for a long-running consumer: a transient failure of the
    messaging system (the network, throttling) is logged and waited out, growing the pause up to
    30 s; a :class:`TransportError` (a missing stream, a bad configuration) is raised."""
    attempt = 0
    while not stop.is_set():
        try:
            return receiver.receive(timeout=receiver.poll_interval)
        except TransportError:
            raise
        except Exception as error:
            attempt += 1
            delay = min(30.0, 0.5 * 2 ** (attempt - 1))
            _log.warning("%s: receiving failed (%s); retrying in %.1f s", receiver.channel, error, delay)
            stop.wait(delay)
    return None
