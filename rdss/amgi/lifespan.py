"""Lifespan for applications with nothing to set up: answer startup and shutdown."""

from __future__ import annotations

from rdss.amgi.types import Receive, Send


async def acknowledge_lifespan(receive: Receive, send: Send) -> None:
    """Complete ``lifespan.startup`` at once and return on ``lifespan.shutdown``.

    The processors create their AWS clients when they are built (outside any handler, so once
    per Lambda execution environment); the lifespan protocol has nothing left for them to do,
    but answering it lets a server know they are ready.
    """
    while True:
        event = await receive()
        if event["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif event["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
