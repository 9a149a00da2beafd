"""Structured logs, EMF metrics and traces for the processors (Powertools for AWS Lambda).

The Lambda handlers (``lambdas/*/handler.py``) wear Powertools' decorators: the Lambda context
and cold start in every log line, a cold-start metric, the invocation traced.
Outside Lambda (tests, the local runtime, benchmarks) the tracer disables itself and metrics
can be silenced with ``POWERTOOLS_METRICS_DISABLED=true``.

Powertools is loaded when a processor first logs, counts or traces, not when a handler is
imported: its logger, metrics and tracer modules (and what they import) were about 15 ms of
every cold import, timed by ``rdss bench coldstart`` before the function knows it has work.
:data:`logger`, :data:`metrics` and :data:`tracer` stand for Powertools' objects: the handlers'
decorators are applied at import as before, and each makes its object on the first call through
it; any other attribute is the object's own.
"""

from __future__ import annotations

import functools
import inspect
import logging
import os
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from aws_lambda_powertools import Logger, Metrics, Tracer

NAMESPACE = "RDSS"

#: Each function is deployed with its own ``POWERTOOLS_SERVICE_NAME`` (its processor's name, see
#: ``stacks/processors.py``), so its logs, traces and metrics say which processor wrote them;
#: outside Lambda (the local runtime, tests) the service is ``rdss-processors``. (Not ``rdss``:
#: Powertools names its logging logger after the service, and a logger called ``rdss`` would
#: capture every ``rdss.*`` module's lines.)
SERVICE = os.environ.get("POWERTOOLS_SERVICE_NAME") or "rdss-processors"

_Function = TypeVar("_Function", bound=Callable[..., Any])
_Made = TypeVar("_Made")


class _Deferred(Generic[_Made]):
    """A Powertools object made on first use; its decorators made when the decorated function is
    first called. Other attributes are the object's."""

    def __init__(self) -> None:
        self._made: _Made | None = None
        self._lock = threading.Lock()

    def _make(self) -> _Made:
        raise NotImplementedError

    @property
    def made(self) -> _Made:
        if self._made is None:
            with self._lock:
                if self._made is None:
                    self._made = self._make()
        return self._made

    def _deferred(self, function: _Function, decorate: Callable[[_Made], Callable[[_Function], Any]]) -> _Function:
        """``function`` as ``decorate(object)`` would wrap it, the object and the wrapping made by
        the first call."""
        wrapped: Callable[..., Any] | None = None

        def decorated() -> Callable[..., Any]:
            nonlocal wrapped
            if wrapped is None:
                wrapped = decorate(self.made)(function)
            return wrapped

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
        return getattr(self.made, name)


class LazyLogger(_Deferred["Logger"]):
    """Powertools' :class:`Logger` of ``service``, made when it first logs (or a handler it
    decorates is first called). In Lambda the package's module loggers write through it."""

    def __init__(self, service: str) -> None:
        super().__init__()
        self._service = service

    def _make(self) -> Logger:
        from aws_lambda_powertools import Logger

        logger = Logger(service=self._service)
        if os.environ.get("AWS_LAMBDA_FUNCTION_NAME"):
            _route_package_logs(logger)
        return logger

    def inject_lambda_context(self, lambda_handler: _Function | None = None, **options: Any) -> Any:
        if lambda_handler is None:
            return functools.partial(self.inject_lambda_context, **options)
        return self._deferred(lambda_handler, lambda made: functools.partial(made.inject_lambda_context, **options))


class LazyMetrics(_Deferred["Metrics"]):
    """Powertools' :class:`Metrics`, made when the handler it decorates is first called."""

    def __init__(self, namespace: str, service: str) -> None:
        super().__init__()
        self._namespace, self._service = namespace, service

    def _make(self) -> Metrics:
        from aws_lambda_powertools import Metrics

        return Metrics(namespace=self._namespace, service=self._service)

    def log_metrics(self, lambda_handler: _Function | None = None, **options: Any) -> Any:
        if lambda_handler is None:
            return functools.partial(self.log_metrics, **options)
        return self._deferred(lambda_handler, lambda made: functools.partial(made.log_metrics, **options))


class LazyTracer(_Deferred["Tracer"]):
    """Powertools' :class:`Tracer`, made when a traced call first runs.

    Making a Tracer loads the X-Ray SDK, and its auto-patching (every library the SDK supports,
    the AWS SDK among them) loads botocore's client machinery: in a Lambda handler that is
    imported while its cold start is timed, before the function knows it has work. Here the
    decorators are applied at import as before, and the tracer is made and the same libraries
    patched by the first call through one of them. Other attributes are the Tracer's.
    """

    def __init__(self, service: str) -> None:
        super().__init__()
        self._service = service

    def _make(self) -> Tracer:
        from aws_lambda_powertools import Tracer

        tracer = Tracer(service=self._service, auto_patch=False)
        tracer.patch()  # what auto_patch does: every module the X-Ray SDK supports
        return tracer

    @property
    def tracer(self) -> Tracer:
        return self.made

    def capture_lambda_handler(self, handler: _Function) -> _Function:
        return self._deferred(handler, lambda made: made.capture_lambda_handler)

    def capture_method(self, method: _Function) -> _Function:
        return self._deferred(method, lambda made: made.capture_method)


def _route_package_logs(logger: Logger) -> None:
    """In Lambda the package's module loggers (rdss.aws.putrecords giving up with GENERR005, the AMGI
    server...) write the same JSON lines, with the same keys, as the processor's own logger.
    What Powertools' copy_config_to_registered_loggers(include={"rdss"}) does, without loading
    its log-buffering machinery at every cold start (~5 ms) for the one logger it would touch."""
    package = logging.getLogger("rdss")
    package.setLevel(logger.log_level)
    package.handlers = list(logger.handlers)
    package.propagate = False  # the lines are the processor logger's: not also the root's
    logger.append_keys(name="%(name)s")  # which module wrote the line


class _UntilMade(logging.Handler):
    """The ``rdss`` package logger's handler in Lambda until the processor's logger is made: a
    line a module writes first makes it (which hands the package logger its handlers) and goes
    where those lines go."""

    def handle(self, record: logging.LogRecord) -> bool:
        made = logger.made  # routes the package's lines (_route_package_logs)
        package = logging.getLogger("rdss")
        if package.isEnabledFor(record.levelno):
            for handler in package.handlers:
                if record.levelno >= handler.level:
                    handler.handle(record)
        return made is not None

    def emit(self, record: logging.LogRecord) -> None:  # handle() does the work
        pass


logger = LazyLogger(SERVICE)
tracer = LazyTracer(SERVICE)
metrics = LazyMetrics(NAMESPACE, SERVICE)


if os.environ.get("AWS_LAMBDA_FUNCTION_NAME"):
    _package = logging.getLogger("rdss")
    _package.handlers = [_UntilMade()]
    _package.propagate = False


def emit_counts(processor: str, counts: Mapping[tuple[str, str], int]) -> None:
    """One EMF metric per (dimension, value): e.g. ("outcome", "routed"), ("code", "GENERR001"),
    ("channel", "metadata"). Each lands in CloudWatch as ``<Dimension>`` count with that
    dimension, so dashboards can break traffic down by outcome, code and channel."""
    from aws_lambda_powertools import single_metric
    from aws_lambda_powertools.metrics import MetricUnit
    from aws_lambda_powertools.metrics.functions import is_metrics_disabled

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
