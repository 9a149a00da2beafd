"""The Message Gateway (spec: Message Gateway): what vendors embed in their applications.

Synchronous, as the spec requires: every call blocks until the requests behind it complete
(a send returns once the channel acknowledged every record; a request once its reply arrived).
Configured by URL to switch the messaging system (``kinesis://<env>``, ``memory://<bus>``; the
RabbitMQ backend plugs in at ``amqp://``), by ``channels`` to override channel addresses, and by
``reply_poll_interval`` for the retry interval while waiting for a reply.
"""

from __future__ import annotations

import inspect
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, Unpack

import orjson

from rdss import MAX_MESSAGE_BYTES
from rdss.amgi.types import Application
from rdss.deployment.topology import RDSS
from rdss.gateway import amgi, request
from rdss.gateway.backend import Outcome, Outgoing, Settings, StartPosition, Transport, TransportError, open_backend
from rdss.gateway.consumer import Receiver
from rdss.gateway.exceptions import GatewayError, MessageRefused, SendFailed
from rdss.gateway.listen import Handler, Run, listen
from rdss.gateway.received import ListenOptions, Received, ReceiveOptions, ReceiveStats
from rdss.gateway.send import Receipt, Sendable, Sender
from rdss.gateway.url import DEFAULT_URL, GatewayURL, parse
from rdss.host import pointers as localstate
from rdss.model import translation
from rdss.model.canonical import VERSIONS
from rdss.model.messages import Message, failure_reply
from rdss.model.rejection import Rejector
from rdss.model.retry import SPEC_BACKOFF, Backoff
from rdss.repository.entries import Repository

#: Schemes whose deployments route what is sent to ``input`` by content (the Kinesis broker,
#: which also looks replies' returnAddress up); elsewhere a reply is sent to its address.
_BROKERED = frozenset({"kinesis"})
#: Channels whose messages are not moved to the error channel again when they expire.
_ERROR_CHANNELS = frozenset({"error", "invalid"})


class Gateway:
    """Send, receive and request RDSS messages over one messaging system.

    Example::

        with Gateway("kinesis://dev", application="my-repository") as gateway:
            gateway.send(message)                       # to the input channel
            reply = gateway.request(read, timeout=30)   # a MetadataRead and its Document
            with gateway.receiver("metadata") as inbox:
                received = inbox.receive(timeout=5)
                ...
                inbox.ack(received)
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        application: str = "gateway",
        channels: Mapping[str, str] | None = None,
        reply_poll_interval: float = 1.0,
        backoff: Backoff = SPEC_BACKOFF,
        lease_duration: float = 10.0,
        clients: Mapping[str, Any] | None = None,
        size_limit: int = MAX_MESSAGE_BYTES,
        reads: str | None = None,
        tenant_jisc_id: int | None = None,
    ) -> None:
        """
        Args:
            url: the messaging system (default: ``RDSS_GATEWAY_URL``, else the running local
                runtime's, :mod:`rdss.host.pointers`, else ``kinesis://dev``).
            application: names this application's Local Data Repository entries and is the
                default consumer group (applications each see every message; workers of one
                application share them out).
            channels: logical channel name -> address, overriding the deployment's names.
            reply_poll_interval: seconds between polls of an empty reply channel.
            backoff: retries of failed sends (default: the spec's 2^n x 100 ms, 10 retries).
            lease_duration: seconds before a dead worker's shards are taken over.
            clients: pre-built service clients (``kinesis``, ``dynamodb``), e.g. to count calls.
            size_limit: messages serialising larger are sent as sequences (the spec: 1,000,000).
            reads: the Message API version the application reads (``3.0.2``, ``4.0.0``; a
                vendor's ``reads`` in cdk.json): every message received, and every reply to a
                request, is handed over in it, translated where written in another
                (:mod:`rdss.model.translation`). None: each as it was written.
            tenant_jisc_id: the tenantJiscID of messages translated up to 4.0.0 (the
                deployment's ``tenant_jisc_id``).

        Raises:
            URLError: the URL is malformed.
            TransportError: no backend for its scheme.
            ValueError: ``reads`` is not a version the translators write.
        """
        if reads is not None and reads not in VERSIONS:
            raise ValueError(f"reads: expected one of {', '.join(VERSIONS)}, found {reads!r}")
        self.reads = reads
        self.tenant_jisc_id = tenant_jisc_id
        self.url: GatewayURL = parse(
            url or os.environ.get("RDSS_GATEWAY_URL") or localstate.configured_url() or DEFAULT_URL
        )
        self.application = application
        self.reply_poll_interval = reply_poll_interval
        self.settings = Settings(
            application=application,
            channels=dict(channels or {}),
            backoff=backoff,
            lease_duration=lease_duration,
            clients=dict(clients or {}),
        )
        backend = open_backend(self.url, self.settings)
        self.transport: Transport = backend.transport
        self.repository: Repository = backend.repository
        #: How this gateway moves a message it will not deliver (the one reject path).
        self.rejector: Rejector = backend.rejector
        self.sender = Sender(self.transport, self.repository, limit=size_limit, machine_id=application)

    # -- sending -------------------------------------------------------------------------------
    def send(
        self,
        message: Sendable,
        *,
        channel: str = "input",
        auth_token: str | None = None,
        context: Mapping[str, Any] | None = None,
    ) -> Receipt:
        """Send one message (a dict in the spec's shape, or its JSON bytes sent byte for byte,
        with this gateway's hop added to messageHistory).

        Where a broker routes by content (Kinesis) every message enters through ``input``, where
        the Audit Log archives it: ``channel`` names where it should end up, and must be where
        its type and class route it.

        Returns once the channel acknowledged it (every part, if it was split).

        ``auth_token`` (the JWT of the actor behind the message) and ``context`` (a JSON object)
        are Mosaic's: they travel beside the message, never inside its bytes - on ``amqp://`` in
        the Mosaic envelope, where a receiver finds them in ``Delivery.attributes``
        (``auth_token``, ``message_context``); the other backends do not carry them
        (docs/rabbitmq.md).

        Raises:
            MessageRefused: invalid (``error_code`` says why); nothing was sent.
            ChannelMismatch: its content routes to another channel than ``channel``; nothing sent.
            SendFailed: not acknowledged after every retry (GENERR005, logged).
        """
        return self.sender.send([message], channel, auth_token=auth_token, context=context)[0]

    def send_all(
        self,
        messages: Iterable[Sendable],
        *,
        channel: str = "input",
        auth_token: str | None = None,
        context: Mapping[str, Any] | None = None,
    ) -> list[Receipt]:
        """Send many messages with as few calls as possible (500 records a PutRecords call).

        If any message is invalid nothing is sent. Returns once every one is acknowledged.
        ``auth_token`` and ``context`` go with every message, as in :meth:`send`.
        """
        return self.sender.send(messages, channel, auth_token=auth_token, context=context)

    # -- receiving -----------------------------------------------------------------------------
    def receiver(
        self,
        channel: str,
        *,
        group: str | None = None,
        start: StartPosition = "earliest",
        **options: Unpack[ReceiveOptions],
    ) -> Receiver:
        """A Polling Consumer of ``channel`` (see :class:`rdss.gateway.consumer.Receiver`).

        Args:
            group: the consumer group (default: the application). Workers of one group share
                the channel's shards and resume from the group's checkpoints.
            start: where a group with no checkpoint begins: ``earliest`` (the oldest record
                kept) or ``latest`` (records arriving from now on; as with the KCL, a worker
                stopped before its first checkpoint starts at the then latest record again).
            selector: Message Selector - a predicate on the messageHeader.
            throttle: Message Throttle - at most this many messages per second.
            poll_interval: seconds between polls of an empty channel.
            max_attempts: failed attempts (nacks) after which a message is poison: moved to the
                ``error`` channel (GENERR009) so the partition moves on. The count is kept with
                the group's state and survives a restart. None: retried for ever.
            batch_size, sequence_timeout: as :class:`Receiver`'s, whose defaults all these take.
        """
        group = group or self.application
        consumer = self.transport.consumer(channel, group=group, start=start)
        return Receiver(
            consumer,
            self.repository,
            publish=self._publish,
            group=group,
            rejector=None if channel in _ERROR_CHANNELS else self.rejector,
            # on a brokered deployment the broker moves what is invalid on input
            move_invalid=not (channel == "input" and self.url.scheme in _BROKERED),
            reads=self.reads,
            tenant_jisc_id=self.tenant_jisc_id,
            **options,
        )

    def listen(
        self,
        channel: str,
        handler: Handler | Application,
        *,
        stop: threading.Event | None = None,
        max_messages: int | None = None,
        idle_timeout: float | None = None,
        kind: Literal["auto", "callback", "amgi"] = "auto",
        backoff: Backoff = SPEC_BACKOFF,
        **options: Unpack[ListenOptions],
    ) -> ReceiveStats:
        """The Event-Driven Consumer: hand each message of ``channel`` to ``handler``.

        ``handler`` is a plain callback ``handler(received)`` (returning acknowledges; raising
        :class:`Rejected` refuses the message with its code; raising anything else redelivers it
        after ``backoff``) or an AMGI application (``async def app(scope, receive, send)``; one
        ``message`` scope per partition batch, ack / nack per message, a nack carrying an
        ``errorCode`` refuses with that code). ``kind="auto"`` tells them apart by the coroutine
        function. After ``max_attempts`` failed attempts (an option of :meth:`receiver`,
        default 5) a message is moved to ``error`` (GENERR009) and the partition moves on.
        Blocks until ``stop`` is set, ``max_messages`` were handled, or nothing arrived for
        ``idle_timeout`` seconds. ``options`` are those of :meth:`receiver`.
        """
        with self.receiver(channel, **options) as receiver:
            run = Run(receiver.clock, stop=stop, max_messages=max_messages, idle_timeout=idle_timeout, backoff=backoff)
            if kind == "amgi" or (kind == "auto" and _is_amgi(handler)):
                app: Application = handler  # type: ignore[assignment]
                address = self.transport.address(channel)
                return amgi.serve(receiver, app, run, address=address, deliver=self._deliver_sends)
            return listen(receiver, handler, run)  # type: ignore[arg-type]

    # -- request-reply -------------------------------------------------------------------------
    def request(
        self, message: Sendable, timeout: float = request.DEFAULT_TIMEOUT, *, reply_to: str = "responses"
    ) -> Message:
        """Send a request and return its reply: the message whose correlationId is the
        request's messageId, arriving on the request's returnAddress (set to ``reply_to``
        when the request names none).

        The reply comes in the version this gateway ``reads``, translated where the responder
        wrote another (correlationId kept).

        Raises:
            NotARequest: ``message`` is not a Command a reply answers (a ValueError); nothing is sent.
            RequestTimeout: no reply within ``timeout`` seconds (a TimeoutError; 30 unless told).
            RequestFailed: the responder answered with a failure reply (:meth:`reply_error`);
                ``error_code`` and ``error_description`` say why. Raised within a poll interval
                of the reply's arrival.
            MessageRefused, SendFailed: as :meth:`send`.
        """
        return request.request(
            message,
            timeout,
            transport=self.transport,
            repository=self.repository,
            send=self.send,
            reply_to=reply_to,
            interval=self.reply_poll_interval,
            translate=self._reply_in_version if self.reads is not None else None,
        )

    def _reply_in_version(self, reply: Message) -> Message:
        assert self.reads is not None
        payload = orjson.dumps(reply)
        translated = translation.translate(payload, self.reads, tenant_jisc_id=self.tenant_jisc_id, judged=True)
        return reply if translated is payload else orjson.loads(translated)

    def reply_error(
        self, request: Received | Message, error_code: str, description: str, *, channel: str | None = None
    ) -> Receipt:
        """Answer ``request`` with a failure Reply: the responder cannot answer it, and says why.

        The reply is a Document of the request's type whose header carries correlationId (the
        request's messageId), ``errorCode`` (e.g. APPERRMET003: no object with that uuid) and
        ``errorDescription``; its body is the request's. The requester's :meth:`request` raises
        :class:`RequestFailed` on it instead of waiting for its timeout.

        It goes where a reply goes: on ``kinesis://`` to ``input``, from where the broker routes
        it to the returnAddress the request named; on the other backends, which have no broker
        in between, to that returnAddress itself (``responses`` when it names none). ``channel``
        overrides.

        Raises:
            ValueError: no code or description.
            MessageRefused, SendFailed: as :meth:`send`.
        """
        message = request.message if isinstance(request, Received) else request
        header = message["messageHeader"]
        if channel is None:
            channel = "input" if self.url.scheme in _BROKERED else str(header.get("returnAddress") or "responses")
        return self.send(failure_reply(message, error_code, description), channel=channel)

    # -- lifecycle -----------------------------------------------------------------------------
    def close(self) -> None:
        self.transport.close()

    def __enter__(self) -> Gateway:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # -- plumbing ------------------------------------------------------------------------------
    def _publish(self, messages: Sequence[Outgoing]) -> list[Outcome]:
        return self.transport.publish(messages)

    def channel_of(self, address: str) -> str:
        """The logical channel for an address or logical name (AMGI apps send to either)."""
        names = {c.name for c in RDSS.channels} | set(self.settings.channels)
        if address in names:
            return address
        for name in names:
            try:
                if self.transport.address(name) == address:
                    return name
            except TransportError:
                continue
        raise TransportError(f"{address!r} is not a channel of this gateway")

    def _deliver_sends(self, sends: list[tuple[str, bytes]]) -> dict[int, str]:
        """Send an AMGI app's ``message.send`` payloads; the indexes that failed, with why."""
        failures: dict[int, str] = {}
        by_channel: dict[str, list[int]] = {}
        for index, (address, _) in enumerate(sends):
            try:
                by_channel.setdefault(self.channel_of(address), []).append(index)
            except TransportError as error:
                failures[index] = str(error)
        for channel, indexes in by_channel.items():
            try:
                self.send_all([sends[i][1] for i in indexes], channel=channel)
            except (MessageRefused, SendFailed, GatewayError) as error:
                failures.update(dict.fromkeys(indexes, str(error)))
        return failures


def _is_amgi(handler: object) -> bool:
    call = getattr(handler, "__call__", None)  # noqa: B004 - a class instance with an async __call__
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(call)
