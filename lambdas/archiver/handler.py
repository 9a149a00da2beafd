"""The archiver Lambda: the archiver AMGI app behind the Kinesis event-source-mapping adaptor."""

from typing import Any

from rdss.amgi.kinesis import KinesisEventSourceMappingHandler
from rdss.archive.app import ArchiverApp
from rdss.observability.powertools import logger, metrics, tracer

_server = KinesisEventSourceMappingHandler(ArchiverApp.from_environment())


@logger.inject_lambda_context
@metrics.log_metrics(capture_cold_start_metric=True)
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return _server(event, context)
