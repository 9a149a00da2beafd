"""A consumer that listens until what a test expects has happened, not for a fixed idle pause.

``Gateway.listen`` ends on ``stop``, ``max_messages`` or ``idle_timeout``. A test whose consumer
must also move records it is never handed (invalid records, poison messages) cannot count them
in ``max_messages``, and an idle timeout is a fixed pause at the end of every run. Here the run
ends as soon as ``done(stats)`` holds for the receiver's live statistics; the idle timeout stays
only to end a run that went wrong.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from rdss.gateway import Gateway
from rdss.gateway.listen import Handler, Run, listen
from rdss.gateway.received import ReceiveStats
from rdss.model.retry import SPEC_BACKOFF, Backoff

#: How long a run that never reaches what was expected goes on with nothing arriving.
GONE_WRONG = 60.0


def listen_until(
    gateway: Gateway,
    channel: str,
    handler: Handler,
    done: Callable[[ReceiveStats], bool],
    *,
    backoff: Backoff = SPEC_BACKOFF,
    **options: Any,
) -> ReceiveStats:
    """``gateway.listen(channel, handler, ...)`` until ``done(stats)``: checked after each
    message handled and every 20 ms while the receiver reads (a move happens inside a read)."""
    stop = threading.Event()
    with gateway.receiver(channel, **options) as receiver:

        def watch() -> None:
            while not stop.wait(0.02):
                if done(receiver.stats):
                    stop.set()

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        try:
            return listen(receiver, handler, Run(receiver.clock, stop=stop, idle_timeout=GONE_WRONG, backoff=backoff))
        finally:
            stop.set()
            watcher.join()
