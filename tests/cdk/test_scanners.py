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


def _templates(environments: dict[str, Synthesized]) -> dict[str, Path]:
    return {
        name: environments[name].outdir / f"{environments[name].stack.stack_name}.template.json"
        for name in ENVIRONMENTS
    }


def _run(command: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)


# Each scanner runs once over the three templates (their start-up is most of their time) and
# each environment's test reads its own findings from the one report.


@pytest.fixture(scope="module")
def cfn_lint_findings(environments: dict[str, Synthesized]) -> list[dict[str, Any]]:
    result = _run([str(_scanner("cfn-lint")), "--format", "json", *map(str, _templates(environments).values())])
    assert result.stdout.strip(), result.stderr
    findings = list(json.loads(result.stdout))
    # every finding is attributed to one of the templates, and the exit code agrees with them
    templates = {template.resolve() for template in _templates(environments).values()}
    assert {Path(m["Filename"]).resolve() for m in findings} <= templates
    assert (result.returncode == 0) == (not findings), result.stderr
    return findings


@pytest.mark.parametrize("environment", ENVIRONMENTS)
def test_cfn_lint_finds_no_error_or_warning(
    environments: dict[str, Synthesized], cfn_lint_findings: list[dict[str, Any]], environment: str
) -> None:
    template = _templates(environments)[environment]
    findings = [
        (m["Rule"]["Id"], m["Location"]["Path"], m["Message"])
        for m in cfn_lint_findings
        if Path(m["Filename"]).resolve() == template.resolve()
    ]
    assert findings == []


@pytest.fixture(scope="module")
def checkov_reports(environments: dict[str, Synthesized]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Per environment: checkov's passed, failed and skipped checks."""
    templates = _templates(environments)
    files = [argument for template in templates.values() for argument in ("--file", str(template))]
    result = _run(
        [
            str(_scanner("checkov")),
            *files,
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
    results = (report[0] if isinstance(report, list) else report)["results"]
    by_file = {template.resolve(): name for name, template in templates.items()}
    reports: dict[str, dict[str, list[dict[str, Any]]]] = {
        name: {"passed_checks": [], "failed_checks": [], "skipped_checks": []} for name in ENVIRONMENTS
    }
    for kind in ("passed_checks", "failed_checks", "skipped_checks"):
        for check in results.get(kind, []):
            reports[by_file[Path(check["file_abs_path"]).resolve()]][kind].append(check)
    return reports


@pytest.mark.parametrize("environment", ENVIRONMENTS)
def test_checkov_finds_no_failure(checkov_reports: dict[str, Any], environment: str) -> None:
    report = checkov_reports[environment]
    failed = [(c["check_id"], c["resource"], c["check_name"]) for c in report["failed_checks"]]
    assert failed == []
    assert len(report["passed_checks"]) > 100  # it did scan the template


@pytest.mark.parametrize("environment", ENVIRONMENTS)
def test_every_checkov_skip_says_why(checkov_reports: dict[str, Any], environment: str) -> None:
    skipped = checkov_reports[environment]["skipped_checks"]
    assert skipped  # the declared skips are read (the functions outside a VPC, at least)
    for check in skipped:
        comment = check.get("check_result", {}).get("suppress_comment", "")
        assert len(comment) > 40, (check["check_id"], check["resource"], comment)
