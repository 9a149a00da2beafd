"""No partition key a producer writes decides a record's path (the broker on the emulator).

The broker once read a partition key ``rdss-redrive:<shard>/<sequence>`` as "this is that earlier
record, put back by ``rdss redrive``": a producer that keyed a new invalid record with an earlier
invalid record's identity (PutRecords tells a producer its records' identities) had it taken for
that record delivered again - acknowledged, never moved to ``invalid``, and shown by ``rdss trace``
as not processed yet. Now ``rdss redrive`` marks nothing: it puts parked records back as new
records after releasing, in the Local Data Repository (a table no producer's role may write), the
claims their earlier delivery left; the broker judges every record of ``input`` by its content
alone, whatever its key (``rdss-redrive:``, ``moved:``, or the key forms of the repository).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rdss.model import decoration
from rdss.model.errors import ErrorCode
from rdss.model.rejection import moved_by
from rdss.model.validation import validate
from rdss.model.workload import Workload
from rdss.trace.tracer import Tracer
from tests.support.breadth import share
from tests.support.system import System

pytestmark = pytest.mark.integration

#: The prefixes the system's own tools write or once read in a key: the old redrive mark, a
#: consumer's move, the repository's key forms, the inline broker's fallback, redrive's fresh keys.
PREFIXES = (
    "rdss-redrive:",
    "moved:",
    "record#",
    "ledger#",
    "attempts#",
    "conflict#",
    "redriven#",
    "gateway:",
    "input:",
    "redrive-",
)


@dataclass(frozen=True)
class Put:
    """One record a producer put on ``input``: its bytes, key and identity (``shard/sequence``)."""

    payload: bytes
    key: str
    record: str


def put(system: System, payload: bytes, key: str) -> Put:
    """Put one record on ``input`` as a producer does; PutRecord tells it the record's identity."""
    answer = system.client("kinesis").put_record(
        StreamName=system.deployment.stream("input"), Data=payload, PartitionKey=key
    )
    return Put(payload, key, f"{answer['ShardId']}/{answer['SequenceNumber']}")


def run_broker(system: System) -> None:
    system.mapping("input", system.handler(system.broker())).drain()


def tracer(system: System) -> Tracer:
    return Tracer(system.deployment, system.client)


def invalid_message(seed: int) -> bytes:
    broken = Workload(seed).message("MetadataDelete", "Event")
    broken["messageHeader"]["generator"] = ""  # GENERR004
    return orjson.dumps(broken)


def test_an_invalid_record_keyed_as_an_earlier_ones_redrive_reaches_invalid(system: System) -> None:
    first = put(system, invalid_message(2801), "producer-key")
    run_broker(system)
    hidden = put(system, invalid_message(2802), f"rdss-redrive:{first.record}")
    run_broker(system)

    invalid = system.records("invalid")
    assert sorted(decoration.original(r.data) for r in invalid) == sorted([first.payload, hidden.payload])
    assert all(orjson.loads(r.data)["messageHeader"]["errorCode"] == "GENERR004" for r in invalid)
    timeline = tracer(system).trace(hidden.record)
    assert [d.outcome for d in timeline.dispatches] == ["invalid"]
    assert "not processed yet" not in timeline.summary()


def test_a_different_message_under_a_claimed_id_keyed_as_its_redrive_is_a_conflict(system: System) -> None:
    """A valid message and then another body under its messageId, keyed as if ``rdss redrive`` had
    put back the first record: the second is a conflict moved to invalid, not the first delivered
    again."""
    workload = Workload(2803)
    original = workload.message("MetadataCreate", "Event")
    first = put(system, orjson.dumps(original), "producer-key")
    run_broker(system)
    other = workload.message("MetadataCreate", "Event")
    other["messageHeader"]["messageId"] = original["messageHeader"]["messageId"]
    forged = put(system, orjson.dumps(other), f"rdss-redrive:{first.record}")
    run_broker(system)

    assert [orjson.loads(r)["messageHeader"]["messageId"] for r in system.read("metadata")] == [
        original["messageHeader"]["messageId"]
    ]
    [moved] = system.records("invalid")
    assert decoration.original(moved.data) == forged.payload
    assert orjson.loads(moved.data)["messageHeader"]["errorCode"] == "GENERR004"
    assert moved_by(moved.partition_key) is None


# -- any key ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def one_system(endpoint: Any) -> Iterator[System]:
    system = System.create(endpoint)
    yield system
    system.delete()


#: What a record after the earlier one holds: a message of its own, an invalid record, the earlier
#: message again (a duplicate, dropped), or another body under the earlier message's id (a conflict).
KINDS = ("fresh", "invalid", "resend", "conflict")


def test_any_key_a_producer_writes_leads_to_the_content_verdict(one_system: System) -> None:
    """A record is put on ``input`` and handled; then one record under each of the system's
    prefixes (and one key of any kind), each prefix followed by the first record's identity or by
    anything: whatever the key, each record ends where its content says - a message of its own
    routed once, the earlier message again dropped as a duplicate, another body under its id moved
    to invalid as a conflict, an invalid record moved with the classifier's code - and no output
    is keyed as a consumer's move. Every input accounted for."""
    system = one_system
    seed = iter(range(28_100, 1_000_000))

    @settings(
        max_examples=share(30),
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(data=st.data(), earlier_valid=st.booleans())
    def one(data: st.DataObject, earlier_valid: bool) -> None:
        workload = Workload(next(seed))
        earlier_message = workload.message("MetadataCreate", "Event")
        earlier_payload = orjson.dumps(earlier_message) if earlier_valid else invalid_message(next(seed))
        earlier = put(system, earlier_payload, uuid.uuid4().hex)
        run_broker(system)
        before = {name: len(system.read(name)) for name in ("metadata", "invalid", "error")}

        expected_routed: list[str] = []
        expected_moved: dict[bytes, str] = {}
        for prefix in (*PREFIXES, None):
            if prefix is None:
                key = data.draw(st.text(min_size=1, max_size=256), label="any key")
            else:
                tail = earlier.record if data.draw(st.booleans(), label=f"{prefix} identity") else None
                tail = tail if tail is not None else data.draw(st.text(max_size=60), label=f"{prefix} tail")
                key = (prefix + tail)[:256]
            kinds = KINDS if earlier_valid else ("fresh", "invalid")
            kind = data.draw(st.sampled_from(kinds), label=f"{key!r} holds")
            if kind == "fresh":
                message = workload.message("MetadataCreate", "Event")
                payload = orjson.dumps(message)
                expected_routed.append(message["messageHeader"]["messageId"])
            elif kind == "invalid":
                payload = invalid_message(next(seed))
                expected_moved[payload] = str(validate(payload).error_code)
            elif kind == "resend":
                payload = earlier_payload
            else:
                other = workload.message("MetadataCreate", "Event")
                other["messageHeader"]["messageId"] = earlier_message["messageHeader"]["messageId"]
                payload = orjson.dumps(other)
                expected_moved[payload] = "GENERR004"  # a conflict
            put(system, payload, key)
        run_broker(system)

        after = {name: system.records(name)[before[name] :] for name in ("metadata", "invalid", "error")}
        routed = [orjson.loads(r.data)["messageHeader"]["messageId"] for r in after["metadata"]]
        assert sorted(routed) == sorted(expected_routed)
        moved = {
            decoration.original(r.data): orjson.loads(r.data)["messageHeader"]["errorCode"]
            for r in after["invalid"] + after["error"]
        }
        assert moved == expected_moved
        assert len(after["invalid"]) + len(after["error"]) == len(expected_moved)
        assert all(ErrorCode(code).channel.value == "invalid" for code in moved.values())
        assert [moved_by(r.partition_key) for r in after["invalid"]] == [None] * len(after["invalid"])

    one()
