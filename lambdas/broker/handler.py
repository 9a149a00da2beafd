"""The broker Lambda: the broker AMGI app behind the Kinesis event-source-mapping adaptor."""

from typing import Any

from rdss.amgi.kinesis import KinesisEventSourceMappingHandler
from rdss.observability.powertools import logger, metrics, tracer
from rdss.processors.broker import Broker

_server = KinesisEventSourceMappingHandler(Broker.from_environment())


@logger.inject_lambda_context
@metrics.log_metrics(capture_cold_start_metric=True)
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return _server(event, context)
