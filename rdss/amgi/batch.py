"""What the processors share as AMGI applications: each handles a scope's whole batch at once.

:class:`BatchApp` answers the lifespan protocol (nothing to set up: the processors create their
AWS clients when they are built, once per Lambda execution environment) and hands each
``message`` scope to :meth:`BatchApp.handle_batch`. :func:`receive_batch` reads the scope's
events, :func:`kinesis_send` builds a ``message.send`` to a stream, and :func:`deliver` sends a
batch's outputs and says which items' outputs did not arrive.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from rdss.amgi.types import SEND_FLUSH_EXTENSION, Receive, Send, SendFailed

Item = TypeVar("Item")


class BatchApp(ABC):
    """An AMGI application that processes each ``message`` scope as one batch."""

    async def __call__(self, scope: Any, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await acknowledge_lifespan(receive, send)
        elif scope["type"] == "message":
            await self.handle_batch(scope, receive, send)

    @abstractmethod
    async def handle_batch(self, scope: Any, receive: Receive, send: Send) -> None:
        """Receive every event of the scope, process them, ack or nack each."""


async def acknowledge_lifespan(receive: Receive, send: Send) -> None:
    """Complete ``lifespan.startup`` at once and return on ``lifespan.shutdown``."""
    while True:
        event = await receive()
        if event["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif event["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def receive_batch(receive: Receive) -> list[dict[str, Any]]:
    """Every ``message.receive`` event of the scope, in order."""
    events = []
    more = True
    while more:
        event = await receive()
        events.append(event)
        more = bool(event.get("more_messages", False))
    return events


def kinesis_send(stream: str, payload: bytes, partition_key: str) -> dict[str, Any]:
    """A ``message.send`` of ``payload`` to ``stream`` under ``partition_key``."""
    return {
        "type": "message.send",
        "address": stream,
        "headers": [],
        "payload": payload,
        "bindings": {"kinesis": {"partition_key": partition_key}},
    }


async def deliver(
    scope: Any, send: Send, items: Sequence[Item], outputs: Callable[[Item], Sequence[dict[str, Any]]]
) -> list[tuple[Item, SendFailed]]:
    """Send every item's outputs, then (when the server offers it) flush them; the items whose
    outputs did not all arrive, each with the failure. Without the flush extension the server
    delivers sends before it accepts an ack, so nothing is reported here."""
    owner: dict[int, Item] = {}
    for item in items:
        for event in outputs(item):
            owner[id(event)] = item
            await send(event)
    if SEND_FLUSH_EXTENSION not in scope.get("extensions", {}):
        return []
    try:
        await send({"type": SEND_FLUSH_EXTENSION})
    except SendFailed as failure:
        failed = {id(owner[id(event)]): owner[id(event)] for event in failure.failed}
        return [(item, failure) for item in failed.values()]
    return []
