"""The broker and records that arrive on ``input`` decorated already: gateway consumers' moves,
which enter through input because a vendor may write no other channel. Each goes unchanged to
its code's channel, is claimed as the record it is (never as its messageId, which the message it
was moved from already holds), and a redelivery of it is not moved twice; a failure reply still
routes as a reply."""

from __future__ import annotations

import orjson
import pytest

from rdss import decoration
from rdss.messages import failure_reply
from rdss.rejection import Rejector
from rdss.workload import Workload
from tests.support.system import System

pytestmark = pytest.mark.integration


def run_broker(system: System) -> None:
    system.mapping("input", system.handler(system.broker())).drain()


def test_moved_records_go_unchanged_to_their_code_s_channel_once(system: System) -> None:
    workload = Workload(31)
    routed = orjson.dumps(workload.message("MetadataCreate", "Event"))
    system.publish([routed])
    run_broker(system)
    [forwarded] = system.read("metadata")

    # a consumer of metadata refuses it (its application's code), another fails on a message
    # (poison), a third meets a record with a malformed messageId written onto the channel
    rejector = Rejector()
    refused = rejector.reject(forwarded, "APPERRMET001", "no such dataset here").record
    poison = rejector.reject(forwarded, "GENERR009", "gave up after 5 failed attempts: ValueError: x").record
    broken = workload.message("MetadataDelete", "Event")
    broken["messageHeader"]["messageId"] = "not-a-uuid"
    malformed = rejector.reject(orjson.dumps(broken), "GENERR010", "messageHeader.messageId: not a UUID").record
    wrapped = rejector.reject(b"\xff not JSON", "GENERR007", "malformed JSON").record
    request = workload.message("MetadataRead", "Command")
    failed_reply = orjson.dumps(failure_reply(request, "APPERRMET003", "no such object"))
    system.publish([refused, poison, malformed, wrapped, failed_reply])
    run_broker(system)

    assert sorted(system.read("invalid")) == sorted([refused, malformed, wrapped])  # byte for byte
    assert system.read("error") == [poison]
    # the refused and poisoned copies share the routed message's id: not taken for duplicates of it,
    # and not routed again
    assert system.read("metadata") == [forwarded]
    [reply] = system.read("responses")
    assert decoration.original(refused) == forwarded
    assert orjson.loads(reply)["messageHeader"]["errorCode"] == "APPERRMET003"

    # every record delivered again (the mapping's checkpoint lost): nothing moved twice
    system.checkpoints["input"].clear()
    run_broker(system)
    assert sorted(system.read("invalid")) == sorted([refused, malformed, wrapped])
    assert system.read("error") == [poison]
    assert len(system.read("responses")) == 1

    # claimed by record, with the code they carried
    claims = system.client("dynamodb").scan(TableName=system.deployment.table("messages"))["Items"]
    codes = sorted(c["errorCode"]["S"] for c in claims if c["messageId"]["S"].startswith("record#"))
    assert codes == ["APPERRMET001", "GENERR007", "GENERR009", "GENERR010"]
