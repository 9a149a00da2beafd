"""Structured logs, EMF metrics and traces for the processors (Powertools for AWS Lambda).

The Lambda handlers (``lambdas/*/handler.py``) wear Powertools' decorators: the Lambda context
and cold start in every log line, a cold-start metric, the invocation traced.
Outside Lambda (tests, the local runtime, benchmarks) the tracer disables itself and metrics
can be silenced with ``POWERTOOLS_METRICS_DISABLED=true``.
"""

from __future__ import annotations

import functools
import inspect
import logging
import os
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from aws_lambda_powertools import Logger, Metrics, Tracer, single_metric
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.metrics.functions import is_metrics_disabled

NAMESPACE = "RDSS"

#: Each function is deployed with its own ``POWERTOOLS_SERVICE_NAME`` (its processor's name, see
#: ``stacks/processors.py``), so its logs, traces and metrics say which processor wrote them;
#: outside Lambda (the local runtime, tests) the service is ``rdss-processors``. (Not ``rdss``:
#: Powertools names its logging logger after the service, and a logger called ``rdss`` would
#: capture every ``rdss.*`` module's lines.)
SERVICE = os.environ.get("POWERTOOLS_SERVICE_NAME") or "rdss-processors"

_Function = TypeVar("_Function", bound=Callable[..., Any])


class LazyTracer:
    """Powertools' :class:`Tracer`, made when a traced call first runs.

    Making a Tracer loads the X-Ray SDK, and its auto-patching (every library the SDK supports,
    the AWS SDK among them) loads botocore's client machinery: in a Lambda handler that is
    imported while its cold start is timed, before the function knows it has work. Here the
    decorators are applied at import as before, and the tracer is made and the same libraries
    patched by the first call through one of them. Other attributes are the Tracer's.
    """

    def __init__(self, service: str) -> None:
        self._service = service
        self._tracer: Tracer | None = None
        self._lock = threading.Lock()

    @property
    def tracer(self) -> Tracer:
        if self._tracer is None:
            with self._lock:
                if self._tracer is None:
                    tracer = Tracer(service=self._service, auto_patch=False)
                    tracer.patch()  # what auto_patch does: every module the X-Ray SDK supports
                    self._tracer = tracer
        return self._tracer

    def capture_lambda_handler(self, handler: _Function) -> _Function:
        return self._deferred(handler, "capture_lambda_handler")

    def capture_method(self, method: _Function) -> _Function:
        return self._deferred(method, "capture_method")

    def _deferred(self, function: _Function, decorator: str) -> _Function:
        traced: Callable[..., Any] | None = None

        def decorated() -> Callable[..., Any]:
            nonlocal traced
            if traced is None:
                traced = getattr(self.tracer, decorator)(function)
            return traced

        if inspect.iscoroutinefunction(function):

            @functools.wraps(function)
            async def coroutine(*args: Any, **kwargs: Any) -> Any:
                return await decorated()(*args, **kwargs)

            return coroutine  # type: ignore[return-value]

        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return decorated()(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.tracer, name)


logger = Logger(service=SERVICE)
tracer = LazyTracer(SERVICE)
metrics = Metrics(namespace=NAMESPACE, service=SERVICE)


if os.environ.get("AWS_LAMBDA_FUNCTION_NAME"):
    # In Lambda the package's module loggers (rdss.putrecords giving up with GENERR005, the AMGI
    # server...) write the same JSON lines, with the same keys, as the processor's own logger.
    # What Powertools' copy_config_to_registered_loggers(include={"rdss"}) does, without loading
    # its log-buffering machinery at every cold start (~5 ms) for the one logger it would touch.
    package = logging.getLogger("rdss")
    package.setLevel(logger.log_level)
    package.handlers = list(logger.handlers)
    package.propagate = False  # the lines are the processor logger's: not also the root's
    logger.append_keys(name="%(name)s")  # which module wrote the line


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
