"""A messageId seen before with a different message is kept and visible, not taken for a resend
(issue 21, item 4), on the emulator: the broker's claims, the invalid channel, the WARNING, the
CONFLICT entry and ``rdss trace``."""

from __future__ import annotations

import copy
import json
import logging

import orjson
import pytest

from rdss.model import history
from rdss.model.conflicts import CONFLICT
from rdss.model.workload import Workload
from rdss.trace.tracer import Tracer
from tests.support import odd_records
from tests.support.system import System

pytestmark = pytest.mark.integration


def sequence_numbers(system: System) -> list[str]:
    kinesis = system.client("kinesis")
    stream = system.deployment.stream("input")
    [shard] = kinesis.list_shards(StreamName=stream)["Shards"]
    iterator = kinesis.get_shard_iterator(StreamName=stream, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON")
    records = kinesis.get_records(ShardIterator=iterator["ShardIterator"], Limit=100)["Records"]
    return [f"{shard['ShardId']}/{r['SequenceNumber']}" for r in records]


def test_a_different_message_under_a_claimed_id_is_a_conflict_and_a_resend_is_not(system: System, caplog):
    message = Workload(500).message("MetadataCreate", "Event")
    message_id = message["messageHeader"]["messageId"]
    first = orjson.dumps(message)
    resend = history.append(first, history.hop("producer-again"))  # another hop: still a resend
    reordered = json.dumps(
        {
            "messageBody": dict(reversed(list(message["messageBody"].items()))),
            "messageHeader": message["messageHeader"],
        },
        indent=2,
    ).encode()  # members in another order, indented: the same message
    changed = copy.deepcopy(message)
    changed["messageBody"]["objectTitle"] = "Another title"
    different = orjson.dumps(changed)
    for payload in (first, resend, different, reordered):  # one shard, four batches in order
        system.publish([payload], partition_key="k")
    with caplog.at_level(logging.WARNING):
        system.route()
    a, b, c, d = sequence_numbers(system)
    assert [odd_records.message_id(r) for r in system.read("metadata")] == [message_id]
    [moved] = system.read("invalid")
    header = orjson.loads(moved)["messageHeader"]
    assert header["errorCode"] == "GENERR004"
    assert f"messageId: {message_id} was claimed by record {a} for a different message" in header["errorDescription"]
    assert odd_records.original(moved) == different
    warnings = [r.getMessage() for r in caplog.records if "reused for a different message" in r.getMessage()]
    assert warnings == [
        f"messageId {message_id} reused for a different message: record {c} conflicts with record {a}; "
        "moved to invalid (GENERR004)"
    ]
    table = system.deployment.table("messages")
    entry = system.client("dynamodb").get_item(TableName=table, Key={"messageId": {"S": f"record#{c}"}})["Item"]
    assert entry["status"] == {"S": CONFLICT}
    assert entry["conflictsWith"] == {"S": a}
    assert entry["bareMessageId"] == {"S": message_id}

    timeline = Tracer(system.deployment, system.client).trace(message_id)
    records = [(r.record, r.outcome, r.duplicate_of, r.conflicts_with) for r in timeline.dispatches]
    assert records == [
        (a, "routed", None, None),
        (b, "duplicate", a, None),
        (c, "conflict", None, a),
        (d, "duplicate", a, None),
    ]
    assert timeline.summary() == (
        "routed to metadata; 1 record(s) reusing the id for a different message, moved to invalid; "
        "2 duplicate record(s) dropped"
    )
    assert any(f"record {c}: CONFLICT" in line and a in line for line in timeline.lines())

    # delivered again (a restarted mapping): nothing is routed or moved twice
    system.checkpoints.clear()
    system.route()
    assert len(system.read("metadata")) == 1
    assert len(system.read("invalid")) == 1


def test_two_messages_under_one_id_in_one_batch(system: System):
    message = Workload(501).message("MetadataDelete", "Event")
    changed = copy.deepcopy(message)
    changed["messageHeader"]["messageType"] = "MetadataUpdate"
    changed["messageBody"] = Workload(502).message("MetadataUpdate", "Event")["messageBody"]
    system.publish([orjson.dumps(message), orjson.dumps(changed), orjson.dumps(message)], partition_key="k")
    system.route()
    assert [odd_records.message_id(r) for r in system.read("metadata")] == [message["messageHeader"]["messageId"]]
    [moved] = system.read("invalid")
    assert odd_records.original(moved) == orjson.dumps(changed)
    assert orjson.loads(moved)["messageHeader"]["errorCode"] == "GENERR004"
