"""Counting the AWS calls a benchmark makes, by operation: a botocore ``before-call`` hook on
each client it is attached to, and a method the benchmarks' in-memory stubs call for the calls
they answer, so that a stubbed run is counted as a real one is."""

from __future__ import annotations

import threading
from collections.abc import Collection
from typing import Any


class CallCounter:
    """AWS calls by operation name, counted between :meth:`start` and :meth:`stop` (from the
    start by default). Thread-safe: the broker makes its claims from a pool of threads."""

    def __init__(self, operations: Collection[str] | None = None) -> None:
        #: Only these operations are counted (None: every one, data plane and control plane).
        self.operations = operations
        self.calls: dict[str, int] = {}
        self._active = True
        self._lock = threading.Lock()

    def attach(self, client: Any) -> Any:
        """``client``, its calls counted from now on."""
        client.meta.events.register("before-call.*.*", self._before_call)
        return client

    def count(self, operation: str) -> None:
        """One call of ``operation`` (what a stub answering it in memory reports)."""
        if self._active and (self.operations is None or operation in self.operations):
            with self._lock:
                self.calls[operation] = self.calls.get(operation, 0) + 1

    def start(self) -> None:
        """Count from zero again, from now on (the calls before are set-up and warm-up)."""
        with self._lock:
            self.calls.clear()
        self._active = True

    def stop(self) -> None:
        """Count no more calls (those after the timed work)."""
        self._active = False

    def counted(self) -> dict[str, int]:
        """The calls counted, by operation name in order."""
        with self._lock:
            return dict(sorted(self.calls.items()))

    def _before_call(self, model: Any, **_: Any) -> None:
        self.count(model.name)
