"""The RabbitMQ backend (``amqp://``, ``amqps://``), with the conventions of Mosaic's message bus.

URL: ``amqp://user:password@host:port/vhost?<options>``; besides pika's own query parameters
(``heartbeat``, ``connection_attempts``, ``socket_timeout``...):

* ``namespace=`` prefixes every exchange and queue name (``<namespace>.commands``); default none.
* ``retry=10s:3,30s:3`` the delay tiers: a message its handler refused waits 10 s before each
  of its first 3 retries, then 30 s before each of the next 3; after that it is dead-lettered.
  Units ``ms``, ``s``, ``m``; ``retry=none`` dead-letters at the first refusal.
* ``redeliveries=5`` how many times a message may be redelivered after its consumer died
  holding it before it is dead-lettered (see :mod:`rdss.redeliveries`).
* ``envelope=mosaic`` (default) sends messages as Mosaic envelopes (:mod:`rdss.mosaic`);
  ``envelope=rdss`` sends the RDSS JSON as it is. Consumers read either.
* ``state=PATH`` the SQLite file holding the redelivery counts and the Local Data Repository
  (default ``$XDG_STATE_HOME/rdss/amqp-<host>-<port>-<vhost>.sqlite``).
* ``prefetch=200`` unacknowledged messages a consumer may hold.

Topology (names shown without a namespace; everything durable, messages persistent):

* ``commands`` and ``events``: topic exchanges, for RDSS Commands and for Events and Documents;
  routing key ``<channel>.<entity>.<messageType>``.
* ``<group>.<channel>.<messageType>``: a queue per consumer group, channel and messageType,
  bound to ``commands`` and/or ``events`` with that routing key.
* ``retry.10s``, ``retry.30s``: a delay tier each, a fanout exchange into a queue of the same
  name with ``x-message-ttl`` and ``x-dead-letter-exchange=""``: when the TTL expires the
  message goes back to the queue it came from (it was published with that queue's name as its
  routing key).
* ``dead_letter``: a fanout exchange into the ``dead_letter`` queue - retries exhausted or too
  many redeliveries; the body untouched, the reason in the headers.
* ``invalid`` and ``error``: fanout exchanges into queues of the same names, the spec's Invalid
  and Error Message Queues (decorated messages).

Routing keys follow Mosaic's ``consumer.entity.command`` / ``producer.entity.event``: the
*entity* is ``metadata`` or ``vocabulary`` (from the messageType), the last word the
messageType, and the first word the RDSS channel's address. For a Command that is Mosaic's
consumer (a return address names who acts on it); for Events and Documents Mosaic names the
producer, but RDSS producers publish onto shared Data Type Channels rather than owning them, so
the channel is the owner and the producing application travels in the ``app_id`` property and
the envelope. This keeps the gateway's contract on every backend: a consumer of channel C sees
what was sent to C, and only that. As in Mosaic, *consumers own their queues*: a group's queues
exist from its first subscription (:meth:`AmqpTransport.declare` creates them ahead), and a
message no queue is bound for is refused (``NO_ROUTE``, the publish is mandatory) rather than
silently dropped.

Consuming: every queue of the group is a partition, consumed with manual acks. Before a
delivery is handed over, the consumer plays the part the broker function plays on Kinesis: it
applies :func:`rdss.validation.validate` and moves an invalid message, decorated
(:mod:`rdss.rejection`), to ``invalid`` or ``error`` (acknowledging it - never
redelivered in a loop); a message RabbitMQ redelivers (its consumer died holding it) is
counted in the redelivery counter and dead-lettered once the count exceeds the limit, even
across restarts. :meth:`AmqpConsumer.redeliver` sends the refused message through the delay
tiers, then to ``dead_letter``. A consumer that knows held messages will come back through
no fault of theirs (its connection dropped, or it closes) forgives them in the counter.

Publishing uses publisher confirms with many messages in flight (a pika ``SelectConnection``
driven from the calling thread: one confirm per message in a blocking channel costs an fsync
each). A lost connection, a nack or a confirm timeout is retried with the gateway's backoff;
``NO_ROUTE`` is not.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import re
import sqlite3
import threading
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

import pika
import pika.exceptions
from pika.adapters.select_connection import IOLoop

from rdss import mosaic, schemas
from rdss.gateway.backend import (
    Backend,
    Delivery,
    Outcome,
    Outgoing,
    Settings,
    StartPosition,
    TransportError,
    state_directory,
)
from rdss.gateway.repository import Entry
from rdss.gateway.url import GatewayURL, URLError
from rdss.redeliveries import RedeliveryCounter, SqliteRedeliveries, connect
from rdss.rejection import Rejection, reject
from rdss.topology import RDSS
from rdss.validation import validate

_log = logging.getLogger(__name__)
# pika logs every refused connection at ERROR with a traceback before raising; this backend turns
# those into TransportError and its own warnings, so without a handler of the application's they
# must not reach Python's last-resort handler (stderr)
logging.getLogger("pika").addHandler(logging.NullHandler())

#: Channels that are queues of their own (the spec's Invalid and Error Message Queues, Mosaic's
#: dead_letter queue) rather than routes through the topic exchanges.
QUEUE_CHANNELS = frozenset({"invalid", "error", "dead_letter"})

#: Where producers publish. There is no broker function in front of RabbitMQ: the topic
#: exchange routes, so a message sent to ``input`` gets the routing key of the channel the
#: topology's content-based routes name for it (MetadataCreate -> metadata, a Document answering
#: a Read -> responses), and a consumer of ``input`` taps every channel.
INPUT = "input"

#: Mosaic's default delay tiers: 10 s for the first retries, then 30 s.
DEFAULT_TIERS = "10s:3,30s:3"
DEFAULT_REDELIVERIES = 5
DEFAULT_PREFETCH = 200

#: AMQP headers this backend sets.
H_KEY, H_CHANNEL, H_ENVELOPE = "rdss-key", "rdss-channel", "rdss-envelope"
H_ATTEMPTS, H_REASON, H_QUEUE = "x-rdss-attempts", "x-rdss-dead-reason", "x-rdss-queue"

_OWN_PARAMS = frozenset({"namespace", "retry", "redeliveries", "envelope", "state", "prefetch", "confirm_timeout"})
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m)\Z")
_WORD = re.compile(r"[^.#*\s]+\Z")
_ENTITY = re.compile(r"[A-Z][a-z0-9]*")
_TRANSIENT = "CONNECTION"
#: Settled deliveries acknowledged together at the latest (sooner at every poll and commit).
_ACK_BATCH = 500


# -- configuration -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Tier:
    """One delay tier: wait ``delay`` seconds before each of ``attempts`` retries."""

    delay: float
    attempts: int

    @property
    def name(self) -> str:
        """``retry.10s``, ``retry.200ms``: the TTL is in the name because queue arguments
        cannot change once a queue exists."""
        millis = round(self.delay * 1000)
        return f"retry.{millis // 1000}s" if millis % 1000 == 0 else f"retry.{millis}ms"


def parse_tiers(text: str) -> tuple[Tier, ...]:
    """``10s:3,30s:3`` -> tiers; ``none`` -> no retries.

    Raises:
        URLError: malformed.
    """
    if text.strip().lower() in ("", "none", "0"):
        return ()
    tiers = []
    for item in text.split(","):
        delay_text, _, attempts_text = item.strip().partition(":")
        match = _DURATION.match(delay_text)
        if match is None or (attempts_text and not attempts_text.isdigit()):
            raise URLError(f"retry={text!r}: expected tiers like 10s:3,30s:3 (ms, s or m; attempts per tier)")
        value, unit = float(match.group(1)), match.group(2)
        delay = value / 1000 if unit == "ms" else value * 60 if unit == "m" else value
        attempts = int(attempts_text or 1)
        if delay <= 0 or attempts < 1:
            raise URLError(f"retry={text!r}: delays and attempts must be positive")
        tiers.append(Tier(delay, attempts))
    return tuple(tiers)


@dataclass(frozen=True)
class Options:
    """What an ``amqp://`` URL says besides where the broker is."""

    parameters: pika.URLParameters
    namespace: str = ""
    tiers: tuple[Tier, ...] = field(default_factory=lambda: parse_tiers(DEFAULT_TIERS))
    redelivery_limit: int = DEFAULT_REDELIVERIES
    envelope: Literal["mosaic", "rdss"] = "mosaic"
    state: Path = Path("rdss-amqp.sqlite")
    prefetch: int = DEFAULT_PREFETCH
    confirm_timeout: float = 30.0

    @classmethod
    def from_url(cls, url: GatewayURL) -> Options:
        """Split a URL into pika's connection parameters and this backend's options.

        Raises:
            URLError: an option is malformed.
        """
        parts = urlsplit(url.raw or f"{url.scheme}://{url.name}")
        ours: dict[str, str] = {}
        theirs: list[tuple[str, str]] = []
        for key, value in parse_qsl(parts.query, keep_blank_values=True):
            if key in _OWN_PARAMS:
                ours[key] = value
            else:
                theirs.append((key, value))
        broker = urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(theirs), ""))
        try:
            parameters = pika.URLParameters(broker)
        except ValueError as error:
            raise URLError(f"{url.raw!r}: {error}") from None
        namespace = ours.get("namespace", "")
        if namespace and not _WORD.match(namespace):
            raise URLError(f"namespace={namespace!r}: no dots, spaces, # or *")
        envelope = ours.get("envelope", "mosaic")
        if envelope not in ("mosaic", "rdss"):
            raise URLError(f"envelope={envelope!r}: mosaic or rdss")
        try:
            limit = int(ours.get("redeliveries", DEFAULT_REDELIVERIES))
            prefetch = int(ours.get("prefetch", DEFAULT_PREFETCH))
            confirm_timeout = float(ours.get("confirm_timeout", 30.0))
        except ValueError as error:
            raise URLError(f"{url.raw!r}: {error}") from None
        if limit < 0 or prefetch < 1 or confirm_timeout <= 0:
            raise URLError(f"{url.raw!r}: redeliveries >= 0, prefetch >= 1 and confirm_timeout > 0")
        vhost = unquote(parts.path[1:]) if len(parts.path) > 1 else "/"
        default_state = state_directory() / _file_name(parts.hostname or "localhost", parts.port, vhost, namespace)
        return cls(
            parameters=parameters,
            namespace=namespace,
            tiers=parse_tiers(ours.get("retry", DEFAULT_TIERS)),
            redelivery_limit=limit,
            envelope=envelope,  # type: ignore[arg-type]
            state=Path(ours["state"]).expanduser() if ours.get("state") else default_state,
            prefetch=prefetch,
            confirm_timeout=confirm_timeout,
        )


def _file_name(host: str, port: int | None, vhost: str, namespace: str) -> str:
    label = f"{host}-{port or 5672}-{quote(vhost, safe='')}" + (f"-{namespace}" if namespace else "")
    return f"amqp-{label}.sqlite"


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
        return self.name(f"{group}.{address}.{message_type}")


def entity(message_type: str) -> str:
    """``MetadataCreate`` -> ``metadata``; ``VocabularyPatch`` -> ``vocabulary``."""
    match = _ENTITY.match(message_type)
    return match.group(0).lower() if match else "message"


def routing_key(address: str, message_type: str) -> str:
    """``<channel>.<entity>.<messageType>``, e.g. ``metadata.metadata.MetadataCreate``."""
    return f"{address}.{entity(message_type)}.{message_type}"


def _exchanges_for(message_type: str) -> set[str]:
    """Which of the two topic exchanges a messageType travels through (by its classes)."""
    classes = schemas.classes_for(message_type)
    kinds = {"commands" if c == "Command" else "events" for c in classes}
    return kinds or {"commands", "events"}


# -- the Local Data Repository -------------------------------------------------------------------
class SqliteRepository:
    """The Local Data Repository of a broker client: a table in the backend's SQLite state file.

    The spec's repository is the client's own ("local"); on Kinesis the deployment's DynamoDB
    table serves, but a RabbitMQ client has no such table, so it keeps its entries next to its
    redelivery counts, one row per (application, messageId).
    """

    def __init__(self, path: str | Path, application: str) -> None:
        self.application = application
        self._lock = threading.Lock()
        self._db = connect(path)
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS messages (application TEXT NOT NULL, message_id TEXT NOT NULL, "
            "message_class TEXT, message_type TEXT, sequence TEXT, position INTEGER, status TEXT NOT NULL, "
            "return_address TEXT, correlation_id TEXT, updated REAL NOT NULL, PRIMARY KEY (application, message_id))"
        )
        # the code a message received and moved instead of processed was moved with (a column
        # files written before it existed gain on first use)
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(messages)")}
        if "error_code" not in columns:
            with contextlib.suppress(sqlite3.OperationalError):  # another process added it first
                self._db.execute("ALTER TABLE messages ADD COLUMN error_code TEXT")

    def record(self, entries: Sequence[Entry]) -> None:
        if not entries:
            return
        now = time.time()
        rows = [
            (
                self.application,
                e.message_id,
                e.message_class,
                e.message_type,
                e.sequence,
                e.position,
                e.status,
                e.return_address,
                e.correlation_id,
                now,
                e.error_code,
            )
            for e in entries
        ]
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany(
                    "INSERT OR REPLACE INTO messages (application, message_id, message_class, message_type, sequence, "
                    "position, status, return_address, correlation_id, updated, error_code) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    rows,
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def statuses(self, message_ids: Sequence[str]) -> dict[str, str]:
        found: dict[str, str] = {}
        with self._lock:
            for start in range(0, len(message_ids), 500):
                chunk = list(message_ids[start : start + 500])
                marks = ",".join("?" * len(chunk))
                query = f"SELECT message_id, status FROM messages WHERE application = ? AND message_id IN ({marks})"
                found.update(self._db.execute(query, [self.application, *chunk]).fetchall())
        return found

    def entry(self, message_id: str) -> Entry | None:
        with self._lock:
            row = self._db.execute(
                "SELECT message_class, message_type, sequence, position, status, return_address, correlation_id, "
                "error_code FROM messages WHERE application = ? AND message_id = ?",
                (self.application, message_id),
            ).fetchone()
        if row is None:
            return None
        return Entry(
            message_id, row[0] or "", row[1] or "", row[2] or "", int(row[3] or 1), row[4], row[5], row[6], row[7]
        )

    def close(self) -> None:
        with self._lock, contextlib.suppress(sqlite3.Error):
            self._db.close()


# -- publishing ----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Publish:
    exchange: str
    routing_key: str
    body: bytes
    properties: pika.BasicProperties
    mandatory: bool = True


@dataclass(frozen=True, slots=True)
class _Result:
    #: None: confirmed. Else NO_ROUTE (permanent), or a transient code (connection, nack, timeout).
    code: str | None = None
    message: str = ""

    @property
    def transient(self) -> bool:
        return self.code is not None and self.code != "NO_ROUTE"


class ConfirmingPublisher:
    """Publisher confirms with up to ``window`` messages in flight, synchronously.

    A pika ``SelectConnection`` whose I/O loop is driven from the calling thread (as pika's own
    BlockingConnection drives its loop), so many publishes share one round trip and RabbitMQ
    batches their fsyncs, where a blocking channel waits for one confirm at a time. The
    connection is opened on first use and again after it is lost; :meth:`publish` never raises
    for a broker failure, it reports it per message.
    """

    def __init__(self, parameters: pika.URLParameters, *, timeout: float = 30.0, window: int = 2000) -> None:
        self.parameters = parameters
        self.timeout = timeout
        self.window = window
        self._lock = threading.Lock()
        self._ioloop: IOLoop | None = None
        self._connection: Any = None
        self._channel: Any = None
        self._ready = False
        self._failure: str | None = None
        self._tag = 0
        self._outstanding: OrderedDict[int, int] = OrderedDict()
        self._results: dict[int, _Result] = {}
        self._returned: set[int] = set()
        self._routes: dict[tuple[str, str, str], list[int]] = {}
        #: Connections opened so far (the first included), for tests and benchmarks.
        self.connections = 0

    def publish(self, items: Sequence[_Publish]) -> list[_Result]:
        """Publish every item and wait for its confirm; one result per item, in order."""
        results: list[_Result] = []
        with self._lock:
            for start in range(0, len(items), self.window):
                results.extend(self._window(items[start : start + self.window]))
        return results

    def close(self) -> None:
        with self._lock:
            self._close()

    # -- one window of publishes --------------------------------------------------------------
    def _window(self, items: Sequence[_Publish]) -> list[_Result]:
        try:
            self._open()
        except ConnectionError as error:
            return [_Result(_TRANSIENT, str(error))] * len(items)
        self._results, self._returned, self._outstanding, self._routes = {}, set(), OrderedDict(), {}
        for slot, item in enumerate(items):
            if self._failure is not None:
                break
            self._tag += 1
            self._outstanding[self._tag] = slot
            self._routes.setdefault((item.properties.message_id, item.exchange, item.routing_key), []).append(slot)
            try:
                self._channel.basic_publish(item.exchange, item.routing_key, item.body, item.properties, item.mandatory)
            except pika.exceptions.AMQPError as error:
                self._lost(f"publish failed: {error!r}")
        done = self._drive(lambda: not self._outstanding or self._failure is not None, self.timeout)
        if self._outstanding:
            reason = self._failure or f"no confirm within {self.timeout:g} s"
            for slot in self._outstanding.values():
                self._results[slot] = _Result(_TRANSIENT if self._failure else "CONFIRM_TIMEOUT", reason)
            self._outstanding.clear()
            if not done:  # the broker may still be applying flow control: start afresh
                self._close()
        return [
            self._results.get(slot, _Result(_TRANSIENT, self._failure or "not published")) for slot in range(len(items))
        ]

    # -- callbacks ------------------------------------------------------------------------------
    def _on_confirm(self, frame: Any) -> None:
        method = frame.method
        ack = isinstance(method, pika.spec.Basic.Ack)
        if method.multiple:  # tags are confirmed in order: take them from the front
            settled = []
            while self._outstanding and next(iter(self._outstanding)) <= method.delivery_tag:
                settled.append(self._outstanding.popitem(last=False)[1])
        else:
            found = self._outstanding.pop(method.delivery_tag, None)
            settled = [] if found is None else [found]
        for slot in settled:
            if slot in self._returned:
                self._results[slot] = _Result("NO_ROUTE", "no queue is bound for this routing key: subscribe first")
            elif ack:
                self._results[slot] = _Result()
            else:
                self._results[slot] = _Result("NACK", "the broker could not take the message (basic.nack)")

    def _on_return(self, _channel: Any, method: Any, properties: Any, _body: bytes) -> None:
        # basic.return comes before the confirm of the same publish
        self._returned.update(self._routes.get((properties.message_id, method.exchange, method.routing_key), ()))

    def _lost(self, reason: str) -> None:
        if self._failure is None:
            self._failure = reason
        self._ready = False

    # -- the connection -------------------------------------------------------------------------
    def _open(self) -> None:
        if self._ready and self._connection is not None and self._connection.is_open:
            self._drive(lambda: True, 0)  # notice a connection the broker closed while we were idle
            if self._ready:
                return
        self._close()
        self._failure = None
        self._ioloop = IOLoop()
        self._ioloop.activate_poller()  # as pika's BlockingConnection does with the loop it drives
        opened: dict[str, str] = {}

        def on_channel(channel: Any) -> None:
            self._channel = channel
            channel.add_on_close_callback(lambda _ch, reason: self._lost(f"channel closed: {reason}"))
            channel.add_on_return_callback(self._on_return)
            channel.confirm_delivery(self._on_confirm, callback=lambda _frame: opened.setdefault("ok", ""))

        def on_open_error(_connection: Any, error: BaseException) -> None:
            opened["error"] = repr(error)

        self._connection = pika.SelectConnection(
            self.parameters,
            on_open_callback=lambda connection: connection.channel(on_open_callback=on_channel),
            on_open_error_callback=on_open_error,
            on_close_callback=lambda _connection, reason: self._lost(f"connection closed: {reason!r}"),
            custom_ioloop=self._ioloop,
        )
        self.connections += 1
        limit = (self.parameters.socket_timeout or 10.0) + 5.0
        self._drive(lambda: bool(opened) or self._failure is not None, limit)
        if "ok" not in opened:
            reason = opened.get("error") or self._failure or "timed out"
            self._close()
            raise ConnectionError(
                f"cannot connect to RabbitMQ at {self.parameters.host}:{self.parameters.port}: {reason}"
            )
        self._tag = 0
        self._ready = True

    def _drive(self, done: Callable[[], bool], timeout: float) -> bool:
        """Run the I/O loop until ``done()`` or ``timeout`` seconds (0: one pass); True if done."""
        assert self._ioloop is not None
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            wake = self._ioloop.call_later(max(0.0, min(remaining, 1.0)), lambda: None)
            self._ioloop.poll()
            self._ioloop.process_timeouts()
            self._ioloop.remove_timeout(wake)
            if done():
                return True
            if time.monotonic() >= deadline:
                return False

    def _close(self) -> None:
        connection, self._connection, self._channel, self._ready = self._connection, None, None, False
        if connection is not None and self._ioloop is not None and connection.is_open:
            with contextlib.suppress(pika.exceptions.AMQPError):
                connection.close()
            self._drive(lambda: bool(connection.is_closed), 5.0)
        if self._ioloop is not None:
            with contextlib.suppress(Exception):
                self._ioloop.close()
            self._ioloop = None


# -- the transport -------------------------------------------------------------------------------
class AmqpTransport:
    """One RabbitMQ virtual host as a :class:`rdss.gateway.backend.Transport`."""

    scheme = "amqp"

    def __init__(self, options: Options, settings: Settings, *, counter: RedeliveryCounter | None = None) -> None:
        self.options = options
        self.settings = settings
        self.names = Names(options.namespace)
        with self.connection() as connection:  # first: no state file for a broker never reached
            self._declare_topology(connection.channel())
        self.counter: RedeliveryCounter = counter or SqliteRedeliveries(options.state)
        self.publisher = ConfirmingPublisher(options.parameters, timeout=options.confirm_timeout)
        self.sleep: Callable[[float], None] = time.sleep

    # -- Transport ------------------------------------------------------------------------------
    def address(self, channel: str) -> str:
        address = self.settings.channels.get(channel, channel)
        if not _WORD.match(address):
            raise TransportError(f"channel address {address!r} cannot be a routing-key word (no dots, spaces, # or *)")
        return address

    def publish(self, messages: Sequence[Outgoing]) -> list[Outcome]:
        """Publish with confirms; retry lost connections, nacks and timeouts with the backoff."""
        items = [self._item(message) for message in messages]
        outcomes: dict[int, Outcome] = {}
        pending = list(range(len(messages)))
        delays = self.settings.backoff.delays()
        last: dict[int, _Result] = {}
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
        except pika.exceptions.AMQPError as error:
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
                for kind in _exchanges_for(message_type):
                    amqp.queue_bind(queue, self.names.name(kind), routing_key(owner, message_type))
            return [queue]
        queues = []
        for message_type in schemas.MESSAGE_TYPES:
            queue = self.names.queue(group, address, message_type)
            amqp.queue_declare(queue, durable=True)
            for kind in _exchanges_for(message_type):
                amqp.queue_bind(queue, self.names.name(kind), routing_key(owner, message_type))
            queues.append(queue)
        return queues

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
    def _item(self, message: Outgoing) -> _Publish:
        headers = message.headers
        address = self.address(message.channel)
        payload = message.payload
        envelope = "rdss"
        amqp_headers: dict[str, Any] = {H_KEY: message.key, H_CHANNEL: message.channel}
        for name in ("messageClass", "sequence", "position", "total", "errorCode"):
            if headers.get(name):
                amqp_headers[f"rdss-{name}"] = headers[name]
        if message.channel in QUEUE_CHANNELS:
            exchange, key = self.names.name(address), address
        else:
            message_type, message_class = headers.get("messageType"), headers.get("messageClass")
            if not message_type or not message_class:
                message_type, message_class = _type_and_class(payload)
            exchange = self.names.exchange_for(message_class or "Event")
            if message.channel == INPUT:  # the exchange is the broker: route by content now
                route = RDSS.route(message_type or "", message_class or "")
                address = self.address(route.channel) if route is not None else address
            key = routing_key(address, message_type or "Unknown")
            if self.options.envelope == "mosaic":
                with contextlib.suppress(mosaic.TranslationError):
                    payload, envelope = mosaic.encode(payload, auth_token=headers.get("authToken")), "mosaic"
        amqp_headers[H_ENVELOPE] = envelope
        properties = pika.BasicProperties(
            content_type="application/json",
            delivery_mode=2,
            message_id=headers.get("messageId") or uuid.uuid4().hex,
            type=headers.get("messageType") or None,
            correlation_id=headers.get("correlationId") or None,
            reply_to=headers.get("returnAddress") or None,
            app_id=self.settings.application,
            timestamp=int(time.time()),
            headers=amqp_headers,
        )
        return _Publish(exchange, key, payload, properties)


def _type_and_class(payload: bytes) -> tuple[str | None, str | None]:
    """messageType and messageClass read from the payload, when the caller gave no headers."""
    verdict = validate(payload, check_expiry=False, size_limit=None)
    header = verdict.header or {}
    message_type, message_class = header.get("messageType"), header.get("messageClass")
    return (
        message_type if isinstance(message_type, str) and _WORD.match(message_type) else None,
        message_class if isinstance(message_class, str) else None,
    )


# -- consuming -----------------------------------------------------------------------------------
@dataclass(slots=True)
class _Raw:
    queue: str
    tag: int
    redelivered: bool
    exchange: str
    routing_key: str
    properties: Any
    body: bytes


class AmqpConsumer:
    """A :class:`rdss.gateway.backend.Consumer` of one channel: the group's queues, manual acks.

    One blocking connection, one channel, a basic.consume per queue (RabbitMQ pushes up to
    ``prefetch`` messages). :meth:`settle` acknowledges at the next :meth:`poll` or
    :meth:`commit` (the gateway's receiver commits before every poll), so a batch costs one
    ``multiple`` ack frame instead of one per message. A lost connection is reopened on the next
    poll; deliveries handed out before it are then neither acked nor requeued by this consumer
    (RabbitMQ already put them back), which is why positions carry the connection's epoch.
    """

    def __init__(self, transport: AmqpTransport, channel: str, group: str | None) -> None:
        self.transport = transport
        self.channel = channel
        self.group = group
        self.classify = channel not in QUEUE_CHANNELS
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
            self.transport.counter.forget(forget)

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
        through a delay tier), so any consumer on any host goes on counting."""
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
        connection = self.transport.connection()
        try:
            amqp = connection.channel()
            amqp.basic_qos(prefetch_count=self.transport.options.prefetch, global_qos=True)
            queues = self.transport.declare_queues(amqp, self.channel, self.group)
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
            delay = min(30.0, 0.1 * 2**self._failures)
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
        connection, self._connection = self._connection, None
        if connection is not None and connection.is_open:
            with contextlib.suppress(Exception):
                connection.close()

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
            self.transport.counter.forgive(held)
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
                    self.transport.counter.forgive([key for _, key in settled])

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
        options = self.transport.options
        redelivered = [raw for raw in batch if raw.redelivered]
        counts = self.transport.counter.increment([_counter_key(raw) for raw in redelivered]) if redelivered else {}
        dead: list[tuple[_Raw, str]] = []
        moved: list[tuple[_Raw, Rejection]] = []
        for raw in batch:
            count = counts.get(_counter_key(raw), 0) if raw.redelivered else 0
            if count > options.redelivery_limit:
                dead.append(
                    (raw, f"redeliveries-exceeded: redelivered {count} times, limit {options.redelivery_limit}")
                )
                continue
            payload, carried = _unwrap(raw)
            if self.classify:
                verdict = validate(payload, check_expiry=False)
                if not verdict.valid:
                    rejection = reject(payload, verdict)
                    moved.append((raw, rejection))
                    _log.warning(
                        "%s: %s moved to %s: %s %s",
                        self.channel,
                        raw.queue,
                        rejection.channel,
                        rejection.code,
                        rejection.description,
                    )
                    continue
            position = f"{self._epoch}.{raw.tag}"
            self._handed[position] = raw
            if raw.redelivered:
                self._counted[position] = _counter_key(raw)
            headers = raw.properties.headers or {}
            attributes: dict[str, Any] = {
                "redelivered": raw.redelivered,
                "redeliveries": count,
                "attempts": int(headers.get(H_ATTEMPTS, 0)),
                "exchange": raw.exchange,
                "routing_key": raw.routing_key,
                #: the AMQP headers: for a dead letter, x-rdss-dead-reason and x-rdss-queue say why and whence
                "headers": dict(headers),
            }
            if carried is not None:
                attributes["auth_token"] = carried.auth_token
                attributes["message_context"] = dict(carried.context)
            key = headers.get(H_KEY)
            self._ready.append(
                Delivery(
                    self.channel,
                    raw.queue,
                    position,
                    payload,
                    key.decode() if isinstance(key, bytes) else key,
                    float(raw.properties.timestamp) if raw.properties.timestamp else None,
                    attributes,
                )
            )
        self._dead_letter(dead)
        self._move(moved)

    # -- retries, dead letters, invalid messages ------------------------------------------------
    def _retry(self, delivery: Delivery) -> None:
        raw = self._handed.pop(delivery.position)
        key = self._counted.pop(delivery.position, None)
        if key is not None:
            self.transport.counter.forget([key])
        if not self._current(delivery):
            return  # RabbitMQ put it back when the connection was lost
        attempts = int((raw.properties.headers or {}).get(H_ATTEMPTS, 0)) + 1
        tier = _tier_for(self.transport.options.tiers, attempts)
        if tier is None:
            self._dead_letter([(raw, f"retries-exhausted: refused {attempts} times")])
            return
        exchange = self.transport.names.name(tier.name)
        item = _Publish(
            exchange, raw.queue, raw.body, _copy_properties(raw.properties, {H_ATTEMPTS: attempts}), mandatory=False
        )
        self._publish_then_ack([(raw, item)], f"retry {attempts} via {tier.name}")

    def _dead_letter(self, items: list[tuple[_Raw, str]]) -> None:
        if not items:
            return
        names = self.transport.names
        work = []
        for raw, reason in items:
            attempts = int((raw.properties.headers or {}).get(H_ATTEMPTS, 0))
            extra = {H_REASON: reason, H_QUEUE: raw.queue, H_ATTEMPTS: attempts}
            work.append(
                (raw, _Publish(names.dead_letter, raw.queue, raw.body, _copy_properties(raw.properties, extra)))
            )
            _log.error(
                "%s: message %s dead-lettered from %s: %s", self.channel, raw.properties.message_id, raw.queue, reason
            )
        self._publish_then_ack(work, "dead_letter")
        self.transport.counter.forget([_counter_key(raw) for raw, _ in items if raw.redelivered])

    def _move(self, items: list[tuple[_Raw, Rejection]]) -> None:
        if not items:
            return
        work = []
        for raw, rejection in items:
            kind = rejection.channel
            exchange = self.transport.names.name(self.transport.address(kind))
            headers = {H_QUEUE: raw.queue, H_ENVELOPE: "rdss"}
            properties = _copy_properties(raw.properties, headers)
            work.append((raw, _Publish(exchange, kind, rejection.record, properties)))
        self._publish_then_ack(work, "invalid/error")
        self.transport.counter.forget([_counter_key(raw) for raw, _ in items if raw.redelivered])

    def _publish_then_ack(self, work: list[tuple[_Raw, _Publish]], what: str) -> None:
        """Publish the copies (confirmed), then ack the originals: at least once, never lost. A
        copy the broker did not confirm leaves its original unacked and requeued."""
        results = self.transport.publisher.publish([item for _, item in work])
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
                self.transport.counter.forgive([_counter_key(raw)])  # requeued by us, not by a crash


def _tag(position: str) -> int:
    return int(position.rpartition(".")[2])


def _tier_for(tiers: Sequence[Tier], attempt: int) -> Tier | None:
    """The tier of retry number ``attempt`` (1-based), or None when they are used up."""
    for tier in tiers:
        if attempt <= tier.attempts:
            return tier
        attempt -= tier.attempts
    return None


def _counter_key(raw: _Raw) -> str:
    identity = raw.properties.message_id or hashlib.sha256(raw.body).hexdigest()[:32]
    return f"{raw.queue}/{identity}"


def _unwrap(raw: _Raw) -> tuple[bytes, mosaic.Carried | None]:
    """The RDSS payload of a delivery: Mosaic envelopes are translated back; anything that does
    not translate is handed on as it is, for the classifier to judge."""
    envelope = (raw.properties.headers or {}).get(H_ENVELOPE)
    if isinstance(envelope, bytes):
        envelope = envelope.decode()
    if envelope == "rdss":
        return raw.body, None
    try:
        return mosaic.decode(raw.body)
    except mosaic.TranslationError:
        return raw.body, None


def _copy_properties(properties: Any, headers: Mapping[str, Any]) -> pika.BasicProperties:
    merged = {**(properties.headers or {}), **headers}
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


def open_backend(url: GatewayURL, settings: Settings) -> Backend:
    """The backend for ``amqp://user:password@host:port/vhost?namespace=&retry=&redeliveries=&envelope=&state=``.

    Raises:
        URLError: an option is malformed.
        TransportError: the broker cannot be reached.
    """
    options = Options.from_url(url)
    transport = AmqpTransport(options, settings)
    return Backend(transport, SqliteRepository(options.state, settings.application))


__all__ = [
    "QUEUE_CHANNELS",
    "AmqpConsumer",
    "AmqpTransport",
    "ConfirmingPublisher",
    "Names",
    "Options",
    "SqliteRepository",
    "Tier",
    "entity",
    "open_backend",
    "parse_tiers",
    "routing_key",
]
