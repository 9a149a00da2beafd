"""The spec's network failure behaviour: exponential backoff, then give up with GENERR005.

Delay before retry *n* (1-based) is ``2**n * 100 ms``; at most 10 retries follow the first
attempt. When they are exhausted a log entry names GENERR005. (The spec's prose names
GENERR010 for this case, but its own error table defines GENERR005 as "maximum number of
connection retries exceeded" and GENERR010 as a malformed UUID; the table wins.)
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from rdss.model.errors import ErrorCode

T = TypeVar("T")

#: The spec's retry limit.
MAX_RETRIES = 10
#: The spec's base delay, in seconds (100 ms).
BASE_DELAY = 0.1

_log = logging.getLogger(__name__)


class RetriesExhausted(Exception):
    """Every retry failed; the spec's GENERR005."""

    error_code = ErrorCode.GENERR005


@dataclass(frozen=True)
class Backoff:
    """An exponential backoff policy: ``base * 2**retry`` seconds before retry ``retry``."""

    max_retries: int = MAX_RETRIES
    base: float = BASE_DELAY
    #: Longest single delay; None keeps the spec's pure doubling.
    cap: float | None = None
    #: Spread each delay at random over its upper half ("equal jitter"), so that clients failing
    #: together do not retry in step. Off where the spec fixes the delays (sending a Message).
    jitter: bool = False

    def delay(self, retry: int) -> float:
        """Seconds to wait before retry number ``retry`` (1-based)."""
        if retry < 1:
            raise ValueError("retries are numbered from 1")
        value = self.base * 2.0 ** min(retry, 64)  # a long outage: the exponent stops growing
        value = value if self.cap is None else min(value, self.cap)
        return value / 2 + random.uniform(0, value / 2) if self.jitter else value

    def delays(self) -> Iterator[float]:
        """The delays before each retry, in order."""
        return (self.delay(retry) for retry in range(1, self.max_retries + 1))


SPEC_BACKOFF = Backoff()

#: Retrying what the spec does not time - re-reading a channel, reconnecting, a handler that
#: failed: 0.2 s doubling to 30 s, jittered, for as long as the caller keeps going.
PATIENT = Backoff(max_retries=1_000_000, base=0.1, cap=30.0, jitter=True)


@dataclass
class Streak:
    """Failures in a row of a long-running loop under one backoff: each failure waits longer
    than the last, and a success starts the count again."""

    backoff: Backoff = PATIENT
    #: The streak's length from which the delay stops growing (a backoff without a cap).
    longest: int = 30
    failures: int = 0

    def failed(self) -> float:
        """Count a failure: the seconds to wait before the next attempt."""
        self.failures += 1
        return self.backoff.delay(min(self.failures, self.longest))

    def succeeded(self) -> None:
        self.failures = 0


def call_with_backoff(
    operation: Callable[[], T],
    *,
    retry_on: Callable[[BaseException], bool],
    backoff: Backoff = SPEC_BACKOFF,
    sleep: Callable[[float], None] = time.sleep,
    logger: logging.Logger | None = None,
    what: str = "send the Message",
) -> T:
    """Run ``operation``; on a failure ``retry_on`` accepts, wait and retry per ``backoff``.

    Raises:
        RetriesExhausted: the last retry failed too (logged with GENERR005 first).
        BaseException: whatever ``operation`` raised that ``retry_on`` does not accept.
    """
    log = logger or _log
    delays = backoff.delays()
    attempt = 0
    while True:
        attempt += 1
        try:
            return operation()
        except BaseException as error:
            if not retry_on(error):
                raise
            delay = next(delays, None)
            if delay is None:
                log.error(
                    "%s after %d attempts: could not %s: %s",
                    ErrorCode.GENERR005,
                    attempt,
                    what,
                    error,
                )
                raise RetriesExhausted(f"{ErrorCode.GENERR005}: could not {what} after {attempt} attempts") from error
            log.warning("attempt %d to %s failed (%s); retrying in %.1f s", attempt, what, error, delay)
            sleep(delay)
