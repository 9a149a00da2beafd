"""Shared fixtures: the repository's example messages and a deterministic workload."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from rdss.workload import Workload

# Processors log and emit metrics through Powertools; in tests that is noise.
os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")

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
    """Commands under test configure logging (rdss.logs.configure); undo it after each test so
    one test's handler does not write another's lines."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in [h for h in root.handlers if h not in handlers]:
        root.removeHandler(handler)
        handler.close()
    root.setLevel(level)
