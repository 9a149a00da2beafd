"""The transport interface every gateway backend implements: Kinesis, memory, RabbitMQ.

The gateway (sending, receiving, request-reply, the consumer patterns) is written once against
the two protocols here; a backend adapts one messaging system to them and knows nothing about
RDSS messages (a messaging system without the deployment's broker function in front of it has
that part played by :mod:`rdss.gateway.inline_broker`, which its backend calls). The vocabulary
is deliberately the common ground of a partitioned log and a broker queue:

==================  =================================  ====================================
this interface      Kinesis (and the memory bus)       a broker queue (RabbitMQ, Mosaic)
==================  =================================  ====================================
channel             a stream (``rdss-<env>-metadata``)  an exchange (topic), or a queue
key                 partition key (order within it)     routing key hint / ignored
partition           a shard                             the consumer's queue (one)
position            a sequence number                   a delivery tag
group               a lease table entry per shard       a durable queue bound to the channel
``settle``          checkpoint (once every earlier      ``basic_ack``
                    delivery of the shard is settled)
``redeliver``       rewind the shard to the delivery    ``basic_nack(requeue=True)``, or a
                                                        delay-queue retry
``commit``          write the checkpoints               nothing (acks are already final)
==================  =================================  ====================================

A backend is opened from a URL (``kinesis://dev``, ``memory://tests``, ``amqp://...``) by the
factory registered for its scheme (:func:`register`), and supplies a :class:`Transport` and a
Local Data Repository (:class:`rdss.repository.entries.Repository`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from rdss.gateway.exceptions import GatewayError
from rdss.host.extras import missing_extra
from rdss.host.statedir import StateError
from rdss.host.statedir import state_directory as state_directory  # where it was first defined
from rdss.model.rejection import Rejector
from rdss.model.retry import SPEC_BACKOFF, Backoff

if TYPE_CHECKING:
    from rdss.gateway.claims import MessageClaims
    from rdss.gateway.url import GatewayURL
    from rdss.repository.entries import Repository

#: Where a consumer group with no recorded position starts reading a channel.
StartPosition = Literal["earliest", "latest"]


class TransportError(GatewayError):
    """The messaging system could not be used at all (unknown channel, unreachable, refused)."""


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One serialised message to publish on a channel."""

    #: Logical channel name (``input``, ``metadata``...); the transport resolves its address.
    channel: str
    #: The message exactly as it travels (UTF-8 JSON).
    payload: bytes
    #: Messages with the same key keep their relative order (Kinesis partition key; all parts of
    #: a sequence share the sequence id as key). Broker transports may ignore it.
    key: str
    #: What a broker needs to route without parsing: messageId, messageType, messageClass, and
    #: for sequence parts sequence/position/total.
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Outcome:
    """What became of one :class:`Outgoing` after the transport's own retries."""

    message: Outgoing
    #: None when the messaging system acknowledged the message (stored, confirmed); else the
    #: system's error code for the last attempt (e.g. ``ProvisionedThroughputExceededException``).
    error_code: str | None = None
    error_message: str = ""
    #: True when the failure was transient and retries ran out (the spec's GENERR005); False
    #: for a refusal no retry would change (an unknown stream, a record too large).
    retries_exhausted: bool = False
    #: Where it landed, when the system says (shard id and sequence number; queue and tag).
    partition: str | None = None
    position: str | None = None

    @property
    def ok(self) -> bool:
        """True when the message is safely in the channel."""
        return self.error_code is None


@dataclass(frozen=True, slots=True)
class Delivery:
    """One message as it came off a channel, with where it came from."""

    channel: str
    #: The shard / queue it was read from; order is guaranteed only within one partition.
    partition: str
    #: Its place in the partition (sequence number, delivery tag, offset), opaque to callers.
    position: str
    payload: bytes
    key: str | None = None
    #: Approximate arrival time in the channel (epoch seconds), when the system records it.
    arrived: float | None = None
    #: Anything else the transport knows (e.g. ``redelivered`` for a broker queue).
    attributes: Mapping[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        """Unique within a channel: ``<partition>/<position>``."""
        return f"{self.partition}/{self.position}"


@runtime_checkable
class Consumer(Protocol):
    """Reads one channel for one consumer group (or for nobody in particular: a browser).

    Deliveries come in per-partition order. Each is eventually either *settled* (processed, or
    deliberately skipped) or *redelivered*; a delivery never settled is delivered again after a
    restart. That is the transactional receive the spec asks for: a position is only
    recorded for what the application finished with.
    """

    channel: str

    def partitions(self) -> list[str]:
        """The partitions this consumer reads now (its leased shards; its one queue). Cheap:
        at most an occasional listing call (a browser looks for child shards)."""
        ...

    def poll(self, max_messages: int = 100, *, partition: str | None = None, wait: float = 0.0) -> list[Delivery]:
        """What is available now, in per-partition order; at most ``max_messages`` per partition.

        Args:
            partition: read only this one (request-reply polls each shard from its own thread;
                concurrent calls for distinct partitions are allowed).
            wait: a transport that can block for the first message (a broker queue) may wait
                this long; a log transport returns at once and the caller sleeps between polls.
        """
        ...

    def settle(self, deliveries: Sequence[Delivery]) -> None:
        """These are done with. A broker acks each now; a log records the furthest position
        before which everything is settled at the next :meth:`commit`."""
        ...

    def redeliver(self, deliveries: Sequence[Delivery]) -> None:
        """Deliver these again, in order. Callers pass the delivery to retry *and* every later
        one they buffered from the same partition (and then forget them): a log rewinds the
        partition to the earliest one and reads on from there, handing out again none that was
        settled meanwhile (a move is made once); a broker requeues each."""
        ...

    def record_failure(self, delivery: Delivery) -> int:
        """The application failed to process ``delivery`` once more: count it and return the
        attempts so far. The count is kept with the group's state (a log: the partition's lease
        row; a broker queue: a header the retried message carries), so it survives a restart of
        the consumer; the gateway moves a message that reaches ``max_attempts`` to ``error``."""
        ...

    def commit(self) -> None:
        """Persist what :meth:`settle` made final (checkpoints); a no-op for acking transports."""
        ...

    def close(self) -> None:
        """Commit, give up any leases so another worker takes over at once, release resources."""
        ...


class BrokerFunction(Protocol):
    """The deployment's broker function played by a transport itself, for a messaging system
    with no broker in front of it (:class:`rdss.gateway.inline_broker.InlineBroker`): what the
    gateway asks of it."""

    @property
    def claims(self) -> MessageClaims | None:
        """Which message each messageId published to ``input`` named first, to tell a resend
        from another message under the same id (None: not checked, no digest needed)."""
        ...


@runtime_checkable
class Transport(Protocol):
    """Publishes to and consumes from the channels of one messaging system.

    Besides its methods a transport declares two optional capabilities, :attr:`entry_channel`
    and :attr:`inline`, each None where it lacks it: only Kinesis has an entry channel, only a
    broker-less transport (memory, RabbitMQ) an inline broker.
    """

    scheme: str

    @property
    def entry_channel(self) -> str | None:
        """Where every message enters the deployment (Kinesis: ``input``, archived as the
        Audit Log, where the broker routes each by its content): a send named for a routed or
        sequence channel is published there (:meth:`rdss.gateway.send.Sender.entry`). None: each
        message is published on the channel it names."""
        ...

    @property
    def inline(self) -> BrokerFunction | None:
        """The broker function this transport plays itself (memory://, amqp://), None where the
        deployment's broker does it (Kinesis)."""
        ...

    def address(self, channel: str) -> str:
        """The physical address of a logical channel (stream name, exchange name...).

        Raises:
            TransportError: the channel is unknown to this deployment.
        """
        ...

    def publish(self, messages: Sequence[Outgoing]) -> list[Outcome]:
        """Publish and block until every message is acknowledged or given up on.

        Returns one outcome per message, in the order given. Messages are batched as the system
        allows (PutRecords: 500 a call; a broker: publisher confirms), transient failures are
        retried per message with the configured backoff, and a message still failing is
        reported in its outcome - never dropped silently. Messages sharing a key are published
        in the order given (a retried one may land after later ones; readers reassemble
        sequences in any order).
        """
        ...

    def consumer(self, channel: str, *, group: str | None, start: StartPosition = "earliest") -> Consumer:
        """A consumer of ``channel``.

        Args:
            group: consumers with the same group compete for the channel's messages (shard
                leases; a shared durable queue) and share recorded positions, so a restarted
                member resumes where the group got to. None browses: no lease, no recorded
                position, nothing taken from anyone else (``rdss tail``, waiting for a reply).
            start: where a group with no recorded position begins; a browser with
                ``"latest"`` sees only messages published after this call returns.
        """
        ...

    def close(self) -> None:
        """Release connections and threads."""
        ...


@dataclass(frozen=True)
class Settings:
    """What the gateway tells a backend factory besides the URL."""

    #: The application this gateway belongs to: names its Local Data Repository entries and is
    #: the default consumer group.
    application: str = "gateway"
    #: Logical channel name -> physical address, overriding the backend's naming.
    channels: Mapping[str, str] = field(default_factory=dict)
    #: Retries of failed sends (the spec's 2^n x 100 ms, 10 retries, then GENERR005).
    backoff: Backoff = SPEC_BACKOFF
    #: How long a consumer's lease on a partition lasts without renewal (seconds).
    lease_duration: float = 10.0
    #: Pre-built clients by service name (``kinesis``, ``dynamodb``): tests wrap real clients to
    #: inject faults, benchmarks count calls.
    clients: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class Backend:
    """What a backend factory returns: a transport and the Local Data Repository next to it."""

    transport: Transport
    repository: Repository
    #: How a message that will not be delivered is moved to the invalid or error channel: the
    #: transport's record limit and, where one is needed, its claim-check store.
    rejector: Rejector = field(default_factory=Rejector)


def local_data_repository(
    url: GatewayURL, settings: Settings, default: Callable[[], Repository], *, dynamodb: Callable[[], Any]
) -> Repository:
    """The application's Local Data Repository: the store the URL's ``ldr=`` option names
    (``dynamodb://TABLE``, ``sqlite:///path``, ``memory://``; see :mod:`rdss.repository.stores`),
    else the backend's ``default``.

    Raises:
        URLError: a malformed ``ldr=``.
    """
    from rdss.gateway.url import URLError
    from rdss.repository.stores import open_repository

    option = url.param("ldr")
    if not option:
        try:
            return default()
        except StateError as error:  # the default file's directory ($XDG_STATE_HOME) unusable
            raise TransportError(f"the Local Data Repository: {error}") from None
    try:
        return open_repository(option, settings.application, dynamodb=dynamodb)
    except ValueError as error:
        raise URLError(f"{url.raw or url.name}: {error}") from None


BackendFactory = Callable[["GatewayURL", Settings], Backend]

# scheme -> factory, or "module:function" imported on first use (so a backend's client library,
# e.g. pika for amqp://, is only needed by those who use it).
_FACTORIES: dict[str, BackendFactory | str] = {
    "kinesis": "rdss.gateway.log.kinesis:open_backend",
    "memory": "rdss.gateway.log.memory:open_backend",
    "amqp": "rdss.gateway.amqp:open_backend",
    "amqps": "rdss.gateway.amqp:open_backend",
}


def register(scheme: str, factory: BackendFactory | str) -> None:
    """Make ``<scheme>://`` URLs open backends with ``factory`` (a callable or ``"module:function"``)."""
    _FACTORIES[scheme.lower()] = factory


def schemes() -> list[str]:
    """The URL schemes a backend is registered for."""
    return sorted(_FACTORIES)


def open_backend(url: GatewayURL, settings: Settings) -> Backend:
    """The backend a URL names.

    Raises:
        TransportError: no backend is registered for the scheme, or its module is missing.
    """
    factory = _FACTORIES.get(url.scheme)
    if factory is None:
        raise TransportError(f"no gateway backend for {url.scheme}:// (known: {', '.join(schemes())})")
    if isinstance(factory, str):
        module_name, _, function = factory.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as error:
            needs = missing_extra(error)
            raise TransportError(
                f"the {url.scheme}:// backend is not available: " + (f"it {needs}" if needs else str(error))
            ) from error
        factory = getattr(module, function)
        _FACTORIES[url.scheme] = factory
    return factory(url, settings)
