"""The jobs' arguments, run locally as a user runs them: a path that cannot be used is said in
one line and exit 2, before Spark starts (it was a Py4J stack trace, or - an output inside the
archive - a run that read its own Parquet files back as records the next time)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from glue_jobs import audit_compaction, audit_report, runtime

ROOT = Path(__file__).resolve().parents[2]


def run_job(script: str, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "glue_jobs" / script), *arguments],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def archive(tmp_path: Path) -> Path:
    root = tmp_path / "archive"
    (root / "year=2026").mkdir(parents=True)
    (root / "year=2026" / "object.gz").write_bytes(b"")
    return root


@pytest.mark.parametrize(
    ("script", "arguments", "says"),
    [
        (
            "audit_compaction.py",
            ["--input", "{tmp}/missing", "--output", "{tmp}/out"],
            "--input {tmp}/missing: no such",
        ),
        ("audit_compaction.py", ["--input", "{archive}", "--output", "{tmp}/file"], "--output {tmp}/file: exists and"),
        (
            "audit_compaction.py",
            ["--input", "{archive}", "--output", "{archive}/curated"],
            "--output {archive}/curated is inside --input {archive}",
        ),
        (
            "audit_compaction.py",
            ["--input", "{archive}", "--output", "{tmp}/out", "--errors", "{tmp}/missing"],
            "--errors {tmp}/missing: no such",
        ),
        ("audit_report.py", ["--input", "{archive}", "--output", "{tmp}/out"], "--input {archive}: no messages/"),
        (
            "audit_report.py",
            ["--input", "{tmp}", "--output", "{archive}/report", "--errors", "{archive}"],
            "--output {archive}/report is inside --errors {archive}",
        ),
    ],
)
def test_a_path_the_job_cannot_use_is_one_line_and_exit_2(
    script: str, arguments: list[str], says: str, tmp_path: Path, archive: Path
) -> None:
    (tmp_path / "file").write_text("not a directory")
    for name in ("messages", "rejects", "duplicates"):
        (tmp_path / name).mkdir()
    done = run_job(script, *(a.format(tmp=tmp_path, archive=archive) for a in arguments))
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.count("\n") == 1, done.stderr
    job = script.removesuffix(".py").replace("_", "-")
    assert done.stderr.startswith(f"{job}: {says.format(tmp=tmp_path, archive=archive)}")


def test_the_output_may_not_be_inside_an_archive_reached_through_a_symlink(tmp_path: Path, archive: Path) -> None:
    link = tmp_path / "link"
    link.symlink_to(archive)
    arguments = {"input": str(link), "output": str(archive / "out"), "errors": None}
    with pytest.raises(runtime.UsageError, match="is inside --input"):
        runtime.check_paths(audit_compaction.JOB, arguments)


def test_remote_paths_are_the_stores_to_judge() -> None:
    runtime.check_paths(audit_compaction.JOB, {"input": "s3://b/audit/", "output": "s3://c/curated", "errors": None})


_KINDS = st.sampled_from(["missing", "file", "directory", "symlink"])
_PLACES = st.sampled_from(["beside", "inside", "same", "file", "deep inside", "parent"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=_KINDS, place=_PLACES, job=st.sampled_from([audit_compaction.JOB, audit_report.JOB]))
def test_a_local_path_is_refused_exactly_when_the_job_could_not_use_it(
    tmp_path_factory: pytest.TempPathFactory, kind: str, place: str, job: runtime.Job
) -> None:
    """Any input (missing, a file, a directory, a symlink to one) and any output (beside it,
    inside, the same, a file, its parent): refused with UsageError when, and only when, the job
    could not read the input or the output would be written into an archive it reads."""
    root = tmp_path_factory.mktemp("paths")
    target = root / "data"
    if kind in ("directory", "symlink"):
        target.mkdir()
        for name in ("messages", "rejects", "duplicates"):
            (target / name).mkdir()
    elif kind == "file":
        target.write_text("x")
    given_input = target
    if kind == "symlink":
        given_input = root / "link"
        given_input.symlink_to(target)
    (root / "a-file").write_text("x")
    output = {
        "beside": root / "out",
        "inside": given_input / "out",
        "same": given_input,
        "file": root / "a-file",
        "deep inside": given_input / "a" / "b",
        "parent": root,
    }[place]
    arguments = {"input": str(given_input), "output": str(output), "errors": None}
    archive_input = job is audit_compaction.JOB
    if kind == "missing":
        expected_refusal = True
    elif place == "file" or (place == "same" and kind == "file"):
        expected_refusal = True  # an output that exists and is no directory
    elif kind == "file" and not archive_input:
        expected_refusal = True  # the report's input is a directory of tables
    elif place in ("inside", "same", "deep inside") and archive_input:
        expected_refusal = True
    else:
        expected_refusal = False
    try:
        runtime.check_paths(job, arguments)
    except runtime.UsageError:
        refused = True
    else:
        refused = False
    assert refused == expected_refusal, (kind, place, job.name)
