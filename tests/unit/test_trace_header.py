"""Which header a trace shows for a messageId: the message's own, even when a reply naming it
(its correlationId) was read first - the title and type of a request's trace are the request's."""

from __future__ import annotations

import orjson

from rdss.model.messages import reply
from rdss.model.workload import Workload
from rdss.trace.findings import header
from rdss.trace.timeline import Record


def record(channel: str, message: dict) -> Record:
    return Record(channel, "shardId-000000000000", "1", None, orjson.dumps(message))


def test_the_message_s_own_header_wins_over_a_reply_read_first() -> None:
    workload = Workload(5)
    request = workload.message("MetadataRead", "Command")
    answer = reply(request, workload.message("MetadataRead", "Document")["messageBody"])
    asked = request["messageHeader"]["messageId"]
    found = {"input": [record("input", answer), record("input", request)], "responses": [record("responses", answer)]}
    shown = header(found, asked)
    assert shown is not None
    assert shown["messageId"] == asked
    assert shown["messageClass"] == "Command"
    # only a reply read: its header, the best there is, rather than nothing
    assert header({"input": [record("input", answer)]}, asked) == answer["messageHeader"]
    assert header({"input": [Record("input", "s", "1", None, b"not json")]}, asked) is None
