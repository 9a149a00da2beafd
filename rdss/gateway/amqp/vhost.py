"""One RabbitMQ virtual host, as the publisher and the consumers of one transport share it.

What both sides need of the broker lives here once: the connection parameters and connections,
the names of exchanges and queues (:class:`~rdss.gateway.amqp.naming.Names`), the topology every
client declares when it starts (Mosaic's rule), a consumer group's queues and their arguments,
the redelivery counter, the confirming publisher and the inline broker (routing by content,
classifying, resends told from conflicts). :class:`~rdss.gateway.amqp.transport.AmqpTransport`
builds one and publishes through it; each :class:`~rdss.gateway.amqp.consumer.AmqpConsumer`
reads through the same one, so neither module needs the other.
"""

from __future__ import annotations

from typing import Any

import pika
import pika.exceptions

from rdss.gateway.amqp import fieldtables
from rdss.gateway.amqp.naming import QUEUE_CHANNELS, Names, exchanges_for, routing_key
from rdss.gateway.amqp.options import WORD, Options
from rdss.gateway.amqp.publisher import ConfirmingPublisher
from rdss.gateway.amqp.redeliveries import ForgivenReturns, RedeliveryCounter, SqliteRedeliveries
from rdss.gateway.backend import Settings, TransportError
from rdss.gateway.claims import SqliteClaims
from rdss.gateway.inline_broker import INPUT, InlineBroker
from rdss.host.statedir import StateError
from rdss.model import schemas

#: How far the broker's ``x-delivery-limit`` lies above ``redeliveries``: room for returns a
#: consumer forgave (connections lost while holding the message) before RabbitMQ's backstop.
RETURNS_ALLOWANCE = 20

#: One per process, not per virtual host: a gateway reopened in the same process (a restarted
#: receiver, a new Gateway) still knows the returns this process caused.
FORGIVEN = ForgivenReturns()


class VirtualHost:
    """One RabbitMQ virtual host: its topology declared, a publisher, a redelivery counter."""

    def __init__(self, options: Options, settings: Settings, *, counter: RedeliveryCounter | None = None) -> None:
        fieldtables.install()  # no header a publisher wrote can stop this process's connections
        self.options = options
        self.settings = settings
        self.names = Names(options.namespace)
        with self.connection() as connection:  # first: no state file for a broker never reached
            self._declare_topology(connection.channel())
        # quorum queues count deliveries in the broker: the per-host file is for classic ones only
        try:  # state= a directory, not SQLite, or unwritable: the caller's to fix, said in one line
            self.counter: RedeliveryCounter = counter or (
                SqliteRedeliveries(options.state) if options.queue_type == "classic" else FORGIVEN
            )
            claims = SqliteClaims(options.state)
        except StateError as error:
            raise TransportError(f"the state file (state=): {error}") from None
        self.publisher = ConfirmingPublisher(options.parameters, timeout=options.confirm_timeout)
        #: What the broker function does on Kinesis: routing by content, classifying, telling a
        #: resend from a conflict (the messageIds published from this host, in the state file).
        self.inline = InlineBroker(claims=claims)

    def address(self, channel: str) -> str:
        """The routing-key word of ``channel`` (the settings may rename a channel)."""
        address = self.settings.channels.get(channel, channel)
        if not WORD.match(address):
            raise TransportError(f"channel address {address!r} cannot be a routing-key word (no dots, spaces, # or *)")
        return address

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
            for message_type in schemas.SPOKEN_TYPES:
                for kind in exchanges_for(message_type):
                    amqp.queue_bind(queue, self.names.name(kind), routing_key(owner, message_type))
            return [queue]
        queues = []
        arguments = self.queue_arguments()
        for message_type in schemas.SPOKEN_TYPES:
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
