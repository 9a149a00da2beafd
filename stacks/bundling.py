"""Lambda assets built on this machine: no Docker, ever.

An asset's zip root holds what the Lambda runtime imports:

- ``handler.py`` (and anything else) from ``lambdas/<processor>/``;
- the ``rdss`` package, pure Python (anything compiled in a checkout would be for this
  machine, not Lambda's, so it is left out);
- ``schemas/`` beside ``rdss/``, where :func:`rdss.schemas.schemas_dir` looks for it;
- the wheels of ``lambdas/requirements.txt`` for the Lambda platform (manylinux, arm64,
  CPython 3.12), installed with ``pip --platform ... --only-binary=:all:`` so that nothing is
  compiled here for the wrong machine (:data:`PYTHON_312_ARM64`).

The dependencies are installed once per requirements file and platform into
``.cache/lambda-deps/<hash>/`` (pip's own cache sits in ``.cache/pip``), and every bundle
hard-links them: the first synth needs PyPI, later ones are offline and take a second.
The asset hash is computed from exactly the files a bundle is made of, so CDK skips bundling
entirely when ``cdk.out`` already holds an asset with that hash.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
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
BUNDLE_FORMAT = "1"

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


def _files(root: Path) -> Iterator[Path]:
    """The files of ``root`` that belong in a bundle, in a stable order."""
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if any(part in _EXCLUDED_DIRS for part in relative.parts):
            continue
        if path.is_file() and path.suffix not in _EXCLUDED_SUFFIXES:
            yield path


def _copy_tree(source: Path, target: Path) -> None:
    for path in _files(source):
        destination = target / path.relative_to(source)
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, destination)


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
    digest = hashlib.sha256(requirements.read_bytes() + " ".join(platform.pip_platforms).encode()).hexdigest()[:16]
    target = CACHE / "lambda-deps" / f"{platform.key}-{digest}"
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f"{target.name}-", dir=target.parent))
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
                "--requirement",
                str(requirements),
            ],
            check=True,
        )
        # Console scripts carry this machine's interpreter path and are of no use in Lambda.
        shutil.rmtree(building / "bin", ignore_errors=True)
        try:
            building.rename(target)
        except OSError:  # another synth finished first: keep its copy
            shutil.rmtree(building, ignore_errors=True)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    return target


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
        output = Path(output_dir)
        _link_tree(dependencies(self.platform), output)
        _copy_tree(PACKAGE, output / PACKAGE.name)
        _copy_tree(SCHEMAS, output / SCHEMAS.name)
        _copy_tree(self.handler_dir, output)
        return True


def fingerprint(handler_dir: Path, platform: LambdaPlatform = PYTHON_312_ARM64) -> str:
    """A hash of everything a bundle is made of: when it is unchanged, so is the asset."""
    digest = hashlib.sha256(f"{BUNDLE_FORMAT}:{platform.python_version}:{platform.pip_platforms}".encode())
    digest.update(REQUIREMENTS.read_bytes())
    for root, name in ((handler_dir, "handler"), (PACKAGE, PACKAGE.name), (SCHEMAS, SCHEMAS.name)):
        for path in _files(root):
            digest.update(f"{name}/{path.relative_to(root).as_posix()}\0".encode())
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
