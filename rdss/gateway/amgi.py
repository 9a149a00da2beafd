"""The event-driven consumer for AMGI applications: the gateway as an AMGI server.

The same processors that run behind the Kinesis event-source-mapping adaptor in Lambda run here
against any gateway backend. Each batch of messages from one partition is one ``message``
scope: ``address`` is the channel's physical address, ``receive()`` yields one
``message.receive`` per whole message (sequences already reassembled, duplicates, expired and
unselected messages already removed), with headers ``messageId``, ``messageType``,
``messageClass`` and bindings ``{"gateway": {"channel", "partition", "positions"}}``.

``message.ack`` means processed (RECEIVED, then checkpointed); ``message.nack``, or no answer,
is a failed attempt: delivered again after the spec's backoff, and after the receiver's
``max_attempts`` moved to ``error`` (GENERR009, the nack's message or the app's exception named)
so the partition moves on. A nack carrying ``error_code`` (the ``message.nack.error_code``
extension, advertised in the scope) refuses the message with that code: it is moved, decorated,
to the code's channel and acknowledged. ``message.send`` publishes through the gateway (validated, recorded
TO_SEND/SENT): sends are buffered and delivered before an ack is accepted, and the
``message.send.flush`` extension reports undelivered sends as :class:`rdss.amgi.SendFailed`.
Lifespan startup and shutdown run once around the whole run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

from rdss.amgi.types import (
    AMGI_VERSION,
    MESSAGE_SPEC_VERSION,
    NACK_ERROR_CODE_EXTENSION,
    SEND_FLUSH_EXTENSION,
    Application,
    SendFailed,
)
from rdss.gateway.consumer import Received, Receiver, ReceiveStats, receive_or_wait
from rdss.gateway.exceptions import GatewayError
from rdss.retry import SPEC_BACKOFF, Backoff

_log = logging.getLogger(__name__)

#: Publishes the payloads of buffered ``message.send`` events: [(address, payload)] -> the
#: indexes of those that were not delivered, with the reason.
Deliver = Callable[[list[tuple[str, bytes]]], dict[int, str]]


def serve(
    receiver: Receiver,
    app: Application,
    *,
    address: str,
    deliver: Deliver,
    stop: threading.Event | None = None,
    max_messages: int | None = None,
    idle_timeout: float | None = None,
    backoff: Backoff = SPEC_BACKOFF,
) -> ReceiveStats:
    """Run ``app`` on the receiver's channel until ``stop``, ``max_messages`` or ``idle_timeout``."""
    stop = stop or threading.Event()
    loop = asyncio.new_event_loop()
    state: dict[str, Any] = {}
    lifespan = _Lifespan(app, state)
    try:
        loop.run_until_complete(lifespan.startup())
        idle_since = receiver.clock()
        handled = failures = 0
        while not stop.is_set() and (max_messages is None or handled < max_messages):
            limit = receiver.batch_size if max_messages is None else min(receiver.batch_size, max_messages - handled)
            batch = receive_batch_or_wait(receiver, limit, stop)
            if not batch:
                if idle_timeout is not None and receiver.clock() - idle_since >= idle_timeout:
                    break
                continue
            idle_since = receiver.clock()
            for group in _by_partition(batch):
                scope = _Scope(app, group, address, state, deliver)
                acked = loop.run_until_complete(scope.run())
                handled += len(acked)
                receiver.ack([r for r in group if r.message_id in acked])
                retrying = 0
                for received in group:
                    if received.message_id in acked:
                        continue
                    code, why = scope.nacked.get(received.message_id, (None, scope.why_unacknowledged()))
                    if code is not None:
                        try:
                            receiver.reject(received, code, why or f"refused with {code}")
                            handled += 1
                            continue
                        except ValueError as error:  # not one of the spec's codes: a plain failure
                            _log.error("message %s: %s", received.message_id, error)
                            why = f"nacked with {code!r}, not one of the spec's error codes: {why}"
                    attempts = receiver.nack(received, why)
                    if receiver.max_attempts is not None and attempts >= receiver.max_attempts:
                        handled += 1  # given up on: moved to the error channel
                    else:
                        retrying = max(retrying, attempts, 1)
                if retrying:  # the spec's backoff before the failed messages come again (up to 30 s)
                    failures += 1
                    stop.wait(min(30.0, backoff.delay(max(retrying, failures))))
                else:
                    failures = 0
        receiver.commit()
        loop.run_until_complete(lifespan.shutdown())
    finally:
        loop.close()
    return receiver.stats


def receive_batch_or_wait(receiver: Receiver, limit: int, stop: threading.Event) -> list[Received]:
    """A batch for the next scope: the first message as :func:`receive_or_wait` (transient
    failures waited out), then what is already read."""
    first = receive_or_wait(receiver, stop)
    return [] if first is None else [first, *receiver.take_ready(limit - 1)]


def _by_partition(batch: list[Received]) -> list[list[Received]]:
    groups: dict[str, list[Received]] = {}
    for received in batch:
        groups.setdefault(received.deliveries[0].partition, []).append(received)
    return list(groups.values())


class _Scope:
    """One ``message`` scope: a partition's batch."""

    def __init__(
        self, app: Application, batch: list[Received], address: str, state: dict[str, Any], deliver: Deliver
    ) -> None:
        self.app = app
        self.batch = batch
        self.address = address
        self.state = state
        self.deliver = deliver
        self.ids = {r.message_id for r in batch}
        self.acked: set[str] = set()
        #: messageId -> (the error code a refusing nack carried, its message)
        self.nacked: dict[str, tuple[str | None, str]] = {}
        self.failure: BaseException | None = None
        self.outbox: list[dict[str, Any]] = []
        self.position = 0

    async def run(self) -> set[str]:
        """Run the app on the batch; returns the messageIds acknowledged (and not nacked)."""
        scope = {
            "type": "message",
            "amgi": {"version": AMGI_VERSION, "spec_version": MESSAGE_SPEC_VERSION},
            "address": self.address,
            "state": dict(self.state),
            "extensions": {SEND_FLUSH_EXTENSION: {}, NACK_ERROR_CODE_EXTENSION: {}},
        }
        try:
            await self.app(scope, self.receive, self.send)
        except Exception as error:
            self.failure = error
            _log.exception("the application failed on a batch of %d message(s) from %s", len(self.batch), self.address)
        try:
            self.flush()
        except SendFailed:  # sends after the last ack did not all arrive: retry the batch's unacked
            _log.error("sends after the last ack were not delivered; unacknowledged messages will be retried")
        return self.acked - set(self.nacked)

    def why_unacknowledged(self) -> str:
        """Why a message got neither an ack nor a nack: the app raised, or just never answered."""
        if self.failure is not None:
            return f"the application raised {type(self.failure).__name__}: {self.failure}"
        return "the application did not acknowledge it"

    async def receive(self) -> dict[str, Any]:
        if self.position >= len(self.batch):
            raise RuntimeError("receive() called after the last message of the batch")
        received = self.batch[self.position]
        self.position += 1
        return {
            "type": "message.receive",
            "id": received.message_id,
            "headers": [
                (b"messageId", received.message_id.encode()),
                (b"messageType", received.message_type.encode()),
                (b"messageClass", received.message_class.encode()),
            ],
            "payload": received.payload,
            "bindings": {
                "gateway": {
                    "channel": received.channel,
                    "partition": received.deliveries[0].partition,
                    "positions": [d.position for d in received.deliveries],
                }
            },
            "more_messages": self.position < len(self.batch),
        }

    async def send(self, message: dict[str, Any]) -> None:
        kind = message["type"]
        if kind == "message.send":
            self.outbox.append(message)
        elif kind == SEND_FLUSH_EXTENSION:
            self.flush()
        elif kind == "message.ack":
            self._known(message["id"])
            self.flush()  # an ack promises the message's outputs are delivered
            self.acked.add(message["id"])
        elif kind == "message.nack":
            self._known(message["id"])
            code = message.get("error_code")
            self.nacked[message["id"]] = (str(code) if code else None, str(message.get("message") or ""))
            _log.warning("message %s nacked: %s %s", message["id"], code or "", message.get("message", ""))
        else:
            raise ValueError(f"unsupported event type {kind!r}")

    def flush(self) -> None:
        pending, self.outbox = self.outbox, []
        if not pending:
            return
        try:
            failures = self.deliver([(m["address"], m.get("payload") or b"") for m in pending])
        except GatewayError as error:
            failures = dict.fromkeys(range(len(pending)), str(error))
        if failures:
            failed = [pending[i] for i in sorted(failures)]
            first = failures[min(failures)]
            raise SendFailed(f"{len(failed)} of {len(pending)} message(s) not delivered: {first}", failed)  # type: ignore[arg-type]

    def _known(self, message_id: str) -> None:
        if message_id not in self.ids:
            raise ValueError(f"unknown message id {message_id!r} in this batch")


class _Lifespan:
    """The app's lifespan protocol, run once per :func:`serve`."""

    def __init__(self, app: Application, state: dict[str, Any]) -> None:
        self.app = app
        self.state = state
        self.inbox: asyncio.Queue[dict[str, Any]] | None = None
        self.answers: asyncio.Queue[str] | None = None
        self.task: asyncio.Task[None] | None = None

    async def startup(self) -> None:
        self.inbox, self.answers = asyncio.Queue(), asyncio.Queue()
        self.task = asyncio.get_running_loop().create_task(self._run())
        await self.inbox.put({"type": "lifespan.startup"})
        answer = await self._answer()
        if answer == "lifespan.startup.failed":
            raise RuntimeError("the application's lifespan startup failed")

    async def shutdown(self) -> None:
        if self.task is None or self.task.done() or self.inbox is None:
            return
        await self.inbox.put({"type": "lifespan.shutdown"})
        await self._answer()
        if not self.task.done():
            self.task.cancel()
            with contextlib.suppress(BaseException):
                await self.task

    async def _answer(self) -> str | None:
        assert self.answers is not None
        assert self.task is not None
        getter = asyncio.ensure_future(self.answers.get())
        await asyncio.wait([getter, self.task], return_when=asyncio.FIRST_COMPLETED)
        if getter.done():
            return getter.result()
        getter.cancel()
        return None  # the app returned or raised: it does not do lifespan

    async def _run(self) -> None:
        assert self.inbox is not None
        assert self.answers is not None
        inbox, answers = self.inbox, self.answers
        scope = {
            "type": "lifespan",
            "amgi": {"version": AMGI_VERSION, "spec_version": MESSAGE_SPEC_VERSION},
            "state": self.state,
        }

        async def receive() -> dict[str, Any]:
            return await inbox.get()

        async def send(message: dict[str, Any]) -> None:
            await answers.put(message["type"])

        try:
            await self.app(scope, receive, send)
        except Exception:
            _log.debug("the application does not support lifespan", exc_info=True)
