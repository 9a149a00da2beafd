"""A gateway whose deployment restarts under it (``rdss local up`` stopped and started again on
its port): ``send_all`` is retried while the connection is refused - within the spec's backoff,
2^n x 100 ms - and delivers every message once the endpoint is back; an outage longer than the
backoff fails with GENERR005 (retries exhausted), the messages kept TO_SEND. A gateway whose
endpoint never answered is still told at once (tests/unit/test_fail_fast.py).

Each test runs an embedded emulator of its own on a port it chooses, stops it and starts another
on the same port, as a restart does.
"""

from __future__ import annotations

import logging
import socket
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from rdss.deployment.topology import Deployment
from rdss.gateway import Gateway, SendFailed
from rdss.local.accounting import read_stream
from rdss.local.emulator import Endpoint, deprovision, provision, start_embedded
from rdss.model.errors import ErrorCode
from rdss.model.retry import Backoff
from rdss.model.workload import Workload

pytestmark = pytest.mark.integration


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Restartable:
    """An embedded emulator on one port, stopped and started again."""

    def __init__(self) -> None:
        self.port = free_port()
        self.endpoint: Endpoint = start_embedded(port=self.port)

    def stop(self) -> None:
        self.endpoint.stop()

    def start(self) -> None:
        self.endpoint = start_embedded(port=self.port)


@pytest.fixture
def emulator(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Restartable, Deployment]]:
    server = Restartable()
    for name, value in server.endpoint.environment().items():
        monkeypatch.setenv(name, value)
    deployment = Deployment(f"r{uuid.uuid4().hex[:8]}")
    provision(server.endpoint, deployment)
    yield server, deployment
    if server.endpoint.embedded:  # moto's state is the process's: the next test's server would show it
        deprovision(server.endpoint, deployment)
        server.stop()


def gateway_url(server: Restartable, deployment: Deployment, tmp_path: Path) -> str:
    endpoint = f"http://127.0.0.1:{server.port}"
    return f"kinesis://{deployment.environment}?endpoint={endpoint}&region=eu-west-2&ldr=sqlite://{tmp_path}/ldr.sqlite"


def ids(messages: list[dict]) -> list[str]:  # type: ignore[type-arg]
    return [m["messageHeader"]["messageId"] for m in messages]


def test_send_all_during_a_restart_delivers_every_message(
    emulator: tuple[Restartable, Deployment], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server, deployment = emulator
    first, batch = Workload(31).mix(1), Workload(32).mix(40)
    with Gateway(gateway_url(server, deployment, tmp_path), application="restarting") as gateway:
        gateway.send_all(first)  # the deployment answered this gateway
        server.stop()
        back = threading.Timer(3.0, server.start)  # the restart takes a few seconds
        back.start()
        with caplog.at_level(logging.WARNING):
            receipts = gateway.send_all(batch)
        back.join()
        # every message, whole, is on input; every one SENT in the gateway's repository
        assert [r.message_id for r in receipts] == ids(batch)
        on_input = {orjson.loads(data)["messageHeader"]["messageId"] for data in read_stream(
            server.endpoint.client("kinesis"), deployment.stream("input"))}  # fmt: skip
        assert on_input == set(ids(first) + ids(batch))
        assert {gateway.repository.entry(i).status for i in ids(batch)} == {"SENT"}  # type: ignore[union-attr]
    # it waited as the spec says, and said so
    assert any("retrying in" in r.getMessage() and "EndpointConnectionError" in r.getMessage() for r in caplog.records)


def test_an_outage_longer_than_the_backoff_is_generr005_and_nothing_is_lost(
    emulator: tuple[Restartable, Deployment], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server, deployment = emulator
    batch = Workload(33).mix(5)
    backoff = Backoff(max_retries=2, base=0.05)
    with Gateway(gateway_url(server, deployment, tmp_path), application="gone", backoff=backoff) as gateway:
        gateway.send_all(Workload(34).mix(1))
        server.stop()
        with caplog.at_level(logging.ERROR), pytest.raises(SendFailed) as raised:
            gateway.send_all(batch)
        # the spec's code for retries exhausted, not GENERR006: nothing was wrong with the system named
        assert raised.value.error_code == ErrorCode.GENERR005
        assert sorted(u.message_id for u in raised.value.failed) == sorted(ids(batch))
        assert {gateway.repository.entry(i).status for i in ids(batch)} == {"TO_SEND"}  # type: ignore[union-attr]
        assert any(r.getMessage().startswith("GENERR005") for r in caplog.records)
        # back again: the same messages go
        server.start()
        assert [r.message_id for r in gateway.send_all(batch)] == ids(batch)
