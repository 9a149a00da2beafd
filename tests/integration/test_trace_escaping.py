"""``rdss trace`` of a message whose strings hold control characters, in the embedded runtime:
the timeline prints them escaped, so a ``generator`` holding a newline cannot forge a line of
it, and an ANSI escape or a bidirectional override never reaches the terminal."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import orjson
import pytest

from rdss.cli import main
from rdss.gateway import Gateway
from rdss.local.emulator import Endpoint
from rdss.local.runtime import Runtime, Settings
from rdss.model.validation import validate
from rdss.model.workload import Workload

pytestmark = pytest.mark.integration

FORGED = "  2026-01-01T00:00:00.000Z  broker     routed to metadata"
GENERATOR = f"evil-repository\x1b[2J\x1b[31m\u202eoiduts\x9b\n{FORGED}"


@pytest.fixture(scope="module")
def traced(endpoint: Endpoint) -> Iterator[tuple[str, str]]:
    runtime = Runtime(endpoint, Settings(environment=f"te{uuid.uuid4().hex[:8]}"))
    runtime.provision()
    url = f"kinesis://{runtime.deployment.environment}?region={endpoint.region}"
    url += f"&endpoint={endpoint.url}" if endpoint.url else ""
    saved = dict(os.environ)
    os.environ.update({k: v for k, v in endpoint.environment().items() if k != "AWS_ENDPOINT_URL"})
    try:
        message = Workload(5).message("MetadataCreate", "Event")
        message["messageHeader"]["generator"] = GENERATOR
        assert validate(orjson.dumps(message)).valid  # a producer may write any non-empty string there
        with Gateway(url, application="producer") as producer:
            producer.send(message, channel="metadata")
        runtime.drain()
        yield url, message["messageHeader"]["messageId"]
    finally:
        os.environ.clear()
        os.environ.update(saved)
        runtime.deprovision()


def test_the_timeline_prints_control_characters_escaped(traced, capsys):
    url, message_id = traced
    assert main(["trace", message_id, "--url", url]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    published = [line for line in lines if "published by" in line]
    assert len(published) == 1
    assert published[0].endswith("published by evil-repository\\x1b[2J\\x1b[31m\\u202eoiduts\\x9b\\n" + FORGED)
    assert FORGED not in lines  # the newline did not start a line of the timeline
    assert not any(ch in out for ch in "\x1b\u202e\x9b\r")


def test_the_json_timeline_keeps_the_string_and_escapes_it(traced, capsysbinary):
    url, message_id = traced
    assert main(["trace", message_id, "--url", url, "--json"]) == 0
    out = capsysbinary.readouterr().out
    for raw in ("\x1b", "\u202e", "\x9b", "\n  2026-01-01"):
        assert raw.encode() not in out
    assert _generators(orjson.loads(out)) == {GENERATOR}


def _generators(value: object) -> set[str]:
    """Every ``generator`` member anywhere in the JSON timeline."""
    found: set[str] = set()
    if isinstance(value, dict):
        for key, member in value.items():
            if key == "generator" and isinstance(member, str):
                found.add(member)
            found |= _generators(member)
    elif isinstance(value, list):
        for member in value:
            found |= _generators(member)
    return found
