"""Integration tests make real AWS API calls: to the embedded moto server by default, or to
whatever ``AWS_ENDPOINT_URL`` names (LocalStack, a real account)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from rdss.local.emulator import Endpoint, connect
from tests.support.system import System


@pytest.fixture(scope="session")
def endpoint() -> Iterator[Endpoint]:
    endpoint = connect()
    yield endpoint
    endpoint.stop()


@pytest.fixture
def system(endpoint: Endpoint) -> System:
    return System.create(endpoint)
