"""The same application code through kinesis://, amqp:// and memory://: only the URL changes."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from rdss.gateway import Gateway
from rdss.messages import Message
from tests.support.hops import unhopped
from tests.support.traffic import channel_mix

pytestmark = pytest.mark.integration


def exchange(url: str, messages: list[Message]) -> list[Message]:
    """What a vendor writes, once: a repository subscribes to the metadata channel, a producer
    sends, the repository receives and acknowledges each message; what it received."""
    with (
        Gateway(url, application="repository") as repository,
        Gateway(url, application="producer") as producer,
        repository.receiver("metadata", poll_interval=0.1) as inbox,
    ):
        producer.send_all(messages, channel="metadata")
        producer.send(messages[0], channel="metadata")  # at least once: a duplicate, dropped
        received = []
        while (message := inbox.receive(timeout=10)) is not None:
            received.append(unhopped(message.message)[0])
            inbox.ack(message)
            if len(received) == len(messages):
                assert inbox.receive(timeout=1) is None
                break
    return received


@pytest.fixture(params=["memory", "kinesis", "amqp"])
def gateway_url(request, monkeypatch) -> Iterator[str]:
    if request.param == "memory":
        yield f"memory://backends-{uuid.uuid4().hex[:8]}"
    elif request.param == "kinesis":
        system = request.getfixturevalue("system")
        for name, value in system.endpoint.environment().items():
            if name != "AWS_ENDPOINT_URL":  # the URL names the endpoint
                monkeypatch.setenv(name, value)
        with system.routing():  # sends enter through input; the broker routes them, as in AWS
            yield (
                f"kinesis://{system.deployment.environment}?endpoint={system.endpoint.url}"
                f"&region={system.endpoint.region}"
            )
    else:
        yield request.getfixturevalue("url")


def test_the_same_code_sends_and_receives_on_every_backend(gateway_url):
    messages = channel_mix(31, 25, "metadata")
    received = exchange(gateway_url, messages)
    by_id = {m["messageHeader"]["messageId"]: m for m in received}
    assert len(received) == len(messages)
    assert by_id == {m["messageHeader"]["messageId"]: m for m in messages}
