"""Exchange, queue and routing-key names: Mosaic's ``<channel>.<entity>.<messageType>`` keys
on the ``commands`` and ``events`` topic exchanges, under an optional namespace."""

from __future__ import annotations

import re
from dataclasses import dataclass

from rdss.gateway.exceptions import UnusableName
from rdss.model import schemas

#: AMQP's limit on an exchange or queue name (a short string).
MAX_NAME_BYTES = 255

#: Channels that are queues of their own (the spec's Invalid and Error Message Queues, Mosaic's
#: dead_letter queue) rather than routes through the topic exchanges.
QUEUE_CHANNELS = frozenset({"invalid", "error", "dead_letter"})

#: AMQP headers this backend sets.
H_KEY, H_CHANNEL, H_ENVELOPE = "rdss-key", "rdss-channel", "rdss-envelope"
H_ATTEMPTS, H_REASON, H_QUEUE = "x-rdss-attempts", "x-rdss-dead-reason", "x-rdss-queue"
#: A send's Mosaic auth token and context where no Mosaic envelope carries them (envelope=rdss,
#: the invalid/error/dead_letter queues): AMQP headers, beside the message's bytes.
H_AUTH_TOKEN, H_CONTEXT = "rdss-auth-token", "rdss-message-context"
#: What RabbitMQ sets on a quorum queue's message each time it is returned (and redelivered).
H_DELIVERY_COUNT = "x-delivery-count"
#: Headers RabbitMQ keeps about a message's own journey (returns, dead-letterings). A copy this
#: backend publishes starts its journey afresh without them: RabbitMQ adds its own again, and a
#: malformed ``x-death`` a producer wrote makes RabbitMQ 3.10's dead-lettering crash the delay
#: tier's queue process (with the messages it held) when the copy's TTL expires.
BROKER_HEADERS = frozenset(
    {
        H_DELIVERY_COUNT,
        "x-death",
        "x-first-death-exchange",
        "x-first-death-queue",
        "x-first-death-reason",
        "x-last-death-exchange",
        "x-last-death-queue",
        "x-last-death-reason",
    }
)

_ENTITY = re.compile(r"[A-Z][a-z0-9]*")


@dataclass(frozen=True)
class Names:
    """Exchange, queue and routing-key names of one namespace."""

    namespace: str = ""

    def name(self, base: str) -> str:
        return f"{self.namespace}.{base}" if self.namespace else base

    @property
    def commands(self) -> str:
        return self.name("commands")

    @property
    def events(self) -> str:
        return self.name("events")

    @property
    def dead_letter(self) -> str:
        return self.name("dead_letter")

    def exchange_for(self, message_class: str) -> str:
        """Commands go to ``commands``; Events and Documents to ``events``."""
        return self.commands if message_class == "Command" else self.events

    def queue(self, group: str, address: str, message_type: str) -> str:
        """A consumer group's queue of one messageType on one channel.

        Raises:
            UnusableName: the name is over AMQP's 255 bytes (a long group or namespace).
        """
        name = self.name(f"{group}.{address}.{message_type}")
        if len(name.encode()) > MAX_NAME_BYTES:
            raise UnusableName(
                f"the queue name {name[:40]}... is {len(name.encode())} bytes and AMQP allows {MAX_NAME_BYTES}: "
                "give a shorter consumer group (or namespace)"
            )
        return name


def entity(message_type: str) -> str:
    """``MetadataCreate`` -> ``metadata``; ``VocabularyPatch`` -> ``vocabulary``."""
    match = _ENTITY.match(message_type)
    return match.group(0).lower() if match else "message"


def routing_key(address: str, message_type: str) -> str:
    """``<channel>.<entity>.<messageType>``, e.g. ``metadata.metadata.MetadataCreate``."""
    return f"{address}.{entity(message_type)}.{message_type}"


def exchanges_for(message_type: str) -> set[str]:
    """Which of the two topic exchanges a messageType travels through (by its classes in any
    version: a PreservationEvent, 4.0.0's, travels as any class)."""
    classes = schemas.spoken_classes(message_type)
    kinds = {"commands" if c == "Command" else "events" for c in classes}
    return kinds or {"commands", "events"}
