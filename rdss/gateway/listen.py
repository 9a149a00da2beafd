"""The Event-Driven Consumer (EIP) on top of the polling :class:`rdss.gateway.consumer.Receiver`:
a handler is called with each message as it arrives; returning acknowledges it, raising
:class:`~rdss.gateway.exceptions.Rejected` refuses it with a code, raising anything else is a
failed attempt. (:mod:`rdss.gateway.amgi` serves an AMGI application the same way.)
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from rdss.gateway.backend import TransportError
from rdss.gateway.consumer import Receiver
from rdss.gateway.exceptions import Rejected
from rdss.gateway.received import Received, ReceiveStats
from rdss.retry import PATIENT, SPEC_BACKOFF, Backoff

_log = logging.getLogger(__name__)

#: The longest pause between attempts at a failing message (the spec's doubling is unbounded).
_LONGEST_PAUSE = 30.0

Handler = Callable[[Received], object]


def listen(
    receiver: Receiver,
    handler: Handler,
    *,
    stop: threading.Event | None = None,
    max_messages: int | None = None,
    idle_timeout: float | None = None,
    backoff: Backoff = SPEC_BACKOFF,
) -> ReceiveStats:
    """The Event-Driven Consumer: call ``handler`` with each message as it arrives.

    The handler returning acknowledges the message. Raising :class:`Rejected` refuses it with a
    code (moved to that code's channel, acknowledged). Raising anything else is a failed
    attempt: the message comes again after the spec's backoff (``2^n x 100 ms`` after the n-th
    failure), and after the receiver's ``max_attempts`` it is moved to ``error`` (GENERR009, the
    exception named) and the partition moves on. Runs until ``stop`` is set, ``max_messages``
    were handled (acknowledged, rejected or given up on), or nothing arrived for
    ``idle_timeout`` seconds.
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
        failure: Exception | None = None
        try:
            handler(received)
        except Rejected as refused:
            try:
                receiver.reject(received, refused.error_code, refused.error_description)
                handled += 1
                continue
            except ValueError as error:  # not one of the spec's codes: a failed attempt like any other
                _log.error("%s: %s refused with %s", receiver.channel, received.message_id, error)
                failure = refused
        except Exception as error:
            failure = error
        if failure is not None:
            _log.error("%s: the handler failed on %s", receiver.channel, received.message_id, exc_info=failure)
            failures += 1
            attempts = receiver.nack(received, failure)
            if receiver.max_attempts is not None and attempts >= receiver.max_attempts:
                handled += 1  # given up on: moved to the error channel, the partition moves on
                failures = 0
            else:  # uncounted attempts (no max_attempts) still wait longer each time, up to 30 s
                stop.wait(min(_LONGEST_PAUSE, backoff.delay(attempts or failures)))
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
            receiver.nack(received, count=False)
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
