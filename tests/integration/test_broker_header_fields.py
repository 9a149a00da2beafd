"""The broker judges a producer's message by the classifier alone, whatever optional header
fields it carries: ``errorCode`` and ``errorDescription`` are fields any message may carry (a
producer re-sending a fixed message often leaves them set), never a mark that a consumer moved
it. Consumers put their moves on ``invalid``/``error`` themselves, keyed ``moved:<group>``; no
record a producer puts on ``input`` can come out looking like one."""

from __future__ import annotations

import logging

import orjson
import pytest

from rdss.model import decoration
from rdss.model.messages import failure_reply
from rdss.model.rejection import Rejector, moved_by
from rdss.model.validation import validate
from rdss.model.workload import Workload
from tests.support.system import System

pytestmark = pytest.mark.integration


def run_broker(system: System) -> None:
    system.mapping("input", system.handler(system.broker())).drain()


def test_a_valid_message_carrying_error_fields_is_routed_by_its_content(
    system: System, caplog: pytest.LogCaptureFixture
) -> None:
    workload = Workload(31)
    fixed = workload.message("VocabularyPatch", "Event")
    fixed["messageHeader"]["errorCode"] = "GENERR001"
    fixed["messageHeader"]["errorDescription"] = "messageBody.vocabularyName: missing (fixed since)"
    created = workload.message("MetadataCreate", "Event")
    created["messageHeader"]["errorCode"] = "GENERR009"  # any of the spec's codes, on any class
    created["messageHeader"]["errorDescription"] = "gave up after 5 failed attempts"
    request = workload.message("MetadataRead", "Command")
    reply = failure_reply(request, "APPERRMET003", "no such object")
    payloads = [orjson.dumps(m) for m in (fixed, created, request, reply)]
    assert all(validate(p).valid for p in payloads)
    system.publish(payloads)
    with caplog.at_level(logging.WARNING):
        run_broker(system)

    assert [orjson.loads(r)["messageHeader"]["messageId"] for r in system.read("vocabulary")] == [
        fixed["messageHeader"]["messageId"]
    ]
    routed = {orjson.loads(r)["messageHeader"]["messageId"] for r in system.read("metadata")}
    assert routed == {created["messageHeader"]["messageId"], request["messageHeader"]["messageId"]}
    [answer] = system.read("responses")
    assert orjson.loads(answer)["messageHeader"]["errorCode"] == "APPERRMET003"
    assert system.read("invalid") == system.read("error") == []
    assert "moved to" not in caplog.text
    # claimed by messageId, as every valid message is: a resend is a duplicate
    system.publish([payloads[1]])
    run_broker(system)
    assert len(system.read("metadata")) == 2


def test_records_carrying_error_fields_are_judged_once_and_never_keyed_as_a_move(system: System) -> None:
    """What consumers once put on ``input`` - their decorated moves - is now a producer's record
    like any other: an invalid one is rejected with the classifier's code and decorated once by
    the broker (its bytes intact inside), a valid one is a message (here a duplicate of the one it
    was decorated from). A producer's partition key ``moved:...`` does not survive rejection."""
    workload = Workload(32)
    routed = orjson.dumps(workload.message("MetadataCreate", "Event"))
    system.publish([routed])
    run_broker(system)
    [forwarded] = system.read("metadata")

    rejector = Rejector()
    refused = rejector.reject(forwarded, "APPERRMET001", "no such dataset here").record  # valid, decorated
    broken = workload.message("MetadataDelete", "Event")
    broken["messageHeader"]["messageId"] = "not-a-uuid"
    malformed = rejector.reject(orjson.dumps(broken), "GENERR010", "messageHeader.messageId: not a UUID").record
    wrapped = rejector.reject(b"\xff not JSON", "GENERR007", "malformed JSON").record
    system.publish([refused], partition_key="moved:impostor")
    system.publish([malformed, wrapped], partition_key="moved:impostor")
    run_broker(system)

    assert system.read("metadata") == [forwarded]  # the decorated copy: a duplicate of it
    assert system.read("error") == []
    invalid = system.records("invalid")
    assert sorted(decoration.original(r.data) for r in invalid) == sorted([malformed, wrapped])
    codes = sorted(orjson.loads(r.data)["messageHeader"]["errorCode"] for r in invalid)
    assert codes == ["GENERR004", "GENERR010"]  # the classifier's verdicts, not the carried codes
    assert [moved_by(r.partition_key) for r in invalid] == [None, None]
    assert all(r.partition_key.startswith("record#") for r in invalid)

    # every record delivered again (the mapping's checkpoint lost): nothing moved twice
    system.checkpoints["input"].clear()
    run_broker(system)
    assert len(system.read("invalid")) == 2
    assert system.read("metadata") == [forwarded]
