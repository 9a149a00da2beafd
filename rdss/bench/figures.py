"""What a benchmark's figures are: the measured values, and the figures derived from them.

A benchmark's result is a frozen dataclass of what it measured, each figure derived from those a
property. Its JSON (``rdss bench ... --json``) holds both, in that order, read from the class
itself: a derived figure added later is reported with no second list to keep in step.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any


class Measured:
    """Base of a benchmark's figures (a dataclass): :meth:`as_dict` reports every field, then
    every property the class defines."""

    def as_dict(self) -> dict[str, Any]:
        derived = {name: getattr(self, name) for name, kind in vars(type(self)).items() if isinstance(kind, property)}
        return {**asdict(self), **derived}  # type: ignore[call-overload]
