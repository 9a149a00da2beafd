"""The broker function of broker-less backends (memory here; RabbitMQ in tests/amqp): what is
sent to input is routed by content, an invalid record moved decorated, input kept as sent."""

from __future__ import annotations

import uuid

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rdss.gateway import Gateway
from rdss.gateway.backend import Outgoing
from rdss.gateway.inline_broker import InlineBroker
from rdss.gateway.log import memory as memory_backend
from rdss.model import decoration
from rdss.model.rejection import moved_by
from rdss.model.workload import Workload
from tests.support.hops import unhopped


@pytest.fixture
def bus_name():
    name = f"inline-{uuid.uuid4().hex[:8]}"
    yield name
    memory_backend.discard(name)


def test_route_sends_input_by_content_and_leaves_other_channels_alone():
    broker = InlineBroker()
    create = orjson.dumps(Workload(1).message("MetadataCreate", "Event"))
    patch = orjson.dumps(Workload(2).message("VocabularyPatch", "Event"))
    assert broker.route(Outgoing("input", create, "k")).channel == "metadata"
    routed = broker.route(Outgoing("input", patch, "k"))
    assert (routed.channel, routed.payload, routed.headers["messageType"]) == ("vocabulary", patch, "VocabularyPatch")
    as_sent = Outgoing("responses", create, "k")
    assert broker.route(as_sent) is as_sent
    # a sender that already classified says so in the headers: no second look at the payload
    trusted = Outgoing("input", b"{}", "k", {"messageType": "MetadataDelete", "messageClass": "Event"})
    assert broker.route(trusted).channel == "metadata"


def test_an_invalid_record_on_input_is_rejected_decorated_and_screen_agrees():
    broker = InlineBroker()
    routed = broker.route(Outgoing("input", b"not json", "k"))
    assert routed.channel == "invalid"
    assert routed.headers == {"errorCode": "GENERR007"}
    assert decoration.original(routed.payload) == b"not json"
    rejection = broker.screen(b"not json")
    assert rejection is not None
    assert rejection.record == routed.payload
    assert broker.screen(orjson.dumps(Workload(3).message("MetadataCreate", "Event"))) is None


def test_on_the_memory_bus_input_is_kept_as_sent_and_routed_to_its_channel(bus_name):
    message = Workload(4).message("MetadataCreate", "Event")
    with Gateway(f"memory://{bus_name}", application="producer") as producer:
        producer.send(message)
        producer.transport.publish([Outgoing("input", b'{"messageHeader": 1}', "raw")])
    bus = memory_backend.bus(bus_name)
    sent, raw = bus.payloads("input")
    assert unhopped(sent) == (message, ["producer"])  # the send's own hop, nothing else changed
    assert raw == b'{"messageHeader": 1}'
    assert bus.payloads("metadata") == [sent]
    [invalid] = bus.payloads("invalid")
    assert orjson.loads(invalid)["messageHeader"]["errorCode"] == "GENERR004"
    with (
        Gateway(f"memory://{bus_name}", application="repository") as repository,
        repository.receiver("metadata", poll_interval=0.01) as inbox,
    ):
        received = inbox.receive(timeout=1)
        assert received is not None
        assert unhopped(received.message) == (message, ["producer"])
        inbox.ack(received)


def test_error_fields_in_a_header_route_by_content_and_no_producer_key_reads_as_a_move():
    """errorCode and errorDescription are optional header fields: a valid message carrying them is
    routed to its Data Type Channel; an invalid one is rejected by the classifier's verdict, never
    keyed as a consumer's move whatever key its producer chose."""
    broker = InlineBroker()
    message = Workload(3).message("VocabularyPatch", "Event")
    message["messageHeader"]["errorCode"] = "GENERR001"
    message["messageHeader"]["errorDescription"] = "was invalid once"
    payload = orjson.dumps(message)
    routed = broker.route(Outgoing("input", payload, "k"))
    assert (routed.channel, routed.payload) == ("vocabulary", payload)
    message["messageHeader"]["messageId"] = "not-a-uuid"
    broken = orjson.dumps(message)
    rejected = broker.route(Outgoing("input", broken, "moved:impostor"))
    assert (rejected.channel, rejected.headers) == ("invalid", {"errorCode": "GENERR010"})
    assert decoration.original(rejected.payload) == broken
    assert rejected.key == "input:moved:impostor"


#: Prefixes the system's own tools write or once read in a key (a consumer's move, the old redrive
#: mark, the broker's repository key forms, the inline broker's own fallback).
SYSTEM_PREFIXES = ("moved:", "rdss-redrive:", "record#", "ledger#", "redriven#", "attempts#", "input:", "gateway:")


@settings(max_examples=60, deadline=None)
@given(
    prefix=st.sampled_from(("", *SYSTEM_PREFIXES)),
    tail=st.text(max_size=40),
    kind=st.sampled_from(("valid", "invalid", "malformed", "resend", "conflict")),
    seed=st.integers(0, 10_000),
)
def test_on_memory_any_key_leads_to_the_content_verdict(prefix: str, tail: str, kind: str, seed: int) -> None:
    """memory:// input: whatever key a producer writes - a consumer's ``moved:``, the old redrive
    mark, the repository's key forms, anything - a record ends where its content says (a message
    routed, a resend dropped, another body under a published id or an invalid record moved with
    the classifier's code), and nothing is keyed as a consumer's move."""
    name = f"keys-{uuid.uuid4().hex[:8]}"
    key = (prefix + tail) or "k"
    first = Workload(seed).message("MetadataCreate", "Event")
    payload = {
        "valid": lambda: orjson.dumps(Workload(seed + 1).message("MetadataCreate", "Event")),
        "invalid": lambda: orjson.dumps({**first, "messageBody": {"objectUuid": "not-a-uuid"}}),
        "malformed": lambda: b'{"messageHeader": ',
        "resend": lambda: orjson.dumps(first),
        "conflict": lambda: orjson.dumps({**first, "messageBody": {**first["messageBody"], "objectTitle": "other"}}),
    }[kind]()
    try:
        with Gateway(f"memory://{name}", application="producer") as producer:
            producer.transport.publish([Outgoing("input", orjson.dumps(first), "plain")])
            producer.transport.publish([Outgoing("input", payload, key)])
        bus = memory_backend.bus(name)
        routed = bus.payloads("metadata")
        moved = bus.channel("invalid").records() + bus.channel("error").records()
        assert len(bus.payloads("input")) == 2  # input kept as sent
        # no broker de-duplicates on memory://: a resend is routed again, its consumers drop it by
        # messageId (the spec's Local Data Repository)
        expected_routed = 2 if kind in ("valid", "resend") else 1
        assert len(routed) == expected_routed, (kind, key)
        if kind in ("valid", "resend"):
            assert moved == [], (kind, key)
        else:
            [record] = moved
            assert decoration.original(record.payload) == payload
            code = orjson.loads(record.payload)["messageHeader"]["errorCode"]
            assert code == {"invalid": "GENERR010", "malformed": "GENERR007", "conflict": "GENERR004"}[kind]
            assert moved_by(record.key) is None, key
    finally:
        memory_backend.discard(name)
