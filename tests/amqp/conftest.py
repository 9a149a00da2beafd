"""Fixtures of the RabbitMQ, bridge and OAI-PMH tests: one private RabbitMQ node per session
(it takes seconds to boot), a fresh namespace per test, and the embedded AWS of the Kinesis side."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import pytest

from tests.integration.conftest import endpoint, system, systems  # noqa: F401 - fixtures for the Kinesis side
from tests.support.rabbitmq import RabbitMQ, install

#: The repository's root: where ``python -m rdss`` runs from.
ROOT = Path(__file__).resolve().parents[2]

#: Short delay tiers and a low redelivery limit, so retries and dead letters show in a test.
FAST = {"retry": "200ms:2,500ms:1", "redeliveries": "2"}


@pytest.fixture(scope="session")
def rabbitmq() -> Iterator[RabbitMQ]:
    """A RabbitMQ node of our own (installed first when missing: fails loudly if it cannot be)."""
    install()
    node = RabbitMQ()
    node.start()
    yield node
    node.stop()


def amqp_url(node: RabbitMQ, state: Path, **options: str) -> str:
    """The URL of ``node`` with a namespace of its own, ``state`` as its SQLite file and the fast tiers."""
    query = {"namespace": f"t{uuid.uuid4().hex[:10]}", "state": str(state), **FAST, **options}
    return f"{node.url}?{urlencode(query)}"


def run_rdss(*arguments: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``python -m rdss ARGUMENTS`` run from :data:`ROOT` to its end, its output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "rdss", *arguments],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture
def url(rabbitmq: RabbitMQ, tmp_path: Path) -> str:
    return amqp_url(rabbitmq, tmp_path / "amqp.sqlite")


@pytest.fixture
def classic_url(rabbitmq: RabbitMQ, tmp_path: Path) -> str:
    """Classic queues, redeliveries counted in the per-host SQLite file (``queue_type=classic``)."""
    return amqp_url(rabbitmq, tmp_path / "amqp.sqlite", queue_type="classic")
