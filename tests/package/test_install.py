"""The package as a user gets it: sdist -> wheel built from that sdist -> a fresh venv -> ``rdss``.

The fixtures (conftest.py) build them once for the suite.
"""

from __future__ import annotations

import shutil
import sys
import tarfile
import zipfile
from pathlib import Path

import orjson
import pytest

from tests.conftest import EXAMPLES, ROOT
from tests.package.conftest import checked, run

pytestmark = pytest.mark.slow


def test_the_sdist_carries_the_schemas(sdist: Path) -> None:
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    shipped = {str(path.relative_to(ROOT)) for path in (ROOT / "schemas").rglob("*.json")}
    assert shipped, "schemas/ is empty in the checkout"
    assert shipped <= names, sorted(shipped - names)
    assert not [name for name in names if "__pycache__" in name or name.endswith((".pyc", ".so"))]


def test_the_wheel_built_from_the_sdist_carries_the_schemas_as_package_data(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    shipped = {f"rdss/_schemas/{path.relative_to(ROOT / 'schemas')}" for path in (ROOT / "schemas").rglob("*.json")}
    assert shipped <= names, sorted(shipped - names)
    assert not [name for name in names if name.startswith(("schemas/", "tests/", "stacks/", "glue_jobs/"))]


def test_rdss_validate_in_a_fresh_venv(venv: Path, tmp_path: Path) -> None:
    valid = sorted((EXAMPLES / "valid").glob("*.json"))
    result = checked(run(venv / "bin/rdss", "validate", *valid, cwd=tmp_path))
    assert result.stdout.decode().count(": valid") == len(valid)

    invalid = EXAMPLES / "invalid" / "GENERR010-message-id-upper-case.json"
    result = run(venv / "bin/rdss", "validate", "--json", invalid, cwd=tmp_path)
    assert result.returncode == 1, result.stderr.decode()
    assert orjson.loads(result.stdout)["errorCode"] == "GENERR010"


def test_rdss_new_makes_a_message_that_rdss_validate_accepts(venv: Path, tmp_path: Path) -> None:
    for message_type in ("MetadataCreate", "VocabularyRead"):
        made = checked(run(venv / "bin/rdss", "new", message_type, cwd=tmp_path)).stdout
        assert orjson.loads(made)["messageHeader"]["messageType"] == message_type
        verdict = checked(run(venv / "bin/rdss", "validate", "--json", "-", cwd=tmp_path, stdin=made))
        assert orjson.loads(verdict.stdout)["valid"] is True


def test_the_installed_package_reads_its_own_schemas(venv: Path, tmp_path: Path) -> None:
    probe = "import rdss, rdss.model.schemas as s; print(rdss.__file__); print(s.schemas_dir())"
    package, schemas = checked(run(venv / "bin/python", "-c", probe, cwd=tmp_path)).stdout.decode().split()
    site = str(venv / "lib")
    assert package.startswith(site), package  # not the checkout
    assert schemas.startswith(site), schemas
    assert schemas.endswith("rdss/_schemas"), schemas


def test_bench_cost_prices_the_environments_the_wheel_carries(venv: Path, wheel: Path, tmp_path: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        assert orjson.loads(archive.read("rdss/_cdk.json")) == orjson.loads((ROOT / "cdk.json").read_bytes())
    result = checked(run(venv / "bin/rdss", "bench", "cost", "--env", "prod", "--rate", "116", "--json", cwd=tmp_path))
    bill = orjson.loads(result.stdout)
    assert bill["env"] == "prod"
    assert bill["total_usd_per_month"] > 0
    assert "DynamoDB claims (provisioned writes)" in bill["items"]  # prod's settings, from the wheel's copy


def test_the_wheel_carries_the_examples_and_the_glue_jobs_but_no_build_products(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    examples = {f"rdss/_examples/{p.relative_to(EXAMPLES)}" for p in EXAMPLES.rglob("*.json")}
    assert examples, "examples/messages is empty in the checkout"
    assert examples <= names, sorted(examples - names)
    jobs = ROOT / "glue_jobs"
    shipped = {
        f"rdss/_glue_jobs/{p.relative_to(jobs)}"
        for p in jobs.rglob("*")
        if p.is_file() and p.suffix in {".py", ".java"} and "__pycache__" not in p.parts
    }
    assert {"rdss/_glue_jobs/audit_compaction.py", "rdss/_glue_jobs/audit_report.py"} <= shipped <= names
    assert not [name for name in names if name.startswith("rdss/_glue_jobs/lib/") or name.endswith((".jar", ".jsa"))]
    # rdss console's pages and assets, and Chart.js from npm (setup.py): nothing fetched from the internet
    pages = {
        f"rdss/{p.relative_to(ROOT / 'rdss')}"
        for package in ("status", "analytics")
        for folder in ("templates", "static")
        for p in (ROOT / "rdss" / package / folder).iterdir()
    }
    assert pages
    assert pages <= names, sorted(pages - names)
    assert {"rdss/_vendor/chart.umd.min.js", "rdss/_vendor/chart.js.LICENSE.md"} <= names


def test_the_installed_package_finds_its_files_through_importlib_resources(venv: Path, tmp_path: Path) -> None:
    probe = "from rdss.host import resources as r; print(r.examples_dir()); print(r.glue_jobs_source())"
    examples, jobs = checked(run(venv / "bin/python", "-c", probe, cwd=tmp_path)).stdout.decode().split()
    site = str(venv / "lib")
    assert examples.startswith(site), examples
    assert examples.endswith("rdss/_examples"), examples
    assert jobs.startswith(site), jobs
    assert jobs.endswith("rdss/_glue_jobs"), jobs


def test_pip_install_of_a_checkout_carries_the_same_files(clone: Path, tmp_path: Path) -> None:
    """README's install line, ``pip install .`` in a clone: the package data comes with it."""
    checkout = shutil.copytree(clone, tmp_path / "checkout")  # its build products stay out of the shared clone
    target = tmp_path / "site"
    flags = ("--quiet", "--no-deps", "--no-build-isolation", "--target", target)
    checked(run(sys.executable, "-m", "pip", "install", *flags, ".", cwd=checkout))
    for data, source in (("_schemas", ROOT / "schemas"), ("_examples", EXAMPLES), ("_glue_jobs", ROOT / "glue_jobs")):
        shipped = {p.relative_to(source) for p in source.rglob("*.json")} | {
            p.relative_to(source) for p in source.glob("*.py")
        }
        assert shipped, source
        installed = {p.relative_to(target / "rdss" / data) for p in (target / "rdss" / data).rglob("*")}
        assert shipped <= installed, sorted(shipped - installed)
