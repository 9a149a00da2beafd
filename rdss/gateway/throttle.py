"""Message Throttle (EIP): at most N messages a second reach the application.

A sliding window, not a fixed interval: the last N delivery times are kept, and a delivery
waits until the oldest of them is a second old. So in *any* one-second window at most N
messages are delivered, bursts up to N are not slowed, and a steady stream runs at N/s.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable


class Throttle:
    """Blocks just long enough to keep deliveries at or under ``rate`` per ``period`` seconds."""

    def __init__(
        self,
        rate: float,
        *,
        period: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if rate <= 0:
            raise ValueError("a throttle needs a positive rate")
        self.period = period
        # a fractional rate (0.5/s) is one message per 2 s: a window of one, stretched
        self.capacity = max(1, int(rate))
        self.window = period * self.capacity / rate
        self.clock = clock
        self.sleep = sleep
        self._times: deque[float] = deque(maxlen=self.capacity)
        #: Seconds spent waiting so far.
        self.waited = 0.0

    def wait(self) -> None:
        """Return when one more delivery keeps the rate; record it."""
        if len(self._times) == self.capacity:
            delay = self._times[0] + self.window - self.clock()
            if delay > 0:
                self.sleep(delay)
                self.waited += delay
        self._times.append(self.clock())
