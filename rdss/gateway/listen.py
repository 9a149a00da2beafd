"""The Event-Driven Consumer (EIP) on top of the polling :class:`rdss.gateway.consumer.Receiver`:
a handler is called with each message as it arrives; returning acknowledges it, raising has it
delivered again. (:mod:`rdss.gateway.amgi` serves an AMGI application the same way.)
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from rdss.gateway.backend import TransportError
from rdss.gateway.consumer import Received, Receiver, ReceiveStats
from rdss.retry import PATIENT, Backoff

_log = logging.getLogger(__name__)

Handler = Callable[[Received], object]


def listen(
    receiver: Receiver,
    handler: Handler,
    *,
    stop: threading.Event | None = None,
    max_messages: int | None = None,
    idle_timeout: float | None = None,
    retry_delay: float = 0.1,
) -> ReceiveStats:
    """The Event-Driven Consumer: call ``handler`` with each message as it arrives.

    The handler returning acknowledges the message; raising has it delivered again (after a
    pause growing from ``retry_delay`` up to 30 s while failures repeat). Runs until ``stop`` is
    set, ``max_messages`` were acknowledged, or nothing arrived for ``idle_timeout`` seconds.
    """
    stop = stop or threading.Event()
    idle_since = receiver.clock()
    handled = failures = 0
    while not stop.is_set() and (max_messages is None or handled < max_messages):
        received = receive_or_wait(receiver, stop)
        if received is None:
            if idle_timeout is not None and receiver.clock() - idle_since >= idle_timeout:
                break
            continue
        idle_since = receiver.clock()
        try:
            handler(received)
        except Exception:
            failures += 1
            _log.exception(
                "%s: the handler failed on %s; it will be delivered again", receiver.channel, received.message_id
            )
            receiver.nack(received)
            stop.wait(Backoff(base=retry_delay / 2, cap=30.0, jitter=True).delay(failures))
            continue
        failures = 0
        try:
            receiver.ack(received)
        except TransportError:
            raise
        except Exception:  # not recorded RECEIVED: have it again rather than lose it
            _log.exception(
                "%s: could not record %s as RECEIVED; it will be delivered again", receiver.channel, received.message_id
            )
            receiver.nack(received)
            continue
        handled += 1
    receiver.commit()
    return receiver.stats


def receive_or_wait(receiver: Receiver, stop: threading.Event) -> Received | None:
    """One :meth:`Receiver.receive` for a long-running consumer: a transient failure of the
    messaging system (the network, throttling) is logged and waited out, growing the pause up to
    30 s; a :class:`TransportError` (a missing stream, a bad configuration) is raised."""
    attempt = 0
    while not stop.is_set():
        try:
            return receiver.receive(timeout=receiver.poll_interval)
        except TransportError:
            raise
        except Exception as error:
            attempt += 1
            delay = PATIENT.delay(attempt)
            _log.warning("%s: receiving failed (%s); retrying in %.1f s", receiver.channel, error, delay)
            stop.wait(delay)
    return None
