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

from rdss.gateway.amqp import mosaic
from rdss.gateway.amqp.consumer import AmqpConsumer
from rdss.gateway.amqp.naming import (
    H_AUTH_TOKEN,
    H_CHANNEL,
    H_CONTEXT,
    H_ENVELOPE,
    H_KEY,
    QUEUE_CHANNELS,
    routing_key,
)
from rdss.gateway.amqp.options import WORD, Options
from rdss.gateway.amqp.publisher import ConfirmingPublisher, Publish, Result
from rdss.gateway.amqp.redeliveries import RedeliveryCounter
from rdss.gateway.amqp.vhost import VirtualHost
from rdss.gateway.backend import Outcome, Outgoing, Settings, StartPosition
from rdss.gateway.inline_broker import InlineBroker
from rdss.model import schemas

_log = logging.getLogger(__name__)


class AmqpTransport:
    """One RabbitMQ virtual host (:class:`~rdss.gateway.amqp.vhost.VirtualHost`) as a
    :class:`rdss.gateway.backend.Transport`: publishing, and consumers reading through the same host."""

    scheme = "amqp"
    #: A message is published on the exchange it names (the inline broker routes ``input``).
    entry_channel: str | None = None

    def __init__(self, options: Options, settings: Settings, *, counter: RedeliveryCounter | None = None) -> None:
        self.vhost = VirtualHost(options, settings, counter=counter)
        self.options = options
        self.settings = settings
        self.names = self.vhost.names
        self.sleep: Callable[[float], None] = time.sleep

    @property
    def publisher(self) -> ConfirmingPublisher:
        return self.vhost.publisher

    @property
    def counter(self) -> RedeliveryCounter:
        return self.vhost.counter

    @property
    def inline(self) -> InlineBroker:
        return self.vhost.inline

    # -- Transport ------------------------------------------------------------------------------
    def address(self, channel: str) -> str:
        return self.vhost.address(channel)

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
        group) what is published after this call returns.

        Raises:
            UnusableName: a group queue's name would be over AMQP's 255 bytes.
        """
        if group is not None:  # named now, not at the first subscribe: a mistake, not a retry
            for message_type in schemas.SPOKEN_TYPES:
                self.vhost.names.queue(group, self.address(channel), message_type)
        return AmqpConsumer(self.vhost, channel, group)

    def close(self) -> None:
        self.vhost.close()

    def declare(self, channel: str, group: str) -> list[str]:
        """Create a consumer group's durable queues for ``channel`` now, without consuming (see
        :meth:`VirtualHost.declare`); the queue names."""
        return self.vhost.declare(channel, group)

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
