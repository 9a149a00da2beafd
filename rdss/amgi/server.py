"""What every AMGI server here shares: the lifespan protocol and one ``message`` scope's run.

A server (Lambda's Kinesis event source mapping, :mod:`rdss.amgi.kinesis`; a gateway consumer,
:mod:`rdss.gateway.amgi`) turns its transport's records into ``message.receive`` events and
gives :func:`run_scope` an :class:`Outbox` that knows how to deliver ``message.send`` events on
that transport. :func:`run_scope` does the rest the same way for both: ``receive()`` hands out
the events with ``more_messages``, an ack is accepted only once every earlier send is delivered
(its outputs are never lost), ``message.send.flush`` reports undelivered sends as
:class:`~rdss.amgi.types.SendFailed`, and the acks and nacks come back for the server to settle.
A server that can move a refused message to an RDSS ``invalid``/``error`` channel asks for the
``message.nack.error_code`` extension to be advertised; the code a nack carried then comes back
with it, for the server to act on.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from rdss.amgi.types import (
    AMGI_VERSION,
    MESSAGE_SPEC_VERSION,
    NACK_ERROR_CODE_EXTENSION,
    SEND_FLUSH_EXTENSION,
    Application,
    MessageSendEvent,
    SendFailed,
)

_VERSIONS = {"version": AMGI_VERSION, "spec_version": MESSAGE_SPEC_VERSION}

if TYPE_CHECKING:
    # imported where an event loop runs, not with this module: a Lambda handler imports this
    # while its cold start is timed, and runs a loop only once it has a batch
    import asyncio


class Outbox(Protocol):
    """Where a scope's ``message.send`` events go until they are delivered."""

    def add(self, message: MessageSendEvent) -> None:
        """Buffer one send (an outbox may deliver early, e.g. once it holds a full call's worth)."""
        ...

    def flush(self) -> None:
        """Deliver everything buffered.

        Raises:
            SendFailed: naming the sends that were not delivered.
        """
        ...


@dataclass
class ScopeResult:
    """What the application answered in one scope."""

    acked: set[str] = field(default_factory=set)
    #: id -> (the error code the nack carried, if any; its message)
    nacked: dict[str, tuple[str | None, str]] = field(default_factory=dict)
    #: What the application raised, if it did.
    failure: BaseException | None = None
    #: True when sends made after the last ack were not all delivered.
    undelivered: bool = False

    @property
    def settled(self) -> set[str]:
        """Acknowledged and not refused: what the server may settle."""
        return self.acked - self.nacked.keys()

    def why_unacknowledged(self) -> str:
        """Why a message got neither an ack nor a nack: the app raised, or just never answered."""
        if self.failure is not None:
            return f"the application raised {type(self.failure).__name__}: {self.failure}"
        return "the application did not acknowledge it"


async def run_scope(
    app: Application,
    events: Sequence[dict[str, Any]],
    *,
    address: str,
    state: dict[str, Any],
    outbox: Outbox,
    log: logging.Logger,
    nack_error_codes: bool = False,
) -> ScopeResult:
    """Run ``app`` on one batch: ``events`` are its ``message.receive`` events (``type``, ``id``,
    ``headers``, ``payload``, ``bindings``), in order. ``nack_error_codes``: advertise the
    ``message.nack.error_code`` extension (the server moves refused messages by their code)."""
    ids = {event["id"] for event in events}
    result = ScopeResult()
    position = 0

    async def receive() -> dict[str, Any]:
        nonlocal position
        if position >= len(events):
            raise RuntimeError("receive() called after the last message of the batch")
        event = events[position]
        position += 1
        return {**event, "more_messages": position < len(events)}

    async def send(message: dict[str, Any]) -> None:
        kind = message["type"]
        if kind == "message.send":
            outbox.add(message)  # type: ignore[arg-type]
        elif kind == SEND_FLUSH_EXTENSION:
            outbox.flush()
        elif kind in ("message.ack", "message.nack"):
            if message["id"] not in ids:
                raise ValueError(f"unknown message id {message['id']!r} in this batch")
            if kind == "message.ack":
                outbox.flush()  # an ack promises the message's outputs are delivered
                result.acked.add(message["id"])
            else:
                code = message.get("error_code") if nack_error_codes else None
                result.nacked[message["id"]] = (str(code) if code else None, str(message.get("message") or ""))
                log.warning("message %s nacked: %s %s", message["id"], code or "", message.get("message", ""))
        else:
            raise ValueError(f"unsupported event type {kind!r}")

    extensions: dict[str, dict[str, Any]] = {SEND_FLUSH_EXTENSION: {}}
    if nack_error_codes:
        extensions[NACK_ERROR_CODE_EXTENSION] = {}
    scope = {
        "type": "message",
        "amgi": dict(_VERSIONS),
        "address": address,
        "state": dict(state),
        "extensions": extensions,
    }
    try:
        await app(scope, receive, send)
    except Exception as error:
        result.failure = error
        log.exception("the application failed on a batch of %d message(s) from %s", len(events), address)
    try:
        outbox.flush()
    except SendFailed:
        log.error("sends after the last ack were not delivered; the unacknowledged messages will be retried")
        result.undelivered = True
    return result


class Lifespan:
    """The application's lifespan protocol, run on the server's event loop: :meth:`startup`
    before the first scope, :meth:`shutdown` at the end. An application that returns or raises
    without answering startup does not do lifespan; that is not an error."""

    def __init__(self, app: Application, state: dict[str, Any], log: logging.Logger) -> None:
        self.app = app
        self.state = state
        self.log = log
        self.inbox: asyncio.Queue[dict[str, Any]] | None = None
        self.started: asyncio.Future[bool] | None = None
        self.stopped: asyncio.Future[bool] | None = None
        self.task: asyncio.Task[None] | None = None
        self.supported = True

    async def startup(self) -> None:
        """Start the lifespan scope and wait for the application's answer.

        Raises:
            RuntimeError: the application answered ``lifespan.startup.failed``.
        """
        import asyncio

        loop = asyncio.get_running_loop()
        self.inbox = asyncio.Queue()
        self.started, self.stopped = loop.create_future(), loop.create_future()
        self.task = loop.create_task(self._run(self.inbox))
        await self.inbox.put({"type": "lifespan.startup"})
        await asyncio.wait([self.started, self.task], return_when=asyncio.FIRST_COMPLETED)  # type: ignore[type-var]
        if not self.started.done():  # the app returned or raised without answering: no lifespan
            self.supported = False
            return
        if not self.started.result():
            raise RuntimeError("the application's lifespan startup failed")

    async def shutdown(self) -> None:
        """Ask the application to shut down and wait for its answer (or its return)."""
        import asyncio

        if not self.supported or self.task is None or self.task.done() or self.inbox is None:
            return
        assert self.stopped is not None
        await self.inbox.put({"type": "lifespan.shutdown"})
        await asyncio.wait([self.stopped, self.task], return_when=asyncio.FIRST_COMPLETED)  # type: ignore[type-var]
        if not self.task.done():  # answered but still running: the loop is about to close
            self.task.cancel()
            with contextlib.suppress(BaseException):
                await self.task

    async def _run(self, inbox: asyncio.Queue[dict[str, Any]]) -> None:
        import asyncio

        scope = {"type": "lifespan", "amgi": dict(_VERSIONS), "state": self.state}

        async def receive() -> dict[str, Any]:
            return await inbox.get()

        async def send(message: dict[str, Any]) -> None:
            kind = message["type"]
            if kind in ("lifespan.startup.complete", "lifespan.startup.failed"):
                if self.started is not None and not self.started.done():
                    self.started.set_result(kind.endswith("complete"))
                if kind.endswith("failed"):
                    self.log.error("lifespan startup failed: %s", message.get("message", ""))
            elif (
                kind in ("lifespan.shutdown.complete", "lifespan.shutdown.failed")
                and self.stopped is not None
                and not self.stopped.done()
            ):
                self.stopped.set_result(kind.endswith("complete"))

        try:
            await self.app(scope, receive, send)
        except Exception:
            try:
                asyncio.get_running_loop()
            except RuntimeError:  # torn down with the execution environment: nothing to report
                return
            if self.started is not None and not self.started.done():
                self.log.debug("the application does not support lifespan", exc_info=True)
            else:
                self.log.exception("the application's lifespan failed")
