"""Integration tests make real AWS API calls: to the embedded moto server by default, or to
whatever ``AWS_ENDPOINT_URL`` names (LocalStack, a real account).

Every test deletes what it provisioned (streams, tables, buckets), as it must on an account
with quotas: ``system`` is one deployment, ``systems(shards=n)`` makes more, ``runtimes(settings)``
makes an embedded runtime whose deployment goes when the test does, passed or failed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from rdss.local.emulator import Endpoint, connect
from rdss.local.runtime import Runtime, Settings
from tests.support.system import System


@pytest.fixture(scope="session")
def endpoint() -> Iterator[Endpoint]:
    endpoint = connect()
    yield endpoint
    endpoint.stop()


@pytest.fixture
def systems(endpoint: Endpoint) -> Iterator[Callable[..., System]]:
    made: list[System] = []

    def make(shards: int = 1) -> System:
        made.append(System.create(endpoint, shards=shards))
        return made[-1]

    yield make
    for system in made:
        system.delete()


@pytest.fixture
def system(systems: Callable[..., System]) -> System:
    return systems()


@pytest.fixture
def runtimes(endpoint: Endpoint) -> Iterator[Callable[..., Runtime]]:
    """``runtimes(settings, **kwargs)``: a :class:`Runtime` on the endpoint, deprovisioned at teardown."""
    made: list[Runtime] = []

    def make(settings: Settings, **kwargs: Any) -> Runtime:
        made.append(Runtime(endpoint, settings, **kwargs))
        return made[-1]

    yield make
    for runtime in made:
        runtime.deprovision()
