"""Every part of a sequence ends in exactly one place on memory://, where no sequencer runs: the
inline broker routes what producers put on ``input`` and the consumer's receiver holds the parts
until their sequence is whole (rdss.gateway.holding), as the sequencer does on Kinesis.

A part is delivered (in its whole message), moved - by the inline broker, or by the receiver
alone or with its sequence - to ``invalid``/``error`` with a code, or dropped as the same
messageId seen before (the spec's de-duplication). Never nothing.
"""

from __future__ import annotations

import copy
import json
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, event, given, settings

from rdss.gateway import Gateway
from rdss.gateway.backend import Outgoing
from rdss.gateway.consumer import Receiver
from rdss.gateway.log import memory as memory_backend
from rdss.model import decoration, history
from tests.support.parts import arrivals, other_fragment, parts_of

TIMEOUT = 60.0


@pytest.fixture
def bus_name():
    name = f"holding-{uuid.uuid4().hex[:8]}"
    yield name
    memory_backend.discard(name)


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class Outcome:
    """What became of the inputs: the parts of each delivered message, what is on invalid and
    error (the original bytes, the code, the description)."""

    delivered: list[list[bytes]]
    moved: list[tuple[bytes, str, str, str]]


def publish(bus: str, payloads: list[bytes]) -> None:
    """As a producer writing raw records to ``input``: the inline broker judges each one."""
    with Gateway(f"memory://{bus}", application="producer") as producer:
        producer.transport.publish([Outgoing("input", p, f"k{i}") for i, p in enumerate(payloads)])


def consume(bus: str) -> Outcome:
    """A consumer of ``metadata`` reads everything, acknowledging what it is given, until the
    sequences still waiting have timed out."""
    clock = Clock()
    delivered: list[list[bytes]] = []
    with Gateway(f"memory://{bus}", application="consumer") as g:
        consumer = g.transport.consumer("metadata", group="consumer", background=False)  # type: ignore[call-arg]
        inbox = Receiver(
            consumer,
            g.repository,
            publish=g.transport.publish,
            group="consumer",
            sequence_timeout=TIMEOUT,
            clock=clock,
            sleep=clock.sleep,
        )
        for _ in range(4):  # the last waits beyond the timeout: what is held is moved
            while (received := inbox.receive(timeout=TIMEOUT / 2)) is not None:
                delivered.append([d.payload for d in received.deliveries])
                inbox.ack(received)
        inbox.close()
    moved = []
    for channel in ("invalid", "error"):
        for record in memory_backend.bus(bus).payloads(channel):
            header = orjson.loads(record)["messageHeader"]
            moved.append((decoration.original(record), channel, header["errorCode"], header["errorDescription"]))
    return Outcome(delivered, moved)


def places(outcome: Outcome, inputs: list[bytes]) -> dict[bytes, list[str]]:
    """Each distinct input's places (``delivered``, or ``<channel> <code>``); fails on a record
    that is no input's, or on more places than the input was sent times (each record sent is in
    one place at most: bytes sent twice may be moved twice - each copy a message reusing a
    claimed messageId for another message - or the second dropped as a duplicate)."""
    sent = Counter(inputs)
    found: dict[bytes, list[str]] = {payload: [] for payload in sent}

    def owner(record: bytes) -> bytes:
        owners = [payload for payload in found if history.extends(payload, record)]
        assert len(owners) == 1, f"a record that is {len(owners)} inputs: {record[:200]!r}"
        return owners[0]

    for parts in outcome.delivered:
        for record in parts:
            found[owner(record)].append("delivered")
    for record, channel, code, _ in outcome.moved:
        found[owner(record)].append(f"{channel} {code}")
    over = {payload[:100]: where for payload, where in found.items() if len(where) > sent[payload]}
    assert not over, f"inputs in more places than they were sent: {over}"
    delivered_twice = {payload[:100]: where for payload, where in found.items() if where.count("delivered") > 1}
    assert not delivered_twice, f"inputs delivered twice: {delivered_twice}"
    return found


def message_id(payload: bytes) -> Any:
    return json.loads(payload)["messageHeader"]["messageId"]


# -- the named cases ------------------------------------------------------------------------------
def test_two_bodies_at_one_position_then_the_last_part_the_first_is_delivered_the_second_moved(bus_name):
    a, last = parts_of(60, 2)
    b = other_fragment(a)
    inputs = [orjson.dumps(p) for p in (a, b, last)]
    publish(bus_name, inputs)
    outcome = consume(bus_name)
    found = places(outcome, inputs)
    assert found == {inputs[0]: ["delivered"], inputs[1]: ["invalid GENERR004"], inputs[2]: ["delivered"]}
    [(_, _, _, why)] = outcome.moved
    assert f"held by part {a['messageHeader']['messageId']}" in why
    # the consumer's move, keyed as its own
    keys = {r.key for r in memory_backend.bus(bus_name).channel("invalid").records()}
    assert keys == {"moved:consumer"}


def test_a_part_with_another_total_is_moved_alone_and_the_sequence_delivered(bus_name):
    parts = parts_of(61, 3)
    odd = copy.deepcopy(parts[2])
    odd["messageHeader"]["messageId"] = str(uuid.uuid4())
    odd["messageHeader"]["messageSequence"]["total"] = 4
    inputs = [orjson.dumps(p) for p in (parts[0], odd, parts[1], parts[2])]
    publish(bus_name, inputs)
    found = places(consume(bus_name), inputs)
    assert found[inputs[1]] == ["invalid GENERR004"]
    assert [found[i] for i in (inputs[0], inputs[2], inputs[3])] == [["delivered"]] * 3


@pytest.mark.parametrize("total", [10**30, 2**31])
def test_a_total_no_sequence_can_have_is_refused_once_by_the_inline_broker(bus_name, total: int):
    part = parts_of(62, 2)[0]
    part["messageHeader"]["messageSequence"]["total"] = total
    payload = json.dumps(part).encode()
    publish(bus_name, [payload])
    outcome = consume(bus_name)
    assert places(outcome, [payload]) == {payload: ["invalid GENERR004"]}
    assert outcome.moved[0][3].startswith(f"messageHeader.messageSequence.total: {total} parts is more than")
    assert memory_backend.bus(bus_name).payloads("metadata") == []


def test_the_same_part_read_again_is_a_duplicate_not_a_move(bus_name):
    parts = parts_of(63, 3)
    inputs = [orjson.dumps(p) for p in parts]
    publish(bus_name, inputs[:2])
    publish(bus_name, inputs[:2])  # sent again: the inline broker takes a resend for one
    publish(bus_name, inputs[2:])
    outcome = consume(bus_name)
    assert places(outcome, inputs) == {payload: ["delivered"] for payload in inputs}
    assert outcome.moved == []


def test_a_part_moved_and_sent_again_is_moved_once(bus_name):
    parts = parts_of(67, 3)
    b = other_fragment(parts[0])
    whole_invalid = parts_of(68, 2)
    whole_invalid[1]["messageBody"] = whole_invalid[1]["messageBody"][:-1]  # the whole is not JSON
    inputs = [orjson.dumps(p) for p in (parts[0], b, *parts[1:], *whole_invalid)]
    publish(bus_name, inputs)
    # the same bytes again: a resend the inline broker lets through, for the consumer to drop
    publish(bus_name, [inputs[1], *inputs[-2:]])
    found = places(consume(bus_name), inputs)
    assert found[inputs[1]] == ["invalid GENERR004"]
    assert found[inputs[-2]] == found[inputs[-1]] == ["invalid GENERR001"]


def test_a_second_body_after_its_sequence_was_delivered_is_moved_at_once(bus_name):
    a, last = parts_of(69, 2)
    late = other_fragment(a)
    inputs = [orjson.dumps(p) for p in (a, last, late)]
    publish(bus_name, inputs)
    outcome = consume(bus_name)
    assert places(outcome, inputs) == {
        inputs[0]: ["delivered"],
        inputs[1]: ["delivered"],
        inputs[2]: ["invalid GENERR004"],  # not held until it times out (GENERR006)
    }
    [(_, _, _, why)] = outcome.moved
    assert "was complete already (2 parts); this part" in why


def test_a_sequence_nacked_comes_again_whole_not_refused_as_its_own_conflict(bus_name):
    parts = parts_of(70, 3)
    publish(bus_name, [orjson.dumps(p) for p in parts])
    with (
        Gateway(f"memory://{bus_name}", application="consumer") as g,
        g.receiver("metadata", poll_interval=0.01) as inbox,
    ):
        first = inbox.receive(timeout=1)
        assert first is not None
        inbox.nack(first, "not now")
        again = inbox.receive(timeout=1)
        assert again is not None
        assert again.message_id == first.message_id
        inbox.ack(again)
        assert inbox.receive(timeout=0.05) is None
    assert memory_backend.bus(bus_name).payloads("invalid") == []
    assert memory_backend.bus(bus_name).payloads("error") == []


# -- the property ---------------------------------------------------------------------------------
SHAPES = ((64, 2), (65, 3), (66, 4))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inputs=arrivals(SHAPES))
def test_every_part_ends_in_exactly_one_place(inputs: list[bytes]):
    bus = f"holding-{uuid.uuid4().hex[:8]}"
    try:
        publish(bus, inputs)
        found = places(consume(bus), inputs)
    finally:
        memory_backend.discard(bus)
    placed_ids = {message_id(payload) for payload, where in found.items() if where}
    for payload, where in found.items():
        # nowhere only as a messageId already seen: dropped by the spec's de-duplication
        assert where or message_id(payload) in placed_ids, f"in no place: {payload[:200]!r}"
        for place in where:
            assert place == "delivered" or place.split()[1].startswith("GENERR"), place
            event(place)  # pytest --hypothesis-show-statistics: how often each place was met
        if not where:
            event("duplicate")
