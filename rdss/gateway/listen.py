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
from rdss.model.retry import PATIENT, SPEC_BACKOFF, Backoff

_log = logging.getLogger(__name__)

#: The longest pause between attempts at a failing message (the spec's doubling is unbounded).
LONGEST_PAUSE = 30.0

Handler = Callable[[Received], object]


class Run:
    """One run of an event-driven consumer (:func:`listen`, :func:`rdss.gateway.amgi.serve`):
    when it ends - ``stop`` set, ``max_messages`` handled (acknowledged, refused or given up
    on), or nothing arrived for ``idle_timeout`` seconds - and how long it pauses after a
    failed attempt: the spec's ``backoff`` (``2^n x 100 ms``), up to :data:`LONGEST_PAUSE`."""

    def __init__(
        self,
        clock: Callable[[], float],
        *,
        stop: threading.Event | None = None,
        max_messages: int | None = None,
        idle_timeout: float | None = None,
        backoff: Backoff = SPEC_BACKOFF,
    ) -> None:
        self.clock = clock
        self.stop = stop or threading.Event()
        self.max_messages = max_messages
        self.idle_timeout = idle_timeout
        self.backoff = backoff
        #: Messages handled so far.
        self.handled = 0
        #: Failed attempts in a row (a success, or a message moved, starts the count again).
        self.failures = 0
        self._idle_since = clock()

    def going(self) -> bool:
        """Not stopped, and not yet ``max_messages`` handled."""
        return not self.stop.is_set() and (self.max_messages is None or self.handled < self.max_messages)

    def room(self, limit: int) -> int:
        """At most ``limit`` messages, and no more than are left to handle."""
        return limit if self.max_messages is None else min(limit, self.max_messages - self.handled)

    def arrived(self, anything: bool) -> bool:
        """After a receive: False when nothing arrived; True ends the run (nothing for
        ``idle_timeout`` seconds)."""
        if anything:
            self._idle_since = self.clock()
            return False
        return self.idle_timeout is not None and self.clock() - self._idle_since >= self.idle_timeout

    def settled(self, count: int = 1) -> None:
        """``count`` messages handled: acknowledged, refused or moved."""
        self.handled += count

    def failed(self, attempts: int) -> None:
        """A failed attempt (``attempts``: the message's count, 0 when not counted): wait the
        backoff of whichever is greater, its attempts or the failures in a row - uncounted
        attempts still wait longer each time."""
        self.failures += 1
        self.stop.wait(min(LONGEST_PAUSE, self.backoff.delay(max(attempts, self.failures))))

    def steady(self) -> None:
        """A message went through: the next failure waits the shortest pause again."""
        self.failures = 0


def listen(receiver: Receiver, handler: Handler, run: Run | None = None) -> ReceiveStats:
    """The Event-Driven Consumer: call ``handler`` with each message as it arrives.

    The handler returning acknowledges the message. Raising :class:`Rejected` refuses it with a
    code (moved to that code's channel, acknowledged). Raising anything else is a failed
    attempt: the message comes again after the spec's backoff (``2^n x 100 ms`` after the n-th
    failure), and after the receiver's ``max_attempts`` it is moved to ``error`` (GENERR009, the
    exception named) and the partition moves on. Runs as ``run`` says (default: until the
    process ends).
    """
    run = run or Run(receiver.clock)
    while run.going():
        received = receive_or_wait(receiver, run.stop)
        if run.arrived(received is not None):
            break
        if received is None:
            continue
        try:
            handler(received)
        except Exception as error:
            refused = error if isinstance(error, Rejected) else None
            if refused is None:
                _log.error("%s: the handler failed on %s", receiver.channel, received.message_id, exc_info=error)
            attempts = settle_failure(
                receiver,
                received,
                error,
                refused.error_code if refused else None,
                refused.error_description if refused else None,
            )
            if attempts is None:
                run.settled()  # refused, or given up on: moved, and the partition moves on
                run.steady()
            else:
                run.failed(attempts)
            continue
        run.steady()
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
        run.settled()
    receiver.commit()
    return receiver.stats


def settle_failure(
    receiver: Receiver,
    received: Received,
    reason: BaseException | str,
    code: str | None = None,
    description: str | None = None,
) -> int | None:
    """Settle a message the application did not process - the one rule of :func:`listen` and
    of the AMGI server (:func:`rdss.gateway.amgi.serve`).

    With ``code`` the message is refused: moved, decorated with ``code`` and ``description``, to
    that code's channel (:meth:`Receiver.reject`). Without one, or with a code that is not the
    spec's, it is a failed attempt (:meth:`Receiver.nack`, ``reason`` naming what failed), moved
    to ``error`` once ``max_attempts`` are used up.

    Returns:
        None when the message was moved; else the failed attempts so far (0 when the receiver
        does not count them): it comes again.
    """
    if code is not None:
        try:
            receiver.reject(received, code, description or f"refused with {code}")
            return None
        except ValueError as error:  # not one of the spec's codes: a failed attempt like any other
            _log.error("%s: %s refused with %s", receiver.channel, received.message_id, error)
            if isinstance(reason, str):
                reason = f"refused with {code!r}, not one of the spec's error codes: {reason}"
    attempts = receiver.nack(received, reason)
    if receiver.max_attempts is not None and attempts >= receiver.max_attempts:
        return None
    return attempts


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
