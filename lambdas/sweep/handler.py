"""The sweep Lambda: on a schedule, moves stale incomplete sequences to the error channel."""

from typing import Any

from rdss.sequencer import Sweep

_sweep = Sweep.from_environment()


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return _sweep.run()
