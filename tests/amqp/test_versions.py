"""Each consumer reads the version it speaks, on RabbitMQ: a 3.0.2 producer and a 4.0.0
consumer, and the reverse, exchange create, update, delete and a read request/reply
(tests/support/versions.py)."""

from __future__ import annotations

from typing import Any

import pytest

from rdss.gateway import Gateway
from rdss.model.retry import Backoff
from tests.support import versions

pytestmark = pytest.mark.integration


def _subscribe(gateway: Gateway, channel: str) -> None:
    gateway.transport.declare(channel, gateway.application)  # type: ignore[attr-defined]


@pytest.mark.parametrize(("written", "read"), [("3.0.2", "4.0.0"), ("4.0.0", "3.0.2")])
def test_a_producer_and_a_consumer_of_different_versions_exchange_on_rabbitmq(
    url: str, written: str, read: str
) -> None:
    def make(application: str, **options: Any) -> Gateway:
        return Gateway(url, application=application, backoff=Backoff(max_retries=5, base=0.01), **options)

    versions.exchange(
        make, written=written, read=read, channel="metadata", request_channel="metadata", subscribe=_subscribe
    )
