"""glue_jobs/runtime.py: one entry point for both jobs, and what Glue must ship beside them."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from glue_jobs import audit_compaction, audit_report, runtime
from stacks.jobs import GLUE_JOBS, SHARED_MODULES

JOBS = {"audit_compaction.py": audit_compaction.JOB, "audit_report.py": audit_report.JOB}
#: What a script on Glue may import: the standard library, Spark, Glue's own, and the shipped modules.
ALLOWED = {"pyspark", "awsglue", *(path.stem for path in SHARED_MODULES)}


def imported(path: Path) -> set[str]:
    """Top-level names a file imports (``from glue_jobs import x`` counts as ``x``)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            top = node.module.split(".")[0]
            names |= {alias.name for alias in node.names} if top == "glue_jobs" else {top}
    return names - {"__future__"}


@pytest.mark.parametrize("script", [*JOBS, *(path.name for path in SHARED_MODULES)])
def test_a_script_imports_only_what_glue_has_or_is_shipped(script: str) -> None:
    foreign = {name for name in imported(GLUE_JOBS / script) if name not in sys.stdlib_module_names}
    assert foreign <= ALLOWED, f"{script} imports {foreign - ALLOWED}, which Glue would not have"


def test_every_job_script_is_declared_with_the_runtime() -> None:
    scripts = {path.name for path in GLUE_JOBS.glob("*.py")} - {path.name for path in SHARED_MODULES}
    assert scripts == set(JOBS)
    for script, job in JOBS.items():
        assert job.run.__module__ == f"glue_jobs.{Path(script).stem}"
        # the entry point, local or on Glue, is the runtime's
        assert (GLUE_JOBS / script).read_text().rstrip().endswith("sys.exit(main())")


def test_arguments_are_parsed_as_declared() -> None:
    job = audit_compaction.JOB
    parsed = runtime.parse_arguments(job, ["--input", "in", "--output", "out"])
    assert parsed == {"input": "in", "output": "out", "errors": None}
    with pytest.raises(SystemExit):
        runtime.parse_arguments(job, ["--input", "in"])
    assert not runtime.on_glue(["--JOB_NAME", "x", "--input", "in"])  # no awsglue here


def test_a_required_argument_is_required_in_the_context() -> None:
    context = runtime.Context(spark=None, arguments={"input": None})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="--input is required"):
        context.argument("input")
