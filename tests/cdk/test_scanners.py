"""cfn-lint and checkov over every environment's synthesised template: nothing found.

The scanners run from their own virtualenv (``make scanners``, a dependency of ``make test``):
checkov pins libraries the project pins differently. A check that does not apply is skipped on
the resource it concerns, with its reason (``stacks.nag.skip_checkov``), as cdk-nag findings
are acknowledged; cfn-lint has no exceptions at all.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.cdk.conftest import ROOT, Synthesized

SCANNERS = ROOT / ".venv-scanners" / "bin"
ENVIRONMENTS = ("dev", "staging", "prod")


def _scanner(name: str) -> Path:
    path = SCANNERS / name
    if not path.exists():
        pytest.fail(f"{path} is missing: `make scanners` installs the pinned scanners (make test does it first)")
    return path


def _template(environments: dict[str, Synthesized], name: str) -> Path:
    synthesized = environments[name]
    return synthesized.outdir / f"{synthesized.stack.stack_name}.template.json"


def _run(command: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)


@pytest.mark.parametrize("environment", ENVIRONMENTS)
def test_cfn_lint_finds_no_error_or_warning(environments: dict[str, Synthesized], environment: str) -> None:
    result = _run([str(_scanner("cfn-lint")), "--format", "json", str(_template(environments, environment))])
    assert result.stdout.strip(), result.stderr
    findings = [(m["Rule"]["Id"], m["Location"]["Path"], m["Message"]) for m in json.loads(result.stdout)]
    assert findings == []
    assert result.returncode == 0, result.stderr


def _checkov(template: Path) -> dict[str, Any]:
    result = _run(
        [
            str(_scanner("checkov")),
            "--file",
            str(template),
            "--framework",
            "cloudformation",
            "--output",
            "json",
            "--compact",
            "--skip-download",
        ]
    )
    assert result.stdout.strip(), result.stderr
    report = json.loads(result.stdout)
    return dict(report[0] if isinstance(report, list) else report)


@pytest.fixture(scope="module")
def checkov_reports(environments: dict[str, Synthesized]) -> dict[str, dict[str, Any]]:
    return {name: _checkov(_template(environments, name)) for name in ENVIRONMENTS}


@pytest.mark.parametrize("environment", ENVIRONMENTS)
def test_checkov_finds_no_failure(checkov_reports: dict[str, dict[str, Any]], environment: str) -> None:
    report = checkov_reports[environment]
    failed = [(c["check_id"], c["resource"], c["check_name"]) for c in report["results"]["failed_checks"]]
    assert failed == []
    assert report["summary"]["passed"] > 100  # it did scan the template


@pytest.mark.parametrize("environment", ENVIRONMENTS)
def test_every_checkov_skip_says_why(checkov_reports: dict[str, dict[str, Any]], environment: str) -> None:
    for check in checkov_reports[environment]["results"]["skipped_checks"]:
        comment = check.get("check_result", {}).get("suppress_comment", "")
        assert len(comment) > 40, (check["check_id"], check["resource"], comment)
