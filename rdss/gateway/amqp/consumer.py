"""Consuming a channel from RabbitMQ: the group's queues, manual acks, retry tiers, dead letters."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson
import pika
import pika.exceptions

from rdss.gateway.amqp import headers as amqp_headers
from rdss.gateway.amqp import mosaic
from rdss.gateway.amqp.naming import (
    BROKER_HEADERS,
    H_ATTEMPTS,
    H_AUTH_TOKEN,
    H_CONTEXT,
    H_DELIVERY_COUNT,
    H_ENVELOPE,
    H_KEY,
    H_QUEUE,
    H_REASON,
    QUEUE_CHANNELS,
)
from rdss.gateway.amqp.options import tier_for
from rdss.gateway.amqp.publisher import Publish
from rdss.gateway.backend import Delivery, TransportError
from rdss.gateway.consumer import MAX_ATTEMPTS
from rdss.gateway.received import describe_failure
from rdss.model.errors import ErrorCode
from rdss.model.rejection import Rejection, moved_key
from rdss.model.retry import PATIENT

if TYPE_CHECKING:
    from rdss.gateway.amqp.vhost import VirtualHost

_log = logging.getLogger(__name__)

#: Settled deliveries acknowledged together at the latest (sooner at every poll and commit).
_ACK_BATCH = 500
#: How long a dropped connection is held to account for the returns of messages in transit (s).
_IN_TRANSIT_WINDOW = 300.0


@dataclass(slots=True)
class _Raw:
    queue: str
    tag: int
    redelivered: bool
    exchange: str
    routing_key: str
    properties: Any
    body: bytes
    #: times it came back from consumers that never answered (the broker's or the file's count)
    redeliveries: int = 0
    #: the refusals ``x-rdss-attempts`` carries, once read
    _refusals: int | None = None

    @property
    def attempts(self) -> int:
        """Failed attempts so far: refusals carried in ``x-rdss-attempts`` (set when it went
        through a delay tier; a value that is not a count counts as none, and is logged once)
        plus returns since then (each one a consumer that died holding it)."""
        if self._refusals is None:
            self._refusals = amqp_headers.counted(self.properties.headers or {}, H_ATTEMPTS, queue=self.queue)
        return self._refusals + self.redeliveries


class AmqpConsumer:
    """A :class:`rdss.gateway.backend.Consumer` of one channel: the group's queues, manual acks.

    One blocking connection, one channel, a basic.consume per queue (RabbitMQ pushes up to
    ``prefetch`` messages). :meth:`settle` acknowledges at the next :meth:`poll` or
    :meth:`commit` (the gateway's receiver commits before every poll), so a batch costs one
    ``multiple`` ack frame instead of one per message. A lost connection is reopened on the next
    poll; deliveries handed out before it are then neither acked nor requeued by this consumer
    (RabbitMQ already put them back), which is why positions carry the connection's epoch.
    """

    def __init__(self, vhost: VirtualHost, channel: str, group: str | None) -> None:
        self.vhost = vhost
        self.channel = channel
        self.group = group
        self.classify = channel not in QUEUE_CHANNELS
        #: a group's quorum queues: RabbitMQ counts the returns (x-delivery-count); elsewhere the
        #: virtual host's counter (the per-host file of classic queues) does
        self.broker_counts = vhost.options.queue_type == "quorum" and self.classify and group is not None
        self._lock = threading.RLock()
        self._incoming: deque[_Raw] = deque()
        #: delivery tags not yet acknowledged, oldest first (tags grow on a channel)
        self._unacked: OrderedDict[int, None] = OrderedDict()
        #: settled, not yet acknowledged: acks go in one frame at the next poll or commit
        self._settled: list[tuple[int, str]] = []
        self._ready: deque[Delivery] = deque()
        self._handed: dict[str, _Raw] = {}
        self._counted: dict[str, str] = {}
        self._queues: list[str] = []
        self._consumer_tags: dict[str, str] = {}
        self._connection: Any = None
        self._amqp: Any = None
        self._epoch = 0
        #: When this consumer lost its connection lately (see :meth:`_in_transit_returns`).
        self._drops: deque[float] = deque()
        self._next_attempt = 0.0
        self._failures = 0
        self._closed = False
        self._connect()

    # -- Consumer ------------------------------------------------------------------------------
    def partitions(self) -> list[str]:
        return list(self._queues)

    def poll(self, max_messages: int = 100, *, partition: str | None = None, wait: float = 0.0) -> list[Delivery]:
        with self._lock:
            if self._closed:
                return []
            if not self._usable():
                return []
            self._flush_acks()
            try:
                self._connection.process_data_events(time_limit=0)
                if wait > 0 and not self._incoming and not self._has_ready(partition):
                    self._connection.process_data_events(time_limit=wait)
                self._convert()
            except pika.exceptions.AMQPError as error:
                self._lose(error)
                return []
            return self._take(max_messages, partition)

    def settle(self, deliveries: Sequence[Delivery]) -> None:
        with self._lock:
            forget = []
            tags: list[tuple[int, str]] = []
            for delivery in deliveries:
                raw = self._handed.pop(delivery.position, None)
                key = self._counted.pop(delivery.position, None)
                if key is not None:
                    forget.append(key)
                if raw is not None and self._current(delivery):
                    tags.append((raw.tag, _counter_key(raw)))
            self._settled.extend(tags)
            if len(self._settled) >= _ACK_BATCH:
                self._flush_acks()
            self.vhost.counter.forget(forget)

    def redeliver(self, deliveries: Sequence[Delivery]) -> None:
        """The earliest delivery of each queue was refused by its handler: it goes to the next
        delay tier (or ``dead_letter`` when the tiers are used up) and is acknowledged here.
        The later ones were only read ahead: they are handed out again, in order."""
        with self._lock:
            by_queue: dict[str, list[Delivery]] = {}
            for delivery in deliveries:
                if delivery.position in self._handed:
                    by_queue.setdefault(delivery.partition, []).append(delivery)
            again: list[Delivery] = []
            for group in by_queue.values():
                group.sort(key=lambda d: _tag(d.position))
                refused, *later = group
                self._retry(refused)
                again.extend(later)
            for delivery in sorted(again, key=lambda d: _tag(d.position), reverse=True):
                if self._current(delivery):
                    self._ready.appendleft(delivery)
                else:
                    self._handed.pop(delivery.position, None)
                    self._counted.pop(delivery.position, None)

    def record_failure(self, delivery: Delivery) -> int:
        """The attempts so far travel with the message (``x-rdss-attempts``, set when it is sent
        through a delay tier, plus the broker's ``x-delivery-count`` of consumers that died
        holding it since), so any consumer on any host goes on counting."""
        return int(delivery.attributes.get("attempts", 0)) + 1

    def commit(self) -> None:
        """Send the acks of what was settled since the last poll (one frame for a run of them)."""
        with self._lock:
            self._flush_acks()

    def close(self) -> None:
        """Stop consuming; RabbitMQ puts back whatever was not acknowledged (marked redelivered,
        and forgiven in the redelivery counter: a clean close is not a crash)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._flush_acks()
            self._forgive_held()
            connection, self._connection = self._connection, None
            if connection is not None and connection.is_open:
                with contextlib.suppress(pika.exceptions.AMQPError):
                    connection.close()

    def __enter__(self) -> AmqpConsumer:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # -- connection -----------------------------------------------------------------------------
    def _connect(self) -> None:
        connection = self.vhost.connection()
        try:
            amqp = connection.channel()
            prefetch = self.vhost.options.prefetch
            queues = self.vhost.declare_queues(amqp, self.channel, self.group)
            if self.broker_counts:
                # quorum queues have no channel-wide (global) QoS: the limit is shared out between
                # the group's queues, so that no more is in flight than on classic queues (what is
                # in flight when a connection drops comes back counted)
                amqp.basic_qos(prefetch_count=max(1, -(-prefetch // len(queues))), global_qos=False)
            else:
                amqp.basic_qos(prefetch_count=prefetch, global_qos=True)
            tags = {amqp.basic_consume(queue, self._on_message, auto_ack=False): queue for queue in queues}
        except BaseException as error:
            with contextlib.suppress(pika.exceptions.AMQPError):
                connection.close()
            if isinstance(error, pika.exceptions.AMQPError):
                raise TransportError(f"cannot subscribe to {self.channel}: {error!r}") from error
            raise
        self._connection, self._amqp, self._queues, self._consumer_tags = connection, amqp, queues, tags
        self._epoch += 1
        self._unacked.clear()
        self._settled.clear()
        self._incoming.clear()
        self._ready.clear()
        self._handed.clear()
        self._counted.clear()
        self._failures = 0

    def _usable(self) -> bool:
        if self._connection is not None and self._connection.is_open:
            return True
        if time.monotonic() < self._next_attempt:
            return False
        try:
            self._connect()
        except TransportError as error:
            self._failures += 1
            delay = PATIENT.delay(self._failures)
            self._next_attempt = time.monotonic() + delay
            _log.warning("%s: reconnecting to RabbitMQ failed (%s); next attempt in %.1f s", self.channel, error, delay)
            return False
        _log.info("%s: reconnected to RabbitMQ", self.channel)
        return True

    def _lose(self, error: BaseException) -> None:
        _log.warning(
            "%s: connection to RabbitMQ lost: %r; unacknowledged messages go back to their queues", self.channel, error
        )
        self._forgive_held()
        self._drops.append(time.monotonic())
        connection, self._connection = self._connection, None
        if connection is not None and connection.is_open:
            with contextlib.suppress(Exception):
                connection.close()

    def _in_transit_returns(self) -> int:
        """Returns RabbitMQ counted for messages that were on their way to this consumer when its
        connection dropped: bytes it never read, so it cannot name them as it names those it held
        (:meth:`_forgive_held`). One per drop in the last :data:`_IN_TRANSIT_WINDOW` seconds is
        taken off any message's count (a crash of this consumer is never among them: it would not
        have lived to see the drop; ``x-delivery-limit`` stays RabbitMQ's backstop)."""
        now = time.monotonic()
        while self._drops and now - self._drops[0] > _IN_TRANSIT_WINDOW:
            self._drops.popleft()
        return len(self._drops)

    def _forgive_held(self) -> None:
        """Everything delivered on this connection and not acknowledged is about to be redelivered
        because of us, not of the messages: forgive it in the counter (best effort)."""
        held = [_counter_key(raw) for raw in [*self._incoming, *self._handed.values()]]
        held.extend(key for _, key in self._settled)  # settled, but the ack never went out
        self._incoming.clear()
        self._handed.clear()
        self._counted.clear()
        self._ready.clear()
        self._unacked.clear()
        self._settled.clear()
        self._epoch += 1  # what was handed out before is now stale
        try:
            self.vhost.counter.forgive(held)
        except Exception as error:
            _log.warning(
                "%s: could not forgive %d held message(s) in the redelivery counter: %s", self.channel, len(held), error
            )

    def _on_message(self, _amqp: Any, method: Any, properties: Any, body: bytes) -> None:
        queue = self._consumer_tags.get(method.consumer_tag, "")
        self._unacked[method.delivery_tag] = None
        self._incoming.append(
            _Raw(
                queue,
                method.delivery_tag,
                bool(method.redelivered),
                method.exchange,
                method.routing_key,
                properties,
                body,
            )
        )

    def _current(self, delivery: Delivery) -> bool:
        return delivery.position.partition(".")[0] == str(self._epoch)

    def _flush_acks(self) -> None:
        if self._settled and self._connection is not None:
            settled, self._settled = self._settled, []
            if not self._ack(*(tag for tag, _ in settled)):  # they come back: not their fault
                with contextlib.suppress(Exception):
                    self.vhost.counter.forgive([key for _, key in settled])

    def _ack(self, *tags: int) -> bool:
        """Acknowledge deliveries: the run of oldest unacknowledged ones with one ``multiple`` ack
        (one frame for a whole batch), any others one by one. False if the connection failed."""
        settled = set(tags)
        last = None
        while self._unacked and next(iter(self._unacked)) in settled:
            last = self._unacked.popitem(last=False)[0]
            settled.discard(last)
        try:
            if last is not None:
                self._amqp.basic_ack(last, multiple=True)
            for tag in sorted(settled):
                if self._unacked.pop(tag, False) is None:
                    self._amqp.basic_ack(tag)
        except pika.exceptions.AMQPError as error:  # it will be redelivered, and dropped as a duplicate
            self._lose(error)
            return False
        return True

    # -- from AMQP deliveries to gateway deliveries ---------------------------------------------
    def _has_ready(self, partition: str | None) -> bool:
        return any(partition is None or d.partition == partition for d in self._ready)

    def _take(self, max_messages: int, partition: str | None) -> list[Delivery]:
        taken: list[Delivery] = []
        counts: dict[str, int] = {}
        keep: deque[Delivery] = deque()
        while self._ready:
            delivery = self._ready.popleft()
            if (partition is not None and delivery.partition != partition) or counts.get(
                delivery.partition, 0
            ) >= max_messages:
                keep.append(delivery)
                continue
            counts[delivery.partition] = counts.get(delivery.partition, 0) + 1
            taken.append(delivery)
        self._ready = keep
        return taken

    def _convert(self) -> None:
        """Translate, count redeliveries and classify what arrived; queue the rest to hand out."""
        batch = list(self._incoming)
        self._incoming.clear()
        if not batch:
            return
        redelivered = [raw for raw in batch if raw.redelivered and not self.broker_counts]
        counter = self.vhost.counter
        counts = counter.increment([_counter_key(raw) for raw in redelivered]) if redelivered else {}
        dead: list[tuple[_Raw, str]] = []
        moved: list[tuple[_Raw, Rejection]] = []
        for raw in batch:
            try:
                self._convert_one(raw, counts, dead, moved)
            except Exception as error:  # this message's failure: it must not stall the queue
                self._failed(raw, error, moved)
        self._dead_letter(dead)
        self._move(moved)

    def _failed(self, raw: _Raw, error: Exception, moved: list[tuple[_Raw, Rejection]]) -> None:
        """Receiving one message raised: retried through the delay tiers (``x-rdss-attempts``); at
        ``MAX_ATTEMPTS`` moved to ``error``, GENERR009 naming the exception."""
        attempts = raw.attempts + 1
        _log.error("%s: receiving from %s failed (attempt %d)", self.channel, raw.queue, attempts, exc_info=error)
        why = f"gave up after {attempts} failed attempts at receiving it: {describe_failure(error)}"
        if attempts >= MAX_ATTEMPTS:
            moved.append((raw, self.vhost.inline.rejector.reject(raw.body, ErrorCode.GENERR009, why)))
        else:
            self._retry_raw(raw, attempts)

    def _convert_one(
        self, raw: _Raw, counts: Mapping[str, int], dead: list[tuple[_Raw, str]], moved: list[tuple[_Raw, Rejection]]
    ) -> None:
        """One message: dead-lettered, moved (the classifier refused it) or queued to hand out."""
        headers = raw.properties.headers or {}
        if self.broker_counts:  # the broker's count, less the returns this process caused
            returns = amqp_headers.counted(headers, H_DELIVERY_COUNT, queue=raw.queue)
            forgiven = self.vhost.counter.count(_counter_key(raw)) + self._in_transit_returns()
            count = max(0, returns - forgiven) if returns else 0
        else:
            count = counts.get(_counter_key(raw), 0) if raw.redelivered else 0
        raw.redeliveries = count
        limit = self.vhost.options.redelivery_limit
        if count > limit:
            dead.append((raw, f"redeliveries-exceeded: redelivered {count} times, limit {limit}"))
            return
        payload, carried = _unwrap(raw)
        if self.classify:
            rejection = self.vhost.inline.screen(payload)
            if rejection is not None:
                moved.append((raw, rejection))
                _log.warning(
                    "%s: %s moved to %s: %s %s",
                    self.channel,
                    raw.queue,
                    rejection.channel,
                    rejection.code,
                    rejection.description,
                )
                return
        position = f"{self._epoch}.{raw.tag}"
        self._handed[position] = raw
        if raw.redelivered:
            self._counted[position] = _counter_key(raw)
        attributes: dict[str, Any] = {
            "redelivered": raw.redelivered,
            "redeliveries": count,
            "attempts": raw.attempts,
            "exchange": raw.exchange,
            "routing_key": raw.routing_key,
            #: the AMQP headers: for a dead letter, x-rdss-dead-reason and x-rdss-queue say why and whence
            "headers": dead_letter_reason(headers),
        }
        if carried is None:
            carried = _carried_in_headers(headers)
        if carried is not None:
            attributes["auth_token"] = carried.auth_token
            attributes["message_context"] = dict(carried.context)
        self._ready.append(
            Delivery(
                self.channel,
                raw.queue,
                position,
                payload,
                amqp_headers.text(headers.get(H_KEY)),
                float(raw.properties.timestamp) if raw.properties.timestamp else None,
                attributes,
            )
        )

    # -- retries, dead letters, invalid messages ------------------------------------------------
    def _retry(self, delivery: Delivery) -> None:
        raw = self._handed.pop(delivery.position)
        key = self._counted.pop(delivery.position, None)
        if key is not None:
            self.vhost.counter.forget([key])
        if not self._current(delivery):
            return  # RabbitMQ put it back when the connection was lost
        self._retry_raw(raw, raw.attempts + 1)

    def _retry_raw(self, raw: _Raw, attempts: int) -> None:
        """Through the delay tier of retry number ``attempts``, or to ``dead_letter`` after them."""
        tier = tier_for(self.vhost.options.tiers, attempts)
        if tier is None:
            self._dead_letter([(raw, f"retries-exhausted: refused {attempts} times")])
            return
        exchange = self.vhost.names.name(tier.name)
        item = Publish(
            exchange, raw.queue, raw.body, _copy_properties(raw.properties, {H_ATTEMPTS: attempts}), mandatory=False
        )
        self._publish_then_ack([(raw, item)], f"retry {attempts} via {tier.name}")

    def _dead_letter(self, items: list[tuple[_Raw, str]]) -> None:
        if not items:
            return
        names = self.vhost.names
        work = []
        for raw, reason in items:
            attempts = raw.attempts
            extra = {H_REASON: reason, H_QUEUE: raw.queue, H_ATTEMPTS: attempts}
            work.append((raw, Publish(names.dead_letter, raw.queue, raw.body, _copy_properties(raw.properties, extra))))
            _log.error(
                "%s: message %s dead-lettered from %s: %s", self.channel, raw.properties.message_id, raw.queue, reason
            )
        self._publish_then_ack(work, "dead_letter")
        self.vhost.counter.forget([_counter_key(raw) for raw, _ in items if raw.redelivered])

    def _move(self, items: list[tuple[_Raw, Rejection]]) -> None:
        if not items:
            return
        work = []
        for raw, rejection in items:
            kind = rejection.channel
            exchange = self.vhost.names.name(self.vhost.address(kind))
            # keyed as this group's move, as every consumer's move is (rdss.model.rejection.moved_key)
            headers = {H_QUEUE: raw.queue, H_ENVELOPE: "rdss", H_KEY: moved_key(self.group)}
            properties = _copy_properties(raw.properties, headers)
            work.append((raw, Publish(exchange, kind, rejection.record, properties)))
        self._publish_then_ack(work, "invalid/error")
        self.vhost.counter.forget([_counter_key(raw) for raw, _ in items if raw.redelivered])

    def _publish_then_ack(self, work: list[tuple[_Raw, Publish]], what: str) -> None:
        """Publish the copies (confirmed), then ack the originals: at least once, never lost. A
        copy the broker did not confirm leaves its original unacked and requeued."""
        results = self.vhost.publisher.publish([item for _, item in work])
        for (raw, _), result in zip(work, results, strict=True):
            if result.code is None:
                self._ack(raw.tag)
                continue
            _log.error(
                "%s: could not publish to %s (%s %s); the message goes back to %s",
                self.channel,
                what,
                result.code,
                result.message,
                raw.queue,
            )
            self._unacked.pop(raw.tag, None)
            with contextlib.suppress(pika.exceptions.AMQPError):
                self._amqp.basic_nack(raw.tag, requeue=True)
            with contextlib.suppress(Exception):
                self.vhost.counter.forgive([_counter_key(raw)])  # requeued by us, not by a crash


def _tag(position: str) -> int:
    return int(position.rpartition(".")[2])


def _counter_key(raw: _Raw) -> str:
    identity = raw.properties.message_id or hashlib.sha256(raw.body).hexdigest()[:32]
    return f"{raw.queue}/{identity}"


def _unwrap(raw: _Raw) -> tuple[bytes, mosaic.Carried | None]:
    """The RDSS payload of a delivery: Mosaic envelopes are translated back; anything that does
    not translate is handed on as it is, for the classifier to judge."""
    if amqp_headers.text((raw.properties.headers or {}).get(H_ENVELOPE)) == "rdss":
        return raw.body, None
    try:
        return mosaic.decode(raw.body)
    except mosaic.TranslationError:
        return raw.body, None


def dead_letter_reason(headers: Mapping[str, Any]) -> dict[str, Any]:
    """The headers of a delivery, with ``x-rdss-dead-reason`` and ``x-rdss-queue`` filled in from
    RabbitMQ's ``x-death`` when the broker itself dead-lettered it (a quorum queue's delivery
    limit), so a dead letter says why in the same words whoever moved it."""
    found = dict(headers)
    deaths = found.get("x-death")
    if H_REASON in found or not isinstance(deaths, list) or not deaths or not isinstance(deaths[0], Mapping):
        return found
    latest = deaths[0]  # RabbitMQ puts the most recent death first
    # e.g. "expired": the TTL of a delay tier, not a death
    if amqp_headers.text(latest.get("reason")) != "delivery_limit":
        return found
    queue = latest.get("queue", "")
    found[H_REASON] = (
        "redeliveries-exceeded: returned by consumers that never answered more often than the "
        "queue's x-delivery-limit (dead-lettered by RabbitMQ)"
    )
    found[H_QUEUE] = amqp_headers.text(queue) or repr(queue)
    return found


def _carried_in_headers(headers: Mapping[str, Any]) -> mosaic.Carried | None:
    """A send's auth token and context from the AMQP headers (no Mosaic envelope carried them)."""
    token, context = headers.get(H_AUTH_TOKEN), headers.get(H_CONTEXT)
    if token is None and context is None:
        return None
    context_text = amqp_headers.text(context)
    try:
        found = orjson.loads(context_text) if context_text else {}
    except orjson.JSONDecodeError:
        found = {}
    return mosaic.Carried(amqp_headers.text(token), found if isinstance(found, dict) else {})


def _copy_properties(properties: Any, headers: Mapping[str, Any]) -> pika.BasicProperties:
    # the broker's delivery count and dead-letter history belong to the delivery, not the copy:
    # the copy starts afresh (its failed attempts so far are in x-rdss-attempts); what pika cannot
    # write again travels as text, so that no header keeps the copy from being published
    kept = {k: v for k, v in (properties.headers or {}).items() if k not in BROKER_HEADERS}
    merged = amqp_headers.writable(kept)
    merged.update(headers)
    return pika.BasicProperties(
        content_type=properties.content_type,
        delivery_mode=2,
        message_id=properties.message_id,
        type=properties.type,
        correlation_id=properties.correlation_id,
        reply_to=properties.reply_to,
        app_id=properties.app_id,
        timestamp=properties.timestamp,
        headers=merged,
    )
