"""Receiving: the polling consumer and the event-driven consumer (EIP), transactionally.

:class:`Receiver` is the Polling Consumer: ``receive(timeout)`` blocks until a message is
ready (or the timeout passes), the application processes it, then calls :meth:`Receiver.ack`
(or :meth:`Receiver.nack` to have it delivered again). :func:`rdss.gateway.listen.listen` is
the Event-Driven Consumer on top of it: it calls a handler for each message and acks when the
handler returns, nacks when it raises (:mod:`rdss.gateway.amgi` serves AMGI apps the same way).

Between the channel and the application, in order:

* classification (:func:`rdss.model.validation.validate`, at delivery time): a record the consumer
  cannot accept is never skipped but moved, decorated with its code, to the deployment's
  ``invalid`` or ``error`` channel (the spec's Invalid and Error Message Queues; the one reject
  path, :mod:`rdss.model.rejection`) and then settled: invalid (GENERR001/002/004/007/010, e.g. a
  malformed messageId written straight onto a data channel), expired (GENERR003). A receiver of
  ``invalid`` or ``error`` itself logs them instead, so nothing loops; a receiver of a brokered
  deployment's ``input`` leaves invalid records to the broker, which moves them;
* de-duplication: a messageId already in the Local Data Repository is dropped, not delivered:
  RECEIVED (or in flight in this receiver) means a duplicate - Kinesis delivers at least once;
  TO_SEND or SENT means the application's own message coming back, which the spec also says to
  discard ("a client ... will receive the sent Message back again"). Give producer and consumer
  different ``application`` names to see one's messages in the other;
* reassembly: parts of a sequence are held until all have arrived, then delivered as one whole
  message; while held they keep the partition's checkpoint behind them, so a restart reads them
  again. A sequence past its expiry (GENERR003) or waiting longer than ``sequence_timeout``
  (GENERR006) goes to the error channel, parts and all, as the sweep does in the deployed system;
  one whose whole message is invalid goes, every part decorated with the whole's code, to the
  channel of that code, as the sequencer does; a part that cannot join its sequence - its
  position held by another part, another total, a sequence this receiver lately completed - is
  moved alone to ``invalid`` (GENERR004), as the sequencer moves it (:mod:`rdss.model.sequences`);
* translation: a receiver told the version its application reads (``reads``) hands over every
  message in that version, translated where another was written (:mod:`rdss.model.translation`,
  a hop in messageHistory names it); one with no form in that version (a Vocabulary message for a
  4.0.0 reader) is moved to ``error`` (GENERR006, the translator's own code and reason in the
  description), never dropped;
* Message Selector: a predicate on the header; messages it rejects are settled, not delivered;
* Message Throttle: at most N messages a second are handed over.

After delivery the application acknowledges, nacks (a failed attempt: the message comes again;
after ``max_attempts`` it is poison and moved to ``error`` with GENERR009, the count kept with the
group's state so that a restart goes on counting) or rejects it with a code of its own
(:meth:`Received.reject`: moved to that code's channel). A record whose receiving raises is
counted and moved the same way, the records behind it delivered. Nothing blocks a partition.

Acknowledging records RECEIVED (durable at once) and settles the message's records; positions
are checkpointed before each poll and every ``commit_interval`` seconds - after the application
returned, never before (the spec's transactional receive). A crash between the two costs nothing:
the records are read again and dropped as duplicates.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from datetime import datetime

import orjson

from rdss.gateway.backend import Consumer, Delivery, Outcome, Outgoing, TransportError
from rdss.gateway.holding import SequenceHolding
from rdss.gateway.received import Received, ReceiveStats, Selector, describe_failure
from rdss.gateway.throttle import Throttle
from rdss.model import replay as replays
from rdss.model import timestamps, translation
from rdss.model.errors import ErrorCode
from rdss.model.rejection import Rejector, moved_key
from rdss.model.sequences import SEQUENCE_TIMEOUT_SECONDS
from rdss.model.validation import validate
from rdss.observability.outside import message_fields
from rdss.repository.entries import RECEIVED, Repository

_log = logging.getLogger(__name__)

Publish = Callable[[Sequence[Outgoing]], list[Outcome]]

_RECENT = 10_000
#: Failed attempts after which a message is poison (the first attempt and four retries).
MAX_ATTEMPTS = 5
_UNLIMITED = Rejector()


class Receiver:
    """A transactional Polling Consumer of one channel (see the module docstring)."""

    def __init__(
        self,
        consumer: Consumer,
        repository: Repository,
        *,
        publish: Publish,
        group: str | None = None,
        rejector: Rejector | None = _UNLIMITED,
        move_invalid: bool = True,
        max_attempts: int | None = MAX_ATTEMPTS,
        selector: Selector | None = None,
        throttle: float | None = None,
        batch_size: int = 100,
        poll_interval: float = 1.0,
        sequence_timeout: float = SEQUENCE_TIMEOUT_SECONDS,
        commit_interval: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        now: Callable[[], datetime] = timestamps.now,
        reads: str | None = None,
        tenant_jisc_id: int | None = None,
    ) -> None:
        self.consumer = consumer
        self.channel = consumer.channel
        self.repository = repository
        self.publish = publish
        #: The consumer group: its moves are keyed ``moved:<group>`` (:func:`rdss.model.rejection.moved_key`).
        self.group = group
        #: How records that will not be delivered are moved; None: logged and settled instead
        #: (a receiver of the invalid or error channel itself, so nothing loops).
        self.rejector = rejector
        #: False where another part of the system moves invalid records (the broker, for the
        #: deployment's ``input``): they are then logged and settled, not moved twice.
        self.move_invalid = move_invalid
        #: Failed attempts (nacks) after which a message is poison: moved to ``error``, GENERR009.
        self.max_attempts = max_attempts
        #: The Message API version the application reads (None: each message as it was written).
        self.reads = reads
        #: tenantJiscID for messages translated up to 4.0.0 (the deployment's tenant_jisc_id).
        self.tenant_jisc_id = tenant_jisc_id
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
        #: the parts of sequences, held until whole (a component: :class:`SequenceHolding`)
        self.holding = SequenceHolding(self, clock=clock, now=now, sequence_timeout=sequence_timeout)
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
            self.holding.time_out()
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
        self.repository.record([item.entry(header, RECEIVED) for item in items for header in item.parts])
        for item in items:
            self.consumer.settle(item.deliveries)
            for delivery in item.deliveries:
                self._order.pop(delivery.id, None)
            for header in item.parts:
                self.forget(str(header["messageId"]), recent=True)
        self.stats.acked += len(items)
        if self.clock() - self._last_commit >= self.commit_interval:
            self.commit()

    def nack(self, received: Received, reason: BaseException | str | None = None, *, count: bool = True) -> int:
        """Not processed: deliver it again. Its partition is rewound to it, so the messages after
        it in that partition come again too, except those already settled (acknowledged, or
        moved to invalid or error: a move is made once); what this receiver had read beyond it
        is forgotten.

        Each nack is a failed attempt, counted with the group's state (it survives a restart).
        At ``max_attempts`` the message is poison: instead of coming again it is moved to the
        ``error`` channel decorated with GENERR009 and an errorDescription naming ``reason`` (the
        handler's exception), recorded RECEIVED with that code, and the partition moves on.

        Args:
            reason: why it failed (the exception the handler raised).
            count: False when the failure was not the application's (the repository could not
                be written): delivered again without counting an attempt.

        Returns:
            The failed attempts so far (0 when not counted); ``>= max_attempts``: moved.
        """
        attempts = self._count_failure(received.deliveries[0]) if count and self.max_attempts is not None else 0
        if self.max_attempts is not None and attempts >= self.max_attempts:
            description = f"gave up after {attempts} failed attempts: {describe_failure(reason)}"
            _log.error("%s: %s: %s %s", self.channel, received.message_id, ErrorCode.GENERR009, description)
            if self._move_message(received, ErrorCode.GENERR009, description):
                self.stats.poison += 1
                return attempts
        self._rewind(received)
        return attempts

    def reject(self, received: Received, error_code: str, description: str) -> None:
        """The application refuses the message with one of the spec's codes (APPERRMET001-004,
        APPERRVOC002, or any GENERR): it is moved, decorated with the code and ``description``,
        to that code's channel (:mod:`rdss.model.rejection`), recorded RECEIVED with the code, and
        acknowledged. If it cannot be moved it is delivered again rather than lost.

        Raises:
            ValueError: ``error_code`` is not one of the spec's codes.
        """
        code = ErrorCode(error_code)
        if not description:
            raise ValueError("a rejection needs an errorDescription")
        if self._move_message(received, code, description):
            self.stats.rejected += 1
        else:
            self._rewind(received)

    def _count_failure(self, delivery: Delivery) -> int:
        try:
            return self.consumer.record_failure(delivery)
        except TransportError:
            raise
        except Exception as error:  # the count could not be kept: keep trying rather than give up early
            _log.warning("%s: could not count a failed attempt at %s: %s", self.channel, delivery.id, error)
            return 0

    def _move_message(self, received: Received, code: ErrorCode, description: str) -> bool:
        """Move a received message's records to the channel of ``code``, record it RECEIVED with
        the code, settle it. False (nothing settled) when a record could not be moved."""
        unmoved = self.move([(d, code, description) for d in received.deliveries], settle=False)
        if unmoved:
            return False
        try:
            self.repository.record([received.entry(h, RECEIVED, error_code=str(code)) for h in received.parts])
        except TransportError:
            raise
        except Exception as error:  # moved already: a re-read is then moved again, never lost
            _log.error("%s: could not record %s as %s: %s", self.channel, received.message_id, code, error)
        self.consumer.settle(received.deliveries)
        for delivery in received.deliveries:
            self._order.pop(delivery.id, None)
        for header in received.parts:
            self.forget(str(header["messageId"]), recent=True)
        return True

    def _rewind(self, received: Received) -> None:
        self.stats.redelivered += 1
        dropped: list[Delivery] = list(received.deliveries)
        for header in received.parts:
            self.forget(str(header["messageId"]))
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
        try:
            verdicts = [validate(d.payload, now=now) for d in deliveries]
            ids = [
                replays.dedupe_key(str(v.header["messageId"]), replays.mark_of(v.header))
                for v in verdicts
                if v.header is not None and (v.valid or v.error_code is ErrorCode.GENERR003)
            ]
            statuses = self.repository.statuses(ids) if ids else {}
        except Exception:  # the repository (or worse) failed for the whole read: read it again
            self.consumer.redeliver(deliveries)
            raise
        skipped: list[Delivery] = []
        moving: list[tuple[Delivery, ErrorCode, str]] = []
        retried: dict[str, list[Delivery]] = {}  # partition -> a failed record and those after it
        for delivery, verdict in zip(deliveries, verdicts, strict=True):
            if delivery.partition in retried:  # behind a failed record: read again after it
                retried[delivery.partition].append(delivery)
                continue
            self._order[delivery.id] = next(self._counter)
            try:
                if verdict.error_code is ErrorCode.GENERR003:
                    self.stats.expired += 1
                    moving.append((delivery, ErrorCode.GENERR003, verdict.error_description or ""))
                    continue
                if not verdict.valid or verdict.message is None:
                    assert verdict.error_code is not None
                    self.stats.invalid += 1
                    if self.move_invalid:  # the spec: moved to the Invalid (or Error) Message Queue
                        moving.append((delivery, verdict.error_code, verdict.error_description or ""))
                    else:
                        _log.warning(
                            "%s: record %s not delivered (the broker moves it): %s %s",
                            self.channel,
                            delivery.id,
                            verdict.error_code,
                            verdict.error_description,
                            extra=message_fields(verdict.header or {}, self.channel, errorCode=verdict.error_code),
                        )
                        skipped.append(delivery)
                    continue
                header = verdict.message["messageHeader"]
                mark = replays.mark_of(header)
                if mark is not None and not mark.reaches(self.group):
                    self.stats.filtered += 1  # a replay for another consumer group alone
                    skipped.append(delivery)
                    continue
                message_id = replays.dedupe_key(str(header["messageId"]), mark)
                if mark is not None:  # recorded and de-duplicated as this replay's delivery of it
                    header = {**header, "messageId": message_id}
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
                    skipped.extend(self.holding.hold(delivery, verdict, now))
                else:
                    self._in_flight.add(message_id)
                    self.offer(Received(verdict.message, delivery.payload, self.channel, (delivery,), (header,), self))
            except TransportError:
                raise
            except Exception as error:  # this record's failure, not its partition's
                if verdict.header is not None:  # not in flight: it comes again, or is moved
                    self.forget(str(verdict.header.get("messageId")))
                if not self._failed(delivery, error):
                    retried[delivery.partition] = [delivery]
        self.consumer.settle(skipped)
        for delivery in skipped:
            self._order.pop(delivery.id, None)
        self.move(moving)
        for again in retried.values():
            self.stats.redelivered += 1
            for delivery in again:
                self._order.pop(delivery.id, None)
            self.consumer.redeliver(again)

    def in_flight(self, message_id: str) -> None:
        """``message_id`` is held or handed out: read again meanwhile, it is a duplicate."""
        self._in_flight.add(message_id)

    def arrival(self, delivery: Delivery) -> int:
        """The order ``delivery`` was read in (-1: not known), for rewinds."""
        return self._order.get(delivery.id, -1)

    def _drop_after(self, partition: str, first: int) -> list[Delivery]:
        """Forget what was read from ``partition`` at or after arrival ``first`` (ready messages
        and held parts); return it."""
        dropped: list[Delivery] = []
        keep: deque[Received] = deque()
        for received in self._ready:
            if any(d.partition == partition and self.arrival(d) >= first for d in received.deliveries):
                dropped.extend(received.deliveries)
                for header in received.parts:
                    self.forget(str(header["messageId"]))
            else:
                keep.append(received)
        self._ready = keep
        dropped.extend(self.holding.drop_after(partition, first))
        return dropped

    def _failed(self, delivery: Delivery, error: Exception) -> bool:
        """Receiving one record raised: a failed attempt. True: moved to ``error`` (GENERR009) as
        its attempts are used up; False: read again, with the records after it on its partition."""
        _log.error("%s: receiving record %s failed", self.channel, delivery.id, exc_info=error)
        self._drop_after(delivery.partition, self._order.get(delivery.id, -1))
        attempts = self._count_failure(delivery)
        if attempts < (self.max_attempts or MAX_ATTEMPTS):
            return False
        why = f"gave up after {attempts} failed attempts at receiving it: {describe_failure(error)}"
        if self.move([(delivery, ErrorCode.GENERR009, why)]):
            return False  # could not be moved: read again, never lost
        self.stats.poison += 1
        return True

    def offer(self, received: Received) -> None:
        """A whole message for the application, in the version it reads, unless the selector
        refuses it."""
        if self.reads is not None:
            translated = self._translate(received)
            if translated is None:
                return
            received = translated
        if self.selector is not None and not self.selector(received.header):
            self.stats.filtered += 1
            self.consumer.settle(received.deliveries)
            for header in received.parts:
                self.forget(str(header["messageId"]))
            return
        self._ready.append(received)

    def _translate(self, received: Received) -> Received | None:
        """``received`` in the version the application reads; None when it has none there (then
        moved to ``error``: the message is valid, this consumer cannot take it)."""
        assert self.reads is not None
        try:
            payload = translation.translate(
                received.payload, self.reads, tenant_jisc_id=self.tenant_jisc_id, now=self.now(), judged=True
            )
        except translation.Untranslatable as error:
            for header in received.parts:
                self.forget(str(header["messageId"]))
            self.stats.untranslatable += 1
            why = f"cannot be translated to {self.reads} for {self.group or 'this consumer'}: {error.code} {error}"
            self.move([(d, ErrorCode.GENERR006, why) for d in received.deliveries])
            return None
        if payload is received.payload:
            return received
        message = orjson.loads(payload)
        written = str(received.header.get("version"))
        return Received(
            message, payload, received.channel, received.deliveries, received.parts, received.receiver, written
        )

    def _next_ready(self) -> Received | None:
        owned = set(self.consumer.partitions())
        self.holding.release_unowned(owned)
        while self._ready:
            received = self._ready.popleft()
            if any(d.partition not in owned for d in received.deliveries):
                for header in received.parts:  # another worker owns the partition now
                    self.forget(str(header["messageId"]))
                continue
            if self.throttle is not None:
                before = self.throttle.waited
                self.throttle.wait()
                self.stats.throttled_seconds += self.throttle.waited - before
            if timestamps.expired(received.header, self.now()):  # delivery is attempted now, not at read time
                for header in received.parts:
                    self.forget(str(header["messageId"]))
                self.stats.expired += len(received.deliveries)
                self.move([(d, ErrorCode.GENERR003, "expirationTimestamp passed") for d in received.deliveries])
                continue
            self.stats.delivered += 1
            _log.info("Message received", extra=message_fields(received.header, self.channel))
            return received
        return None

    # -- the invalid and error channels --------------------------------------------------------
    def move(self, items: list[tuple[Delivery, ErrorCode, str]], *, settle: bool = True) -> list[Delivery]:
        """Move records, decorated, to the channel of their code (the one reject path,
        :mod:`rdss.model.rejection`) - or, on a receiver of the invalid or error channel itself, log
        them, so nothing loops - and settle them. Returns those that could not be moved: they are
        left unsettled (read again, never lost). ``settle=False`` leaves settling to the caller."""
        if not items:
            return []
        unmoved: list[Delivery] = []
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
                    unmoved.append(delivery)
                    continue
                # put on invalid/error by this consumer itself, keyed as its move: never through
                # input, where the broker judges producers' messages by their content alone
                outgoing = Outgoing(rejection.channel, rejection.record, moved_key(self.group), rejection.headers)
                moving.append((delivery, outgoing))
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
                else:  # left unsettled: read again after a restart rather than lost
                    unmoved.append(delivery)
                    _log.error(
                        "%s: record %s (%s) could not be moved to %s: %s %s",
                        self.channel,
                        delivery.id,
                        outgoing.headers["errorCode"],
                        outgoing.channel,
                        ErrorCode.GENERR005 if outcome.retries_exhausted else ErrorCode.GENERR006,
                        outcome.error_code,
                    )
        if settle:
            done = [d for d, _, _ in items if d not in unmoved]
            self.consumer.settle(done)
            for delivery in done:
                self._order.pop(delivery.id, None)
        return unmoved

    def forget(self, message_id: str, *, recent: bool = False) -> None:
        """``message_id`` is no longer in flight (``recent``: and was just received or moved)."""
        self._in_flight.discard(message_id)
        if recent:
            self._recent[message_id] = None
            if len(self._recent) > _RECENT:
                self._recent.popitem(last=False)
