"""One RabbitMQ virtual host as a gateway transport: topology, publishing, consumers."""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import orjson
import pika
import pika.exceptions

from rdss.gateway.amqp import fieldtables, mosaic
from rdss.gateway.amqp.consumer import AmqpConsumer
from rdss.gateway.amqp.naming import (
    H_AUTH_TOKEN,
    H_CHANNEL,
    H_CONTEXT,
    H_ENVELOPE,
    H_KEY,
    QUEUE_CHANNELS,
    Names,
    exchanges_for,
    routing_key,
)
from rdss.gateway.amqp.options import WORD, Options
from rdss.gateway.amqp.publisher import ConfirmingPublisher, Publish, Result
from rdss.gateway.amqp.redeliveries import ForgivenReturns, RedeliveryCounter, SqliteRedeliveries
from rdss.gateway.backend import Outcome, Outgoing, Settings, StartPosition, TransportError
from rdss.gateway.claims import SqliteClaims
from rdss.gateway.inline_broker import INPUT, InlineBroker
from rdss.model import schemas

_log = logging.getLogger(__name__)

#: How far the broker's ``x-delivery-limit`` lies above ``redeliveries``: room for returns a
#: consumer forgave (connections lost while holding the message) before RabbitMQ's backstop.
RETURNS_ALLOWANCE = 20

#: One per process, not per transport: a gateway reopened in the same process (a restarted
#: receiver, a new Gateway) still knows the returns this process caused.
FORGIVEN = ForgivenReturns()


class AmqpTransport:
    """One RabbitMQ virtual host as a :class:`rdss.gateway.backend.Transport`."""

    scheme = "amqp"

    def __init__(self, options: Options, settings: Settings, *, counter: RedeliveryCounter | None = None) -> None:
        fieldtables.install()  # no header a publisher wrote can stop this process's connections
        self.options = options
        self.settings = settings
        self.names = Names(options.namespace)
        with self.connection() as connection:  # first: no state file for a broker never reached
            self._declare_topology(connection.channel())
        # quorum queues count deliveries in the broker: the per-host file is for classic ones only
        self.counter: RedeliveryCounter = counter or (
            SqliteRedeliveries(options.state) if options.queue_type == "classic" else FORGIVEN
        )
        self.publisher = ConfirmingPublisher(options.parameters, timeout=options.confirm_timeout)
        self.sleep: Callable[[float], None] = time.sleep
        #: What the broker function does on Kinesis: routing by content, classifying, telling a
        #: resend from a conflict (the messageIds published from this host, in the state file).
        self.inline = InlineBroker(claims=SqliteClaims(options.state))

    # -- Transport ------------------------------------------------------------------------------
    def address(self, channel: str) -> str:
        address = self.settings.channels.get(channel, channel)
        if not WORD.match(address):
            raise TransportError(f"channel address {address!r} cannot be a routing-key word (no dots, spaces, # or *)")
        return address

    def publish(self, messages: Sequence[Outgoing]) -> list[Outcome]:
        """Publish with confirms; retry lost connections, nacks and timeouts with the backoff."""
        items = [self._item(message) for message in messages]
        outcomes: dict[int, Outcome] = {}
        pending = list(range(len(messages)))
        delays = self.settings.backoff.delays()
        last: dict[int, Result] = {}
        while pending:
            results = self.publisher.publish([items[i] for i in pending])
            retry: list[int] = []
            for index, result in zip(pending, results, strict=True):
                item = items[index]
                if result.code is None:
                    outcomes[index] = Outcome(messages[index], partition=item.exchange, position=item.routing_key)
                elif result.transient:
                    retry.append(index)
                    last[index] = result
                else:
                    outcomes[index] = Outcome(messages[index], result.code, f"{result.message} ({item.routing_key})")
            pending = retry
            if not pending:
                break
            delay = next(delays, None)
            if delay is None:
                first = last[pending[0]]
                _log.error(
                    "GENERR005 after %d attempts: %d message(s) not confirmed by RabbitMQ: %s %s",
                    self.settings.backoff.max_retries + 1,
                    len(pending),
                    first.code,
                    first.message,
                )
                for index in pending:
                    outcomes[index] = Outcome(
                        messages[index], last[index].code, last[index].message, retries_exhausted=True
                    )
                break
            _log.warning(
                "%d message(s) not confirmed (%s); retrying in %.1f s", len(pending), last[pending[0]].message, delay
            )
            self.sleep(delay)
        return [outcomes[index] for index in range(len(messages))]

    def consumer(self, channel: str, *, group: str | None, start: StartPosition = "earliest") -> AmqpConsumer:
        """A consumer of ``channel``. ``start`` has no effect: a broker queue keeps no history, so
        a group reads what reached its queues since they were declared, and a browser (no
        group) what is published after this call returns."""
        return AmqpConsumer(self, channel, group)

    def close(self) -> None:
        self.publisher.close()
        self.counter.close()

    # -- topology -------------------------------------------------------------------------------
    def connection(self) -> pika.BlockingConnection:
        """A new blocking connection to the broker.

        Raises:
            TransportError: the broker cannot be reached or refuses the credentials.
        """
        try:
            return pika.BlockingConnection(self.options.parameters)
        except (pika.exceptions.AMQPError, OSError) as error:  # OSError: a host name that does not resolve
            target = f"{self.options.parameters.host}:{self.options.parameters.port}"
            raise TransportError(f"cannot connect to RabbitMQ at {target}: {error!r}") from error

    def declare(self, channel: str, group: str) -> list[str]:
        """Create a consumer group's durable queues for ``channel`` now, without consuming, so
        that nothing published before its first consumer starts is refused; the queue names."""
        with self.connection() as connection:
            return self.declare_queues(connection.channel(), channel, group)

    def declare_queues(self, amqp: Any, channel: str, group: str | None) -> list[str]:
        """Declare (idempotently) and bind the queues ``group`` reads ``channel`` from; a browser
        (no group) gets one exclusive, auto-deleted queue."""
        address = self.address(channel)
        if channel in QUEUE_CHANNELS:
            exchange = self.names.name(address)
            if group is not None:
                return [self.names.name(address)]
            queue = amqp.queue_declare("", exclusive=True, auto_delete=True).method.queue
            amqp.queue_bind(queue, exchange)
            return [queue]
        # the input channel is a Wire Tap: every channel's messages, whatever their first word
        owner = "*" if channel == INPUT else address
        if group is None:
            queue = amqp.queue_declare("", exclusive=True, auto_delete=True).method.queue
            for message_type in schemas.MESSAGE_TYPES:
                for kind in exchanges_for(message_type):
                    amqp.queue_bind(queue, self.names.name(kind), routing_key(owner, message_type))
            return [queue]
        queues = []
        arguments = self.queue_arguments()
        for message_type in schemas.MESSAGE_TYPES:
            queue = self.names.queue(group, address, message_type)
            try:
                amqp.queue_declare(queue, durable=True, arguments=arguments)
            except pika.exceptions.ChannelClosedByBroker as error:
                if error.reply_code != 406:  # PRECONDITION_FAILED: it exists with other arguments
                    raise
                raise TransportError(
                    f"queue {queue} exists with other arguments than queue_type={self.options.queue_type}, "
                    f"redeliveries={self.options.redelivery_limit} ({error.reply_text}): a queue cannot change "
                    "its type or limit; give the URL the queue's own queue_type=/redeliveries=, or move over to "
                    "new queues (docs/rabbitmq.md)"
                ) from error
            for kind in exchanges_for(message_type):
                amqp.queue_bind(queue, self.names.name(kind), routing_key(owner, message_type))
            queues.append(queue)
        return queues

    def queue_arguments(self) -> dict[str, Any]:
        """The arguments of a consumer group's queues: for quorum queues, RabbitMQ's own delivery
        count. The consumer dead-letters a message returned more than ``redeliveries`` times
        (less the returns it caused itself by losing a connection: see
        :class:`~rdss.gateway.amqp.redeliveries.ForgivenReturns`); ``x-delivery-limit`` is the
        broker's backstop :data:`RETURNS_ALLOWANCE` above that, for a consumer that dies before
        it could look (dead-lettered by RabbitMQ to ``dead_letter``, at least once: the queue
        keeps it until the dead letter is confirmed)."""
        if self.options.queue_type == "classic":
            return {}
        return {
            "x-queue-type": "quorum",
            "x-delivery-limit": self.options.redelivery_limit + RETURNS_ALLOWANCE,
            "x-dead-letter-exchange": self.names.dead_letter,
            "x-dead-letter-strategy": "at-least-once",
            "x-overflow": "reject-publish",  # what at-least-once dead-lettering requires
        }

    def _declare_topology(self, amqp: Any) -> None:
        """The exchanges and shared queues every client may rely on (Mosaic: every service makes
        sure they exist when it starts)."""
        for kind in ("commands", "events"):
            amqp.exchange_declare(self.names.name(kind), exchange_type="topic", durable=True)
        for tier in self.options.tiers:
            name = self.names.name(tier.name)
            amqp.exchange_declare(name, exchange_type="fanout", durable=True)
            arguments = {"x-message-ttl": round(tier.delay * 1000), "x-dead-letter-exchange": ""}
            amqp.queue_declare(name, durable=True, arguments=arguments)
            amqp.queue_bind(name, name)
        for channel in sorted(QUEUE_CHANNELS):
            name = self.names.name(self.address(channel))
            amqp.exchange_declare(name, exchange_type="fanout", durable=True)
            amqp.queue_declare(name, durable=True)
            amqp.queue_bind(name, name)

    # -- outgoing -------------------------------------------------------------------------------
    def _item(self, message: Outgoing) -> Publish:
        # there is no broker function in front of RabbitMQ: a message sent to input takes the
        # routing key of the channel its content routes to (an invalid one goes to its queue)
        routed = self.inline.route(message)
        headers = routed.headers
        address = self.address(routed.channel)
        payload = routed.payload
        envelope = "rdss"
        # a send's Mosaic auth token and context: in the envelope, or failing that beside it
        auth_token = message.headers.get("authToken")
        context_text = message.headers.get("messageContext")
        context = orjson.loads(context_text) if context_text else None
        # the key the broker function gave it: a producer's ``moved:...`` never survives a rejection
        amqp_headers: dict[str, Any] = {H_KEY: routed.key, H_CHANNEL: message.channel}
        for name in ("messageClass", "sequence", "position", "total", "errorCode"):
            if headers.get(name):
                amqp_headers[f"rdss-{name}"] = headers[name]
        if routed.channel in QUEUE_CHANNELS:
            exchange, key = self.names.name(address), address
        else:
            message_type, message_class = headers.get("messageType"), headers.get("messageClass")
            if not message_type or not message_class:
                message_type, message_class = self.inline.describe(payload)
            if message_type is not None and not WORD.match(message_type):
                message_type = None
            exchange = self.names.exchange_for(message_class or "Event")
            key = routing_key(address, message_type or "Unknown")
            if self.options.envelope == "mosaic":
                with contextlib.suppress(mosaic.TranslationError):
                    payload = mosaic.encode(payload, auth_token=auth_token, context=context)
                    envelope = "mosaic"
        if envelope != "mosaic":
            if auth_token is not None:
                amqp_headers[H_AUTH_TOKEN] = auth_token
            if context_text:
                amqp_headers[H_CONTEXT] = context_text
        amqp_headers[H_ENVELOPE] = envelope
        properties = pika.BasicProperties(
            content_type="application/json",
            delivery_mode=2,
            message_id=headers.get("messageId") or uuid.uuid4().hex,
            type=message.headers.get("messageType") or None,
            correlation_id=headers.get("correlationId") or None,
            reply_to=headers.get("returnAddress") or None,
            app_id=self.settings.application,
            timestamp=int(time.time()),
            headers=amqp_headers,
        )
        return Publish(exchange, key, payload, properties)
