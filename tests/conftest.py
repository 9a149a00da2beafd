"""Shared fixtures: the repository's example messages and a deterministic workload."""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from rdss.model.workload import Workload
from stacks.node import use_project_node

# Processors log and emit metrics through Powertools; in tests that is noise.
os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")

# The CDK (tests/cdk, the deployed stack, the assets) starts jsii's Node on its first import: the
# one package.json pins, not the machine's (stacks.node).
use_project_node()

# Gateways keep their own state (a Local Data Repository file, claim checks) under
# $XDG_STATE_HOME: in tests, a directory of this run's, inherited by the processes it starts.
os.environ["XDG_STATE_HOME"] = tempfile.mkdtemp(prefix="rdss-test-state-")

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "messages"

settings.register_profile("default", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("default")


def valid_examples() -> list[Path]:
    return sorted((EXAMPLES / "valid").glob("*.json"))


def invalid_examples() -> list[Path]:
    return sorted((EXAMPLES / "invalid").glob("*.json"))


@pytest.fixture
def workload() -> Workload:
    return Workload(seed=42)


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """Commands under test configure logging (rdss.observability.outside.configure); undo it after each test so
    one test's handler does not write another's lines."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in [h for h in root.handlers if h not in handlers]:
        root.removeHandler(handler)
        handler.close()
    root.setLevel(level)
