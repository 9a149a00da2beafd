"""Lambda assets built on this machine: no Docker, ever.

An asset's zip root holds what the Lambda runtime imports:

- ``handler.py`` (and anything else) from ``lambdas/<processor>/``;
- the modules of the ``rdss`` package the handler imports, directly or through other modules
  (:func:`handler_modules`): not the whole package, so an asset holds no gateway, benchmark or
  local runtime code and is not rebuilt when those change; never compiled extensions (built
  for this machine, not for Lambda's);
- ``schemas/`` beside ``rdss/``, where :func:`rdss.model.schemas.schemas_dir` looks for it;
- the wheels of ``lambdas/requirements.txt`` for the Lambda platform (manylinux, arm64,
  CPython 3.12), installed with ``pip --platform ... --only-binary=:all:`` so that nothing is
  compiled here for the wrong machine (:data:`PYTHON_312_ARM64`) - except what Lambda's Python
  runtime already holds (:data:`RUNTIME_PROVIDED`: boto3 and what it needs);
- every module compiled to byte code by Lambda's Python (3.12), ``unchecked-hash``: the task
  root is read-only in Lambda, so a module shipped as source is compiled again on every cold
  start, and an unchecked pyc is used without even a look at its source's time stamp.

The same bundle can be built for x86_64 (:data:`PYTHON_312_X86_64`): the same files with
x86_64 wheels, which a Python 3.12 on this machine can import (tests/integration/test_lambda_assets.py, and
``rdss bench coldstart``).

The dependencies are installed once per requirements file and platform into
``.cache/lambda-deps/<hash>/`` (pip's own cache sits in ``.cache/pip``), and every bundle
hard-links them: the first synth needs PyPI, later ones are offline and take a second.
The asset hash is computed from exactly the files a bundle is made of, so CDK skips bundling
entirely when ``cdk.out`` already holds an asset with that hash.
"""

from __future__ import annotations

import ast
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import jsii
from aws_cdk import aws_lambda as lambda_

REPO = Path(__file__).resolve().parent.parent
LAMBDAS = REPO / "lambdas"
PACKAGE = REPO / "rdss"
SCHEMAS = REPO / "schemas"
REQUIREMENTS = LAMBDAS / "requirements.txt"
CACHE = REPO / ".cache"

#: Bumped whenever the layout of a bundle changes, so old cached assets are not reused.
BUNDLE_FORMAT = "3"

#: What Lambda's Python runtime provides on its own ``sys.path`` (after the task root), and so no
#: asset bundles: the AWS SDK for Python and the packages it requires. Bundling them made each
#: asset 24 MB (botocore alone 16.8 MB) and its cold start compile them; the runtime's copy is
#: already installed and compiled. The handlers need nothing newer than pyproject.toml's floor
#: (boto3 >= 1.35), which every current python3.12 runtime exceeds; the tests run the functions
#: against the lock's boto3 (tests/support/localstack/runtimes/python3.12.txt). Everything else
#: the functions import is bundled: orjson and jsonschema-rs (the classifier, native code),
#: Powertools and the X-Ray SDK (logs, metrics, traces) and their wrapt and typing-extensions.
RUNTIME_PROVIDED = frozenset({"boto3", "botocore", "s3transfer", "jmespath", "python-dateutil", "six", "urllib3"})

#: Dependencies bundled in part: only the modules the handler's code imports, as for ``rdss``.
#: The functions use Powertools' logger, metrics and tracer; its event handlers and utilities
#: (an API framework, idempotency, parsers, batch...) are four fifths of it and never imported.
TRIMMED = ("aws_lambda_powertools",)

#: Files of the source trees that never go into a bundle: byte code, and native extensions
#: built for this machine (``*.so``) with their C source.
_EXCLUDED_SUFFIXES = (".pyc", ".pyo", ".so", ".c", ".h")
_EXCLUDED_DIRS = ("__pycache__",)


@dataclass(frozen=True)
class LambdaPlatform:
    """The runtime and architecture the wheels are chosen for."""

    runtime: lambda_.Runtime
    architecture: lambda_.Architecture
    python_version: str  # "3.12"
    #: pip ``--platform`` tags whose wheels run there. Lambda's Python 3.12 runs on Amazon
    #: Linux 2023 (glibc 2.34): manylinux2014 (glibc 2.17) and manylinux_2_28 wheels both do,
    #: and some dependencies (jsonschema-rs) publish arm64 wheels only for the latter.
    pip_platforms: tuple[str, ...]

    @property
    def key(self) -> str:
        return f"cp{self.python_version.replace('.', '')}-{self.pip_platforms[-1]}"


PYTHON_312_ARM64 = LambdaPlatform(
    runtime=lambda_.Runtime.PYTHON_3_12,
    architecture=lambda_.Architecture.ARM_64,
    python_version="3.12",
    pip_platforms=("manylinux2014_aarch64", "manylinux_2_28_aarch64"),
)


PYTHON_312_X86_64 = LambdaPlatform(
    runtime=lambda_.Runtime.PYTHON_3_12,
    architecture=lambda_.Architecture.X86_64,
    python_version="3.12",
    pip_platforms=("manylinux2014_x86_64", "manylinux_2_28_x86_64"),
)


def _module_file(name: str, root: Path = REPO) -> Path | None:
    """The source of module ``a.b.c`` under ``root`` (a module or a package's __init__)."""
    relative = Path(*name.split("."))
    for candidate in (root / relative.with_suffix(".py"), root / relative / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _imported(path: Path, name: str, package: str = PACKAGE.name) -> set[str]:
    """The modules of ``package`` that ``path`` (module ``name``) imports, anywhere in it: at
    the top, in functions, under TYPE_CHECKING - what might be imported is bundled, never less."""
    parent = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_bytes(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = parent.split(".")[: len(parent.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            found.add(base)
            # `from rdss.x import y` may name a module y as well as an attribute
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return {n for n in found if n == package or n.startswith(package + ".")}


def _closure(start: Iterable[str], root: Path, package: str) -> list[Path]:
    """The files under ``root`` of every module of ``package`` that ``start`` imports,
    transitively, and the ``__init__.py`` of every package on the way (Python runs those first)."""
    pending = list(start)
    seen: set[str] = set()
    files: set[Path] = set()
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        parts = name.split(".")
        pending += [".".join(parts[:i]) for i in range(1, len(parts))]  # parent packages
        source = _module_file(name, root)
        if source is None:
            continue  # an attribute imported from a module, not a module
        files.add(source)
        pending += _imported(source, name, package)
    return sorted(files)


def _handler_files(handler_dir: Path) -> list[Path]:
    return [path for path in _files(handler_dir) if path.suffix == ".py"]


def handler_modules(handler_dir: Path) -> list[Path]:
    """The files of ``rdss/`` a handler needs: every module it imports, transitively."""
    start = [name for path in _handler_files(handler_dir) for name in _imported(path, path.stem)]
    return _closure(start, REPO, PACKAGE.name)


def trimmed_modules(handler_dir: Path, dependencies: Path, package: str) -> list[Path]:
    """The files of dependency ``package`` (installed in ``dependencies``) that the handler and
    its ``rdss`` modules import, transitively (:data:`TRIMMED`)."""
    importers = [(path, path.stem) for path in _handler_files(handler_dir)] + [
        (path, ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__"))
        for path in handler_modules(handler_dir)
    ]
    start = [name for path, module in importers for name in _imported(path, module, package)]
    return _closure(start, dependencies, package)


def _trim(output: Path, handler_dir: Path, package: str, platform: LambdaPlatform) -> None:
    """Remove the modules of ``package`` nothing imports (and their byte code) from a bundle."""
    keep = {path.relative_to(output) for path in trimmed_modules(handler_dir, output, package)}
    keep |= {
        path.parent / "__pycache__" / f"{path.stem}.cpython-{platform.python_version.replace('.', '')}.pyc"
        for path in list(keep)
    }
    for path in sorted((output / package).rglob("*"), reverse=True):
        relative = path.relative_to(output)
        if path.is_file() and relative not in keep and path.name != "py.typed":
            path.unlink()
        elif path.is_dir() and not any(path.iterdir()):
            path.rmdir()


def _files(root: Path) -> Iterator[Path]:
    """The files of ``root`` that belong in a bundle, in a stable order."""
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if any(part in _EXCLUDED_DIRS for part in relative.parts):
            continue
        if path.is_file() and path.suffix not in _EXCLUDED_SUFFIXES:
            yield path


def _link_tree(source: Path, target: Path) -> None:
    """Hard-links a cached tree into a bundle (a copy where links are not possible)."""

    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    shutil.copytree(source, target, copy_function=link, dirs_exist_ok=True)


def dependencies(platform: LambdaPlatform = PYTHON_312_ARM64, requirements: Path = REQUIREMENTS) -> Path:
    """A directory holding ``requirements`` installed for ``platform``, built once and cached.

    Built in a temporary directory and renamed into place, so an interrupted install never
    leaves a half-filled cache behind and concurrent synths cannot see one.
    """
    wanted = bundled_requirements(requirements)
    digest = hashlib.sha256(f"{BUNDLE_FORMAT}:{wanted}:{platform.pip_platforms}".encode()).hexdigest()[:16]
    target = CACHE / "lambda-deps" / f"{platform.key}-{digest}"
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f"{target.name}-", dir=target.parent))
    pinned = building.with_suffix(".txt")
    pinned.write_text(wanted)
    try:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--no-compile",
                *(argument for tag in platform.pip_platforms for argument in ("--platform", tag)),
                "--implementation",
                "cp",
                "--python-version",
                platform.python_version,
                "--only-binary=:all:",
                "--cache-dir",
                str(CACHE / "pip"),
                "--target",
                str(building),
                # the lock is the whole closure: the runtime's packages left out stay out
                "--no-deps",
                "--requirement",
                str(pinned),
            ],
            check=True,
        )
        # Console scripts carry this machine's interpreter path and are of no use in Lambda.
        shutil.rmtree(building / "bin", ignore_errors=True)
        compile_bytecode(building, [building])
        try:
            building.rename(target)
        except OSError:  # another synth finished first: keep its copy
            shutil.rmtree(building, ignore_errors=True)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    finally:
        pinned.unlink(missing_ok=True)
    return target


def bundled_requirements(requirements: Path = REQUIREMENTS) -> str:
    """The pins of ``requirements`` an asset installs: all but :data:`RUNTIME_PROVIDED`."""
    kept = []
    for line in requirements.read_text().splitlines():
        pin = line.split("#", 1)[0].strip()
        if not pin or pin.startswith("-"):
            continue
        name = pin.split("==", 1)[0].split(";", 1)[0].strip().lower().replace("_", "-")
        if name not in RUNTIME_PROVIDED:
            kept.append(pin)
    return "\n".join(sorted(kept)) + "\n"


class LambdaPythonUnavailable(RuntimeError):
    """No Python 3.12 (Lambda's runtime) on this machine, to compile the assets' byte code."""


def lambda_interpreter() -> Path:
    """A Python 3.12 like Lambda's: ``LAMBDA_PYTHON``, else pyenv's newest 3.12, else ``python3.12``."""
    if os.environ.get("LAMBDA_PYTHON"):
        return Path(os.environ["LAMBDA_PYTHON"])
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    found = sorted(
        (p for p in root.glob("3.12.*") if re.fullmatch(r"3\.12\.\d+", p.name)),
        key=lambda p: int(p.name.rsplit(".", 1)[1]),
    )
    if found:
        return found[-1] / "bin" / "python"
    on_path = shutil.which("python3.12")
    if on_path:
        return Path(on_path)
    raise LambdaPythonUnavailable(
        f"no Python 3.12 (Lambda's runtime) in {root} or on PATH, to compile the Lambda assets' byte code: "
        "`pyenv install 3.12` or set LAMBDA_PYTHON"
    )


def compile_bytecode(root: Path, paths: list[Path]) -> None:
    """Compile ``paths`` (files or folders, under ``root``) with Lambda's Python, as unchecked-hash
    pycs that name their sources under ``/var/task`` (where Lambda unpacks the asset)."""
    subprocess.run(
        [
            str(lambda_interpreter()),
            "-m",
            "compileall",
            "-q",
            "--invalidation-mode",
            "unchecked-hash",
            "-s",
            str(root),
            "-p",
            "/var/task",
            *(str(path) for path in paths),
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )


@jsii.implements(cdk.ILocalBundling)
class LocalPythonBundling:
    """Builds a processor's asset in-process; CDK calls :meth:`try_bundle` instead of Docker."""

    def __init__(self, handler_dir: Path, platform: LambdaPlatform = PYTHON_312_ARM64) -> None:
        self.handler_dir = handler_dir
        self.platform = platform

    def try_bundle(self, output_dir: str, *, image: cdk.DockerImage, **options: Any) -> bool:
        """Writes the bundle to ``output_dir``. Always True: a failure raises, so CDK never
        falls back to Docker (which this machine does not have). The bundling options (the
        Docker image and command) are not used."""
        bundle(self.handler_dir, Path(output_dir), self.platform)
        return True


def _sources(handler_dir: Path) -> Iterator[tuple[Path, str]]:
    """Each source file of a bundle and its path inside it, dependencies aside."""
    for path in _files(handler_dir):
        yield path, path.relative_to(handler_dir).as_posix()
    for path in handler_modules(handler_dir):
        yield path, path.relative_to(REPO).as_posix()
    for path in _files(SCHEMAS):
        yield path, path.relative_to(REPO).as_posix()


def bundle(handler_dir: Path, output: Path, platform: LambdaPlatform = PYTHON_312_ARM64) -> Path:
    """Writes the asset of the processor in ``handler_dir`` for ``platform`` to ``output``."""
    _link_tree(dependencies(platform), output)
    compiled = set()
    for source, relative in _sources(handler_dir):
        destination = output / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, destination)
        if destination.suffix == ".py":
            compiled.add(destination)
    compile_bytecode(output, sorted(compiled))
    for package in TRIMMED:
        _trim(output, handler_dir, package, platform)
    return output


def fingerprint(handler_dir: Path, platform: LambdaPlatform = PYTHON_312_ARM64) -> str:
    """A hash of everything a bundle is made of: when it is unchanged, so is the asset."""
    digest = hashlib.sha256(f"{BUNDLE_FORMAT}:{platform.python_version}:{platform.pip_platforms}".encode())
    digest.update(bundled_requirements().encode())
    for path, relative in _sources(handler_dir):
        digest.update(f"{relative}\0".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def handler_location(handler: str) -> tuple[Path, str]:
    """``"broker/handler.handler"`` -> (``lambdas/broker``, ``"handler.handler"``): the source
    directory and the handler as the runtime sees it at the zip root."""
    module_path, function = handler.rsplit(".", 1)
    module = Path(module_path)
    directory = LAMBDAS / module.parent
    if not (directory / f"{module.name}.py").is_file():
        raise FileNotFoundError(f"processor handler {handler!r}: {directory / module.name}.py does not exist")
    return directory, f"{module.name}.{function}"


def processor_code(handler: str, platform: LambdaPlatform = PYTHON_312_ARM64) -> lambda_.Code:
    """The asset of the processor whose topology entry names ``handler``."""
    directory, _ = handler_location(handler)
    return lambda_.Code.from_asset(
        str(directory),
        asset_hash=fingerprint(directory, platform),
        bundling=cdk.BundlingOptions(
            # Required by the API but never pulled: local bundling always succeeds or raises.
            image=platform.runtime.bundling_image,
            local=LocalPythonBundling(directory, platform),
        ),
    )


def built(handler: str, platform: LambdaPlatform = PYTHON_312_ARM64) -> Path:
    """The asset of a processor (its topology ``handler``) for ``platform``, built outside CDK
    into ``.cache/assets/`` once per fingerprint (the x86_64 twins the tests import)."""
    directory, _ = handler_location(handler)
    arch = "aarch64" if "aarch64" in platform.key else "x86_64"
    target = CACHE / "assets" / f"{directory.name}-{arch}-{fingerprint(directory, platform)[:16]}"
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f"{target.name}-", dir=target.parent))
    try:
        bundle(directory, building, platform)
        try:
            building.rename(target)
        except OSError:  # built concurrently: keep the first
            shutil.rmtree(building, ignore_errors=True)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    return target
