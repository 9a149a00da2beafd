"""Each function logs, traces and counts under its own service name, the Powertools way."""

from __future__ import annotations

import ast
from pathlib import Path

from rdss.deployment.topology import RDSS
from tests.cdk.conftest import Synthesized

LAMBDAS = Path(__file__).resolve().parents[2] / "lambdas"
DECORATORS = [
    "logger.inject_lambda_context",
    "metrics.log_metrics(capture_cold_start_metric=True)",
    "tracer.capture_lambda_handler",
]


def test_every_function_has_its_own_service_name_and_active_tracing(synthesized: Synthesized) -> None:
    names = {}
    for processor in RDSS.processors:
        function = synthesized.stack.messaging.processors[processor.name].function
        properties = synthesized.json["Resources"][synthesized.logical_id(function)]["Properties"]
        variables = properties["Environment"]["Variables"]
        names[processor.name] = variables["POWERTOOLS_SERVICE_NAME"]
        assert variables["POWERTOOLS_METRICS_NAMESPACE"] == "RDSS"
        assert properties["TracingConfig"] == {"Mode": "Active"}
    assert names == {p.name: p.name for p in RDSS.processors}
    assert len(set(names.values())) == len(names)


def test_every_handler_wears_the_powertools_decorators() -> None:
    for processor in RDSS.processors:
        module, _, function = processor.handler.partition("/")[2].partition(".")
        tree = ast.parse((LAMBDAS / processor.name / f"{module}.py").read_text())
        [handler] = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function]
        assert [ast.unparse(d) for d in handler.decorator_list] == DECORATORS, processor.name


def test_the_audit_log_keeps_within_the_spec_s_firehose_budget(synthesized: Synthesized) -> None:
    """Every message enters through input, so one delivery stream archives them all: with the
    invalid and error archives, three per environment - nine for dev, staging and prod, within
    the spec's 20 Firehose delivery streams per region."""
    streams = synthesized.resources("AWS::KinesisFirehose::DeliveryStream")
    archived = [c.name for c in RDSS.channels if c.archive is not None]
    assert archived == ["input", "invalid", "error"]
    assert len(streams) == len(archived)
    assert 3 * len(streams) <= 20
