"""Synthesises each environment once per test session, in-process, the way ``cdk synth`` does.

The Lambda assets are bundled for real (stacks/bundling.py): the wheels come from the
``.cache/`` directory the first synth filled, so after that a session costs a few seconds of
hard-linking per function, not a download.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk  # jsii starts the pinned Node (tests/conftest.py: stacks.node)
import pytest
from aws_cdk.assertions import Template

from stacks.app import build
from stacks.config import EnvironmentConfig
from stacks.stack import RdssStack

ROOT = Path(__file__).resolve().parents[2]
CONTEXT: dict[str, Any] = json.loads((ROOT / "cdk.json").read_text())["context"]


@dataclass
class Synthesized:
    """One environment's app after synthesis: the stack, its template and the cloud assembly."""

    stack: RdssStack
    template: Template
    outdir: Path

    @property
    def config(self) -> EnvironmentConfig:
        return self.stack.config

    @property
    def json(self) -> dict[str, Any]:
        return dict(self.template.to_json())

    def resources(self, type_: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.json["Resources"].items() if v["Type"] == type_}

    def logical_id(self, construct: cdk.IResource) -> str:
        default = construct.node.default_child
        assert isinstance(default, cdk.CfnElement)
        return self.stack.get_logical_id(default)

    def validation_report(self) -> dict[str, Any]:
        return validation_report(self.outdir)


def validation_report(outdir: Path) -> dict[str, Any]:
    """cdk.out/validation-report.json: the cdk-nag findings nobody acknowledged."""
    return dict(json.loads((outdir / "validation-report.json").read_text()))


def make_app(environment: str, outdir: Path, **context: Any) -> tuple[cdk.App, RdssStack]:
    """The app ``cdk synth -c env=<environment>`` builds, with cdk.json's context."""
    app = cdk.App(context={**CONTEXT, "env": environment, **context}, outdir=str(outdir))
    return app, build(app)


def synthesize(environment: str, outdir: Path, **context: Any) -> Synthesized:
    app, stack = make_app(environment, outdir, **context)
    assembly = app.synth()
    artifact = assembly.get_stack_by_name(stack.stack_name)
    template = Template.from_json(dict(artifact.template))
    return Synthesized(stack=stack, template=template, outdir=outdir)


@pytest.fixture(scope="session")
def environments(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Synthesized]:
    """dev (destroys its data), staging and prod (retains it, has vendors), synthesised with
    cdk-nag's checks."""
    return {name: synthesize(name, tmp_path_factory.mktemp(f"cdk-{name}")) for name in ("dev", "staging", "prod")}


@pytest.fixture(scope="session")
def dev(environments: dict[str, Synthesized]) -> Synthesized:
    return environments["dev"]


@pytest.fixture(scope="session")
def prod(environments: dict[str, Synthesized]) -> Synthesized:
    return environments["prod"]


@pytest.fixture(scope="session", params=["dev", "prod"])
def synthesized(request: pytest.FixtureRequest, environments: dict[str, Synthesized]) -> Synthesized:
    return environments[request.param]
