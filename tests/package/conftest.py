"""The package as a user gets it: sdist -> wheel built from that sdist -> a fresh venv -> ``rdss``,
and a local runtime (``rdss local up``) served from that venv.

Nothing here imports the checkout: the fresh venv is a new interpreter, run from a directory
outside the repository (no ``PYTHONPATH``, no ``AWS_*``, no ``RDSS_*``), with only what the wheel
and its declared dependencies bring. The venv is built once per run and shared by the suite.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.support.localup import serving

#: The extras the documented commands need besides the core: the embedded AWS (local demo, local
#: up, bench send/broker) and pika (bridge, bench amqp). Not glue: Spark and a JDK are optional,
#: and the commands that need them say so in one line (tests/package/test_commands.py).
EXTRAS = "local,amqp"


def bare_environment(home: Path) -> dict[str, str]:
    """What a new user's shell has: this machine's PATH (the venv's bin first) and a home of its
    own; no Python, AWS or RDSS variable of this test run."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "AWS_", "RDSS_", "VIRTUAL_ENV", "XDG_"))}
    (home / "state").mkdir(parents=True, exist_ok=True)
    env.update(HOME=str(home), XDG_STATE_HOME=str(home / "state"), COLUMNS="200")
    return env


def run(
    *command: str | Path,
    cwd: Path,
    stdin: bytes | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 600,
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        env=env if env is not None else bare_environment(cwd),
        timeout=timeout,
        check=False,
    )


def checked(result: subprocess.CompletedProcess[bytes]) -> subprocess.CompletedProcess[bytes]:
    assert result.returncode == 0, (result.args, result.stdout.decode()[-2000:], result.stderr.decode()[-4000:])
    assert b"Traceback" not in result.stderr, (result.args, result.stderr.decode()[-4000:])
    return result


#: Chart.js as npm installs it (package.json): the console's and the report's, in the wheel.
NODE_FILES = ("node_modules/chart.js/dist/chart.umd.min.js", "node_modules/chart.js/LICENSE.md")


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
    # what `make node` (npm ci) puts beside a clone and setup.py copies into the wheel (its PACKAGE_FILES)
    for name in NODE_FILES:
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target / name)
    return target


@pytest.fixture(scope="session")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return source_tree(tmp_path_factory.mktemp("clone"))


@pytest.fixture(scope="session")
def sdist(clone: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sdist")
    tree = clone
    # --no-isolation: the build backend pinned in the lock is already installed, nothing to fetch
    checked(run(sys.executable, "-m", "build", "--sdist", "--no-isolation", "--outdir", out, tree, cwd=out))
    [archive] = out.glob("*.tar.gz")
    return archive


@pytest.fixture(scope="session")
def wheel(sdist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    checked(run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", out, sdist, cwd=out))
    [built] = out.glob("*.whl")
    return built


@pytest.fixture(scope="session")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("venv")
    checked(run(sys.executable, "-m", "venv", root / "venv", cwd=root))
    python = root / "venv/bin/python"
    # the runtime dependencies at the versions the lock pins (requirements.txt is generated from it)
    wanted = ("--constraint", ROOT / "requirements.txt", f"{wheel}[{EXTRAS}]")
    # uv (a dev dependency) installs from its cache in seconds; pip, from the index, in about a minute
    # (this machine's home and settings: its caches and package index, not the test user's)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    uv = shutil.which("uv", path=str(Path(sys.executable).parent))
    installed = uv is not None and run(uv, "pip", "install", "-q", "--python", python, *wanted, cwd=root, env=env)
    if not installed or installed.returncode != 0:
        checked(run(python, "-m", "pip", "install", "--quiet", *wanted, cwd=root, env=env))
    return root / "venv"


@dataclass
class LocalRuntime:
    """``rdss local up`` of the venv, serving; ``env`` finds it through its state file alone."""

    env: dict[str, str]
    home: Path
    output: list[str]


def serve(venv: Path, home: Path, *arguments: str) -> Iterator[LocalRuntime]:
    """Start ``rdss local up ARGUMENTS`` from ``venv`` with ``home`` as its user's home; yield once
    it serves; stop it with SIGTERM (it must exit 0)."""
    env = bare_environment(home)
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}"
    with serving([str(venv / "bin/rdss"), "local", "up", *arguments], env, cwd=home, stop=120) as lines:
        yield LocalRuntime(env, home, lines)
    assert "Traceback" not in "".join(lines), "".join(lines)
