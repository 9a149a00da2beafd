"""Every part of a sequence ends in exactly one place, on the emulator: released with its
sequence, or moved alone (or with its sequence) to ``invalid``/``error`` with a code saying why.

The cases are the edges of a sequence: two parts at one position (another fragment, the same
fragment under another messageId, another fragment under the same messageId), before and after
the sequence is released; a part whose total is not its sequence's; the same part delivered
again to the sequencer; a part of a sequence the sweep moved, delivered again; totals no
sequence can have (10^30, 2^31); what is not a part at all, written straight onto ``sequence``.
Each test ends by finding every input in one place and nothing else on the channels.
"""

from __future__ import annotations

import copy
import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from rdss.local.accounting import Input, account, read_channel
from rdss.local.emulator import Endpoint
from rdss.local.runtime import Runtime, Settings
from rdss.model import decoration, history
from rdss.model.sequences import SEQUENCE_TIMEOUT_SECONDS
from rdss.model.workload import Workload
from rdss.processors.sequencer import Sweep
from tests.support.breadth import share
from tests.support.parts import arrivals, other_fragment, parts_of
from tests.support.system import System

pytestmark = pytest.mark.integration

ROUTED = ("metadata", "vocabulary", "responses")


@dataclass(frozen=True)
class Place:
    """Where one input ended: a channel, and the code and description it was moved with."""

    channel: str
    code: str | None = None
    description: str = ""


def run(system: System) -> None:
    """The broker, then the sequencer, over what arrived since the last run."""
    system.mapping("input", system.handler(system.broker())).drain()
    system.mapping("sequence", system.handler(system.sequencer())).drain()


def places(system: System, inputs: list[bytes]) -> dict[bytes, list[Place]]:
    """Every place each distinct input is found (its bytes, hops aside; a moved record by its
    original bytes). Fails when a record on an output channel is no input's."""
    found: list[tuple[bytes, Place]] = []
    for channel in ROUTED:
        found += [(record, Place(channel)) for record in system.read(channel)]
    for channel in ("invalid", "error"):
        for record in system.read(channel):
            header = orjson.loads(record)["messageHeader"]
            place = Place(channel, header.get("errorCode"), header.get("errorDescription", ""))
            found.append((decoration.original(record), place))
    result: dict[bytes, list[Place]] = {payload: [] for payload in inputs}
    for record, place in found:
        owners = [payload for payload in result if history.extends(payload, record)]
        assert len(owners) == 1, f"{place}: a record that is {len(owners)} inputs: {record[:200]!r}"
        result[owners[0]].append(place)
    return result


def accounted(system: System, inputs: list[bytes], *, duplicates: int = 0) -> dict[bytes, Place]:
    """Each distinct input's one place, checked: none missing, none twice. ``duplicates``
    inputs are resends the broker drops (the same messageId and message): no place of their own."""
    found = places(system, inputs)
    missing = [payload[:120] for payload, where in found.items() if not where]
    assert len(missing) == duplicates, f"inputs in no place: {missing}"
    twice = {payload[:120]: where for payload, where in found.items() if len(where) > 1}
    assert not twice, f"inputs in more than one place: {twice}"
    return {payload: where[0] for payload, where in found.items() if where}


def released(system: System, channel: str = "metadata") -> list[str]:
    return [orjson.loads(r)["messageHeader"]["messageId"] for r in system.read(channel)]


def ids(parts: list[dict[str, Any]]) -> list[str]:
    return [p["messageHeader"]["messageId"] for p in parts]


# -- two parts at one position --------------------------------------------------------------------
def test_two_bodies_at_one_position_then_the_last_part_the_first_is_released_the_second_moved(system: System):
    a, last = parts_of(50, 2)
    b = other_fragment(a)
    inputs = [orjson.dumps(p) for p in (a, b, last)]
    system.publish(inputs, partition_key=a["messageHeader"]["messageSequence"]["sequence"])
    run(system)
    fates = accounted(system, inputs)
    assert released(system) == ids([a, last])  # the first to arrive holds the position
    moved = fates[inputs[1]]
    assert (moved.channel, moved.code) == ("invalid", "GENERR004")
    assert f"position 1 of sequence {a['messageHeader']['messageSequence']['sequence']}" in moved.description
    assert f"held by part {a['messageHeader']['messageId']}" in moved.description
    assert "another fragment" in moved.description


def test_a_second_body_at_a_position_after_the_release_is_moved_not_dropped(system: System):
    first, last = parts_of(51, 2)
    late = other_fragment(first)
    system.publish([orjson.dumps(first), orjson.dumps(last)])
    run(system)
    assert released(system) == ids([first, last])
    system.publish([orjson.dumps(late)])
    run(system)
    inputs = [orjson.dumps(p) for p in (first, last, late)]
    fates = accounted(system, inputs)
    assert released(system) == ids([first, last])  # released once, not again
    assert (fates[inputs[2]].channel, fates[inputs[2]].code) == ("invalid", "GENERR004")


def test_the_same_fragment_under_another_message_id_is_a_conflict_too(system: System):
    parts = parts_of(52, 3)
    again = copy.deepcopy(parts[1])
    again["messageHeader"]["messageId"] = str(uuid.uuid4())
    inputs = [orjson.dumps(p) for p in (parts[0], parts[1], again, parts[2])]
    system.publish(inputs)
    run(system)
    fates = accounted(system, inputs)
    assert released(system) == ids(parts)
    assert fates[inputs[2]].code == "GENERR004"
    assert "the same fragment under another messageId" in fates[inputs[2]].description


def test_another_body_under_the_same_message_id_is_the_brokers_conflict(system: System):
    a, last = parts_of(53, 2)
    b = other_fragment(a, same_id=True)
    inputs = [orjson.dumps(p) for p in (a, b, last)]
    system.publish(inputs)
    run(system)
    fates = accounted(system, inputs)
    assert released(system) == ids([a, last])
    assert fates[inputs[1]].code == "GENERR004"
    assert "was claimed by record" in fates[inputs[1]].description  # the broker's claim said so
    assert len(system.read("sequence")) == 2  # b never reached the sequencer


# -- totals ---------------------------------------------------------------------------------------
def test_a_part_whose_total_is_not_its_sequences_is_moved_alone(system: System):
    parts = parts_of(54, 3)
    odd = copy.deepcopy(parts[1])
    odd["messageHeader"]["messageId"] = str(uuid.uuid4())
    odd["messageHeader"]["messageSequence"]["total"] = len(parts) + 1
    inputs = [orjson.dumps(p) for p in (parts[0], odd, *parts[1:])]
    system.publish(inputs)
    run(system)
    fates = accounted(system, inputs)
    assert released(system) == ids(parts)
    assert fates[inputs[1]].code == "GENERR004"
    assert f"has {len(parts)} parts (its first part said so); this part says {len(parts) + 1}" in (
        fates[inputs[1]].description
    )


@pytest.mark.parametrize("total", [10**30, 2**31, 10_001])
def test_a_total_no_sequence_can_have_is_refused_once_by_the_broker(system: System, total: int):
    part = parts_of(55, 2)[0]
    part["messageHeader"]["messageSequence"]["total"] = total
    payload = json.dumps(part).encode()  # orjson writes no integer beyond 64 bits
    system.publish([payload])
    run(system)
    fates = accounted(system, [payload])
    assert (fates[payload].channel, fates[payload].code) == ("invalid", "GENERR004")
    assert fates[payload].description.startswith(
        f"messageHeader.messageSequence.total: {total} parts is more than a sequence may have (at most 10,000"
    )
    assert system.read("sequence") == []  # never reached the sequencer
    assert system.read("error") == []


# -- the same part again --------------------------------------------------------------------------
def test_the_same_part_delivered_again_to_the_sequencer_is_dropped_once_released(system: System):
    parts = parts_of(56, 3)
    inputs = [orjson.dumps(p) for p in parts]
    system.publish(inputs[:2])
    run(system)
    forwarded = system.read("sequence")
    # Kinesis delivers at least once: the parts the broker forwarded arrive again, before and
    # after the last part completes the sequence
    system.publish(forwarded, channel="sequence")
    system.publish([inputs[2]])
    run(system)
    system.publish(system.read("sequence"), channel="sequence")
    run(system)
    accounted(system, inputs)
    assert released(system) == ids(parts)
    assert system.read("invalid") == []


def test_a_resend_of_a_released_part_is_a_duplicate_at_the_broker(system: System):
    parts = parts_of(57, 2)
    inputs = [orjson.dumps(p) for p in parts]
    system.publish(inputs)
    run(system)
    system.publish(inputs[:1])  # the same bytes again
    run(system)
    accounted(system, inputs)
    assert released(system) == ids(parts)
    assert len(system.read("sequence")) == len(parts)


def test_a_part_following_its_swept_sequence_is_moved_once_however_often_delivered(system: System):
    parts = parts_of(58, 3)
    inputs = [orjson.dumps(p) for p in parts]
    system.publish(inputs[:-1])
    run(system)
    later = datetime.now(UTC).timestamp() + 7200
    assert system.sweep(clock=lambda: later, timeout_seconds=3600).run()["count"] == 1
    system.publish(inputs[-1:])
    run(system)
    last = [r for r in system.read("sequence") if history.extends(inputs[-1], r)]
    system.publish(last + last, channel="sequence")  # delivered again, twice
    run(system)
    fates = accounted(system, inputs)
    assert {(f.channel, f.code) for f in fates.values()} == {("error", "GENERR006")}
    assert "part arrived after sequence" in fates[inputs[-1]].description


# -- not a part -----------------------------------------------------------------------------------
def test_what_is_not_a_part_on_the_sequence_channel_is_moved_with_its_code_at_once(system: System):
    whole = Workload(59).message("MetadataDelete", "Event")
    part = parts_of(59, 2)[0]
    broken = copy.deepcopy(part)
    broken["messageHeader"]["messageId"] = "not-a-uuid"
    huge = copy.deepcopy(part)
    huge["messageHeader"]["messageSequence"]["total"] = 10**30
    inputs = [b"not JSON", orjson.dumps(whole), orjson.dumps(broken), json.dumps(huge).encode()]
    system.publish(inputs, channel="sequence")
    system.mapping("sequence", system.handler(system.sequencer())).drain()
    moved = places(system, inputs)
    assert {payload: [(p.channel, p.code) for p in where] for payload, where in moved.items()} == {
        inputs[0]: [("invalid", "GENERR007")],
        inputs[1]: [("invalid", "GENERR004")],
        inputs[2]: [("invalid", "GENERR010")],
        inputs[3]: [("invalid", "GENERR004")],
    }


# -- the property: the demo's accounting finds every part -----------------------------------------
@pytest.fixture(scope="module")
def deployment(endpoint: Endpoint) -> Iterator[Runtime]:
    """One runtime for every example (each example's messageIds its own): provisioning per
    example would make the property a matter of minutes."""
    runtime = Runtime(endpoint, Settings(environment=f"q{uuid.uuid4().hex[:8]}", shards=1, sweep_interval=3600))
    runtime.provision()
    yield runtime
    runtime.deprovision()


@settings(max_examples=share(12), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_accounting_finds_every_part_in_exactly_one_place(deployment: Runtime, data: st.DataObject):
    runtime = deployment
    inputs = data.draw(arrivals(((70, 2), (71, 3)), base=uuid.uuid4()))
    published = runtime.publish(inputs)
    runtime.drain()
    # whatever still waits is swept as the timeout passed: the parts that did arrive go to error
    later = time.time() + 2 * SEQUENCE_TIMEOUT_SECONDS
    Sweep(
        names=runtime.names,
        dynamodb=runtime.endpoint.client("dynamodb"),
        s3=runtime.endpoint.client("s3"),
        kinesis=runtime.endpoint.client("kinesis"),
        clock=lambda: later,
    ).run()
    runtime.drain()
    report = account(runtime, [Input(f"input-{i}", [p]) for i, p in enumerate(published)])
    outcomes = [item.outcome for item in report.inputs]
    for outcome in outcomes:
        event(outcome)  # pytest --hypothesis-show-statistics: how often each was met
    assert set(outcomes) <= {"routed", "invalid", "error", "duplicate"}, report.inputs
    for item in report.inputs:
        assert item.outcome in ("routed", "duplicate") or (item.error_code or "").startswith("GENERR"), item
    # and nothing twice: as many records of these sequences out as inputs with a place
    sequences = {_sequence_of(p) for p in inputs}
    out = [
        record
        for channel in (*ROUTED, "invalid", "error")
        for record in read_channel(runtime, channel)
        if _sequence_of(record) in sequences
    ]
    assert len(out) == sum(outcome != "duplicate" for outcome in outcomes)


def _sequence_of(payload: bytes) -> Any:
    sequence = json.loads(payload)["messageHeader"]["messageSequence"]
    return sequence["sequence"]
