"""Logging as the spec says: every message sent and received is one RFC 5424 line in the local
syslog, from the command line and from an application's consumer."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from rdss import __version__
from rdss.model.messages import new_message
from rdss.observability.outside import LogSettings, configure
from tests.support.gateway_system import gateway_url, open_gateway, process_environment
from tests.support.syslog import FakeSyslog, fake_syslog, parse
from tests.support.system import System

pytestmark = pytest.mark.integration


@pytest.fixture
def syslog() -> Iterator[FakeSyslog]:
    with fake_syslog() as server:
        yield server


def test_rdss_send_and_a_listen_consumer_log_one_rfc5424_line_per_message(
    system: System, syslog: FakeSyslog, tmp_path: Path
):
    messages = [
        new_message("MetadataDelete", {"objectUuid": f"5fd3b1e4-6f5a-4d5e-9c1b-7c2a0d9e8b1{i}"}) for i in range(3)
    ]
    files = []
    for index, message in enumerate(messages):
        files.append(tmp_path / f"{index}.json")
        files[-1].write_bytes(orjson.dumps(message))
    env = {**process_environment(system), "RDSS_SYSLOG_ADDRESS": syslog.address}
    env.pop("RDSS_LOG_FORMAT", None)
    sender = subprocess.Popen(
        [sys.executable, "-m", "rdss", "send", *map(str, files), "--to", "metadata", "--url", gateway_url(system)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _out, err = sender.communicate(timeout=120)
    assert sender.returncode == 0, err
    system.mapping("input", system.handler(system.broker())).drain()

    configure("repository-consumer", version="2.0.1", settings=LogSettings("syslog", address=syslog.address))
    consumer = open_gateway(system, "consumer")
    received: list[str] = []
    consumer.listen("metadata", lambda r: received.append(r.message_id), max_messages=3, idle_timeout=20)
    assert sorted(received) == sorted(m["messageHeader"]["messageId"] for m in messages)

    lines = [parse(line) for line in syslog.lines()]  # every line is strict RFC 5424
    for message in messages:
        message_id = message["messageHeader"]["messageId"]
        about = [line for line in lines if message_id in line.msg]
        [sent] = [line for line in about if line.app == f"rdss-cli-{__version__}"]
        [got] = [line for line in about if line.app == "repository-consumer-2.0.1"]
        assert sent.procid == str(sender.pid)
        assert got.procid == str(os.getpid())
        assert sent.msg.startswith("[INFO] Message sent ")
        assert got.msg.startswith("[INFO] Message received ")
        assert (sent.facility, sent.severity) == (16, 6)
        assert "messageType=MetadataDelete" in got.msg
        assert "channel=metadata" in got.msg
