"""``rdss trace`` shows a translation as a hop (issue 31): a 3.0.2 producer, a consumer reading
4.0.0 translating in its own process; its Local Data Repository entry records both versions and
the trace's timeline names the hop, in text and in --json."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import orjson
import pytest

from rdss.cli import main
from rdss.gateway import Gateway, Received
from rdss.local.emulator import Endpoint
from rdss.local.runtime import Runtime, Settings
from rdss.model.workload import Workload
from tests.support import versions

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def translated(endpoint: Endpoint) -> Iterator[tuple[str, str, dict[str, str]]]:
    """The runtime's gateway URL, the messageId of a 3.0.2 create a 4.0.0 reader took, and the
    versions the reader was handed it in."""
    runtime = Runtime(endpoint, Settings(environment=f"tv{uuid.uuid4().hex[:8]}", firehose_buffer_seconds=0.5))
    runtime.provision()
    url = f"kinesis://{runtime.deployment.environment}?region={endpoint.region}"
    url += f"&endpoint={endpoint.url}" if endpoint.url else ""
    saved = dict(os.environ)
    os.environ.update({k: v for k, v in endpoint.environment().items() if k != "AWS_ENDPOINT_URL"})
    try:
        create = Workload(62).message("MetadataCreate", "Event")
        with Gateway(url, application="repository", reads="3.0.2") as producer:
            producer.send(create, channel="metadata")
        runtime.drain()
        handed: dict[str, str] = {}

        def take(received: Received) -> None:
            handed[received.message_id] = str(received.header["version"])

        with Gateway(url, application="preservation", reads="4.0.0", tenant_jisc_id=versions.TENANT) as consumer:
            # until the one message is handed over; the idle limit only stops a run gone wrong
            consumer.listen("metadata", take, max_messages=1, idle_timeout=60, poll_interval=0.05)
        yield url, create["messageHeader"]["messageId"], handed
    finally:
        os.environ.clear()
        os.environ.update(saved)
        runtime.deprovision()


def test_the_trace_shows_the_translation_for_the_consumer_as_a_hop(translated, capsys) -> None:
    url, message_id, handed = translated
    assert handed == {message_id: "4.0.0"}
    assert main(["trace", message_id, "--url", url, "--json", "--application", "preservation"]) == 0
    found = orjson.loads(capsys.readouterr().out)
    [hop] = [e for e in found["events"] if e["where"] == "translation"]
    assert hop["what"] == "translated 3.0.2 -> 4.0.0 for preservation"
    assert hop["details"] == {"from": "3.0.2", "to": "4.0.0", "application": "preservation"}
    [entry] = [e for e in found["events"] if e["where"] == "gateway"]
    assert (entry["details"]["translatedFrom"], entry["details"]["deliveredAs"]) == ("3.0.2", "4.0.0")
    assert main(["trace", message_id, "--url", url, "--application", "preservation"]) == 0
    assert "translated 3.0.2 -> 4.0.0 for preservation" in capsys.readouterr().out


def test_a_consumer_reading_the_version_written_shows_no_translation(translated, capsys) -> None:
    url, message_id, _ = translated
    assert main(["trace", message_id, "--url", url, "--json", "--application", "repository"]) == 0
    found = orjson.loads(capsys.readouterr().out)
    assert [e for e in found["events"] if e["where"] == "translation"] == []
    assert any(e["what"] == "repository's Local Data Repository: SENT" for e in found["events"])
