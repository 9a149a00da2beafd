"""Benchmarks of the hot paths (``python -m rdss bench ...``): measured, never guessed."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


def rate(items: Sequence[T], work: Callable[[T], object], rounds: int = 5) -> float:
    """Median items per second of ``work`` over ``items``, across ``rounds`` timed passes."""
    results = []
    for _ in range(rounds):
        started = time.perf_counter()
        for item in items:
            work(item)
        results.append(len(items) / (time.perf_counter() - started))
    return statistics.median(results)
