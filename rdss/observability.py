"""Structured logs, EMF metrics and traces for the processors (Powertools for AWS Lambda).

Outside Lambda (tests, the local runtime, benchmarks) the tracer disables itself and metrics
can be silenced with ``POWERTOOLS_METRICS_DISABLED=true``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from aws_lambda_powertools import Logger, Metrics, Tracer, single_metric
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.metrics.functions import is_metrics_disabled

NAMESPACE = "RDSS"

logger = Logger(service="rdss")
tracer = Tracer(service="rdss")
metrics = Metrics(namespace=NAMESPACE, service="rdss")


def emit_counts(processor: str, counts: Mapping[tuple[str, str], int]) -> None:
    """One EMF metric per (dimension, value): e.g. ("outcome", "routed"), ("code", "GENERR001"),
    ("channel", "metadata"). Each lands in CloudWatch as ``<Dimension>`` count with that
    dimension, so dashboards can break traffic down by outcome, code and channel."""
    if is_metrics_disabled():  # single_metric itself ignores POWERTOOLS_METRICS_DISABLED
        return
    for (dimension, value), count in sorted(counts.items()):
        if not count:
            continue
        with single_metric(
            name=f"Messages{dimension.capitalize()}",
            unit=MetricUnit.Count,
            value=count,
            namespace=NAMESPACE,
            default_dimensions={"processor": processor, dimension: value},
        ):
            pass


class Tally(Counter[tuple[str, str]]):
    """Counts per (dimension, value) for one batch."""

    def add(self, dimension: str, value: str, count: int = 1) -> None:
        self[(dimension, value)] += count
