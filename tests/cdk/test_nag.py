"""cdk-nag's AwsSolutions, Serverless and NIST 800-53 rev 5 packs: no finding unacknowledged, no
acknowledgement stale."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from constructs import IConstruct

from stacks.nag import DRY_RUN_CONTEXT, DRY_RUN_METADATA
from tests.cdk.conftest import Synthesized, make_app, validation_report


@pytest.mark.parametrize("environment", ["dev", "staging", "prod"])
def test_the_validation_report_has_no_unacknowledged_finding(
    environments: dict[str, Synthesized], environment: str
) -> None:
    report = environments[environment].validation_report()
    violations = [v for plugin in report["pluginReports"] for v in plugin["violations"]]
    assert violations == []


def _constructs(root: IConstruct) -> list[IConstruct]:
    return [root, *(c for child in root.node.children for c in _constructs(child))]


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[tuple[str, str, str]], list[tuple[str, str]]]:
    """dev synthesised with acknowledgements recorded but not made: (acknowledgements, findings)."""
    outdir: Path = tmp_path_factory.mktemp("cdk-nag-dry-run")
    app, _ = make_app("dev", outdir, **{DRY_RUN_CONTEXT: True})
    with pytest.raises(RuntimeError) as failure:
        app.synth()
    assert str(failure.value).startswith("ValidationFailed")
    acknowledgements = [
        (construct.node.path, entry.data["id"], entry.data["reason"])
        for construct in _constructs(app)
        for entry in construct.node.metadata
        if entry.type == DRY_RUN_METADATA
    ]
    findings = [
        (construct["constructPath"], violation["ruleName"])
        for plugin in validation_report(outdir)["pluginReports"]
        for violation in plugin["violations"]
        for construct in violation["violatingConstructs"]
    ]
    return acknowledgements, findings


def _covers(scope: str, path: str) -> bool:
    return path == scope or path.startswith(scope + "/")


def test_three_packs_check_the_stack(dry_run: Any) -> None:
    _, findings = dry_run
    assert {rule.split("-", 1)[0] for _, rule in findings} == {"AwsSolutions", "Serverless", "NIST.800.53.R5"}


def test_every_finding_is_acknowledged_where_it_arises(dry_run: Any) -> None:
    acknowledgements, findings = dry_run
    assert findings, "the dry run should show the findings the acknowledgements answer"
    for path, rule in findings:
        assert any(r == rule and _covers(scope, path) for scope, r, _ in acknowledgements), (path, rule)


def test_every_acknowledgement_answers_a_finding(dry_run: Any) -> None:
    acknowledgements, findings = dry_run
    for scope, rule, _ in acknowledgements:
        assert any(r == rule and _covers(scope, path) for path, r in findings), (scope, rule)


def test_every_acknowledgement_names_its_resource_and_a_reason(dry_run: Any) -> None:
    acknowledgements, _ = dry_run
    for scope, rule, reason in acknowledgements:
        assert len(reason) > 60, (scope, rule, reason)
        assert "${Token[" not in reason, (rule, reason)  # an unresolved name reads as nothing
        # the reason names the resource: its physical name, a topology name or its construct path
        assert any(word in reason for word in ("rdss-dev", "bucket", "key", "Messaging/", "queue")), (rule, reason)
