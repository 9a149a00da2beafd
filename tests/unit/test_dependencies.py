"""One lock: requirements.lock pins every dependency pyproject.toml declares, and every
requirements file is generated from it (``make lock``), so none can drift from it."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.conftest import ROOT

LOCK = ROOT / "requirements.lock"
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def pins(path: Path) -> dict[str, str]:
    """name -> version of every ``name==version`` line (markers and comments ignored)."""
    found: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        requirement = Requirement(line)
        [specifier] = requirement.specifier
        assert specifier.operator == "==", f"{path.name}: {line} is not pinned"
        found[canonicalize_name(requirement.name)] = specifier.version
    return found


def declared(*extras: str) -> set[str]:
    names = PROJECT["dependencies"] + [r for extra in extras for r in PROJECT["optional-dependencies"][extra]]
    return {canonicalize_name(Requirement(r).name) for r in names}


GENERATED = {
    # file: the extras it installs on top of the core dependencies
    "requirements.txt": ("amqp", "local", "tracing"),
    "requirements-dev.txt": tuple(PROJECT["optional-dependencies"]),
}


def test_the_lock_pins_everything_declared() -> None:
    locked = pins(LOCK)
    missing = declared(*PROJECT["optional-dependencies"]) - set(locked)
    assert not missing, f"declared in pyproject.toml but not in requirements.lock: run `make lock` ({sorted(missing)})"


@pytest.mark.parametrize("name", [*GENERATED, "lambdas/requirements.txt"])
def test_generated_files_pin_what_the_lock_pins(name: str) -> None:
    locked, generated = pins(LOCK), pins(ROOT / name)
    drifted = {n: (v, locked.get(n)) for n, v in generated.items() if locked.get(n) != v}
    assert not drifted, f"{name} is out of step with requirements.lock: run `make lock` ({drifted})"


@pytest.mark.parametrize(("name", "extras"), GENERATED.items())
def test_generated_files_hold_their_extras(name: str, extras: tuple[str, ...]) -> None:
    missing = declared(*extras) - set(pins(ROOT / name))
    assert not missing, f"{name} lacks {sorted(missing)}: run `make lock`"


def test_the_lambda_assets_install_only_what_the_package_declares() -> None:
    wanted = {
        canonicalize_name(Requirement(line).name)
        for line in (ROOT / "lambdas" / "requirements.in").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert wanted <= set(pins(ROOT / "lambdas" / "requirements.txt"))
    # the functions run the package's own dependencies (core and tracing), nothing else
    assert wanted <= declared("tracing"), sorted(wanted - declared("tracing"))
