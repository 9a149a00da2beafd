"""Integration tests make real AWS API calls: to the embedded moto server by default, or to
whatever ``AWS_ENDPOINT_URL`` names (LocalStack, a real account).

Every test deletes what it provisioned (streams, tables, buckets), as it must on an account
with quotas: ``system`` is one deployment, ``systems(shards=n)`` makes more.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from rdss.local.emulator import Endpoint, connect
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
