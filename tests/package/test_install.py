"""The package as a user gets it: sdist -> wheel built from that sdist -> a fresh venv -> ``rdss``.

Nothing here imports the checkout: the fresh venv is a new interpreter, run from a directory
outside the repository, with only what the wheel and its declared dependencies bring.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import orjson
import pytest

from tests.conftest import EXAMPLES, ROOT

pytestmark = pytest.mark.slow


def run(*command: str | Path, cwd: Path, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    # no PYTHONPATH, no AWS endpoint: the venv must stand on its own
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "AWS_", "RDSS_", "VIRTUAL_ENV"))}
    return subprocess.run(
        [str(part) for part in command], cwd=cwd, input=stdin, capture_output=True, env=env, timeout=600, check=False
    )


def checked(result: subprocess.CompletedProcess[bytes]) -> subprocess.CompletedProcess[bytes]:
    assert result.returncode == 0, (result.args, result.stdout.decode()[-2000:], result.stderr.decode()[-4000:])
    return result


def source_tree(target: Path) -> Path:
    """The files a fresh clone has (tracked or not ignored), copied: no build products of this
    checkout (an ``*.egg-info`` from the editable install would otherwise feed the sdist)."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


@pytest.fixture(scope="module")
def sdist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sdist")
    tree = source_tree(tmp_path_factory.mktemp("clone"))
    # --no-isolation: the build backend pinned in the lock is already installed, nothing to fetch
    checked(run(sys.executable, "-m", "build", "--sdist", "--no-isolation", "--outdir", out, tree, cwd=out))
    [archive] = out.glob("*.tar.gz")
    return archive


@pytest.fixture(scope="module")
def wheel(sdist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    checked(run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", out, sdist, cwd=out))
    [built] = out.glob("*.whl")
    return built


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("venv")
    checked(run(sys.executable, "-m", "venv", root / "venv", cwd=root))
    # the runtime dependencies at the versions the lock pins (requirements.txt is generated from it)
    pip = (root / "venv/bin/python", "-m", "pip", "install", "--quiet")
    checked(run(*pip, "--constraint", ROOT / "requirements.txt", wheel, cwd=root))
    return root / "venv"


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
    probe = "import rdss, rdss.schemas as s; print(rdss.__file__); print(s.schemas_dir())"
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
