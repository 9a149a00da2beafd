"""Each consumer reads the version it speaks, on RabbitMQ: a 3.0.2 producer and a 4.0.0
consumer, and the reverse, exchange create, update, delete and a read request/reply
(tests/support/versions.py)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from rdss.gateway import Gateway
from rdss.model.retry import Backoff
from rdss.model.workload import Workload4
from tests.amqp.test_gateway_backends import records
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


def test_a_4_0_0_preservation_event_reaches_its_consumers_on_rabbitmq(url: str) -> None:
    """Queues and bindings are made for every version's types: a PreservationEvent (4.0.0 only)
    is routed to ``metadata``, taken by a 4.0.0 reader and moved to ``error`` by a 3.0.2 one."""

    def make(application: str, **options: Any) -> Gateway:
        return Gateway(url, application=application, backoff=Backoff(max_retries=5, base=0.01), **options)

    preservation = make("preservation-400", reads="4.0.0", tenant_jisc_id=versions.TENANT)
    repository = make("repository-302", reads="3.0.2")
    _subscribe(preservation, "metadata")
    _subscribe(repository, "metadata")
    event = Workload4(31).message("PreservationEvent", "Event")
    make("archivematica").send(event, channel="metadata")
    with preservation.receiver("metadata", poll_interval=0.05) as inbox:
        got = inbox.receive(timeout=20)
        assert got is not None
        assert (got.message_id, got.header["messageType"]) == (event["messageHeader"]["messageId"], "PreservationEvent")
        inbox.ack(got)
    with repository.receiver("metadata", poll_interval=0.05) as inbox:
        deadline = time.monotonic() + 20
        while inbox.stats.untranslatable == 0 and time.monotonic() < deadline:
            assert inbox.receive(timeout=0.5) is None
        assert inbox.stats.untranslatable == 1
    [moved] = records(url, "error", 1)
    header = moved["messageHeader"]
    assert (header["messageId"], header["errorCode"]) == (event["messageHeader"]["messageId"], "GENERR006")
    assert "cannot be translated to 3.0.2 for repository-302: GENERR002 PreservationEvent" in header["errorDescription"]
