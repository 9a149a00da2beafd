"""Records that arrive on ``input`` decorated already - a gateway consumer's moves, which enter
through input because a vendor writes no other channel: the classifier names their code, the
inline broker sends them on unchanged to that code's channel, a failure reply still routes as a
reply."""

from __future__ import annotations

import orjson
import pytest

from rdss import decoration
from rdss.errors import ErrorCode
from rdss.gateway.backend import Outgoing
from rdss.gateway.inline_broker import InlineBroker
from rdss.messages import failure_reply
from rdss.rejection import Rejector
from rdss.validation import carried_error, validate
from rdss.workload import Workload


def _carried(payload: bytes) -> ErrorCode | None:
    return carried_error(validate(payload))


@pytest.mark.parametrize(
    ("code", "channel"),
    [("APPERRMET003", "invalid"), ("GENERR009", "error"), ("GENERR003", "error"), ("GENERR010", "invalid")],
)
def test_a_valid_message_decorated_in_place_carries_its_code(code: str, channel: str) -> None:
    payload = orjson.dumps(Workload(3).message("MetadataCreate", "Event"))
    moved = decoration.decorate(payload, code, "refused by the consumer")
    assert validate(moved).valid  # errorCode is a header field: the classifier alone would route it
    assert _carried(moved) == code
    routed = InlineBroker().route(Outgoing("input", moved, "k"))
    assert (routed.channel, routed.payload, routed.headers) == (channel, moved, {"errorCode": code})


def test_an_invalid_record_decorated_or_wrapped_carries_its_code() -> None:
    message = Workload(4).message("MetadataDelete", "Event")
    message["messageHeader"]["messageId"] = "not-a-uuid"
    in_place = decoration.decorate(orjson.dumps(message), "GENERR010", "messageHeader.messageId: not a UUID")
    wrapped = decoration.decorate(b"{truncated", "GENERR007", "malformed JSON")
    assert decoration.is_wrapped(orjson.loads(wrapped))
    pointer = decoration.claim_check(
        "GENERR006", "too large", location={"encoding": "file", "path": "/x"}, size=2_000_000, sha256="0" * 64
    )
    for record, code in ((in_place, "GENERR010"), (wrapped, "GENERR007"), (pointer, "GENERR006")):
        assert _carried(record) == code
        routed = InlineBroker().route(Outgoing("input", record, "k"))
        assert (routed.channel, routed.payload) == (ErrorCode(code).channel.value, record)


def test_a_rejector_record_is_recognised_as_it_is_published() -> None:
    """What a receiver publishes (rdss.rejection) is exactly what the broker recognises."""
    payload = orjson.dumps(Workload(5).message("MetadataUpdate", "Event"))
    rejection = Rejector().reject(payload, ErrorCode.APPERRMET001, "no such dataset")
    assert _carried(rejection.record) == ErrorCode.APPERRMET001


def test_a_failure_reply_is_a_message_not_a_move() -> None:
    read = Workload(6).message("MetadataRead", "Command")
    reply = orjson.dumps(failure_reply(read, "APPERRMET003", "no such object"))
    assert validate(reply).valid
    assert _carried(reply) is None
    assert InlineBroker().route(Outgoing("input", reply, "k")).channel == "responses"
    # a failure reply a consumer then refuses is wrapped (it names an error already): a move
    moved = decoration.decorate(reply, "GENERR009", "handler failed")
    assert _carried(moved) == ErrorCode.GENERR009


def test_no_code_or_not_the_spec_s_code_is_classified_as_usual() -> None:
    message = Workload(7).message("MetadataCreate", "Event")
    assert _carried(orjson.dumps(message)) is None
    message["messageHeader"]["errorCode"] = "NOT-A-CODE"
    message["messageHeader"]["errorDescription"] = "decorated elsewhere"
    assert _carried(orjson.dumps(message)) is None
    assert _carried(b"not json") is None
