"""The sweep Lambda: on a schedule, moves stale incomplete sequences to the error channel."""

from typing import Any

from rdss.observability.powertools import logger, metrics, tracer
from rdss.processors.sequencer.sweep import Sweep

_sweep = Sweep.from_environment()


@logger.inject_lambda_context
@metrics.log_metrics(capture_cold_start_metric=True)
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return _sweep.run()
