"""The one reject path: channel by code, decorated bytes, claim checks when a record would not fit."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest

from rdss.model import decoration
from rdss.model.errors import ErrorCode
from rdss.model.rejection import (
    ClaimCheckUnavailable,
    DirectoryClaimChecks,
    Rejector,
    moved_by,
    moved_key,
    reject,
    rejected_key,
)
from rdss.model.validation import validate

MOMENT = datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC)


def test_an_invalid_verdict_goes_to_the_channel_of_its_code_decorated_with_the_bytes_intact():
    payload = b'{"messageHeader": {"messageId": "not-a-uuid"}, "messageBody": {}}'
    verdict = validate(payload)
    rejection = reject(payload, verdict)
    assert rejection.code == verdict.error_code
    assert rejection.channel == str(verdict.error_code.channel) == "invalid"
    assert rejection.description == verdict.error_description
    assert decoration.original(rejection.record) == payload
    assert orjson.loads(rejection.record)["messageHeader"]["errorCode"] == str(verdict.error_code)
    assert rejection.headers == {"errorCode": str(verdict.error_code)}
    assert rejection.claim_check is None


@pytest.mark.parametrize(
    ("code", "channel"),
    [
        ("GENERR003", "error"),
        ("GENERR006", "error"),
        ("GENERR009", "error"),
        ("GENERR001", "invalid"),
        ("APPERRMET003", "invalid"),
    ],
)
def test_a_code_names_its_channel_and_an_empty_description_takes_the_spec_s(code: str, channel: str):
    rejection = reject(b"not json at all", code)
    assert rejection.channel == channel
    assert rejection.description == ErrorCode(code).description
    assert decoration.original(rejection.record) == b"not json at all"


def test_a_valid_message_or_an_unknown_code_is_not_a_rejection():
    with pytest.raises(ValueError, match="valid"):
        reject(b"{}", validate(b"{}").__class__(None, None, {}))
    with pytest.raises(ValueError):
        reject(b"{}", "NOTACODE")


def test_a_record_over_the_limit_is_kept_aside_and_the_channel_gets_a_claim_check(tmp_path: Path):
    payload = b"\xff" * 3000  # not UTF-8: wrapped in base64, a third larger
    rejector = Rejector(limit=2000, claim_checks=DirectoryClaimChecks(tmp_path))
    rejection = rejector.reject(payload, ErrorCode.GENERR007, "not UTF-8", now=MOMENT)
    assert len(rejection.record) < 2000
    assert rejection.channel == "invalid"
    wrapper = orjson.loads(rejection.record)
    assert wrapper["messageHeader"] == {"errorCode": "GENERR007", "errorDescription": "not UTF-8"}
    location = wrapper[decoration.WRAPPER_KEY]
    assert location["encoding"] == "file"
    assert location["bytes"] == len(payload)
    kept = Path(location["path"])
    assert kept.parent == tmp_path / "claim-check" / "2024" / "05" / "06"
    assert kept.read_bytes() == payload
    assert rejection.claim_check is not None
    with pytest.raises(ValueError, match="claim check"):
        decoration.original(rejection.record)


def test_a_record_that_fits_is_not_claim_checked_and_one_without_a_store_is_refused_loudly(tmp_path: Path):
    rejector = Rejector(limit=2000, claim_checks=DirectoryClaimChecks(tmp_path))
    assert rejector.reject(b"x" * 100, ErrorCode.GENERR007).claim_check is None
    assert not any(tmp_path.iterdir())
    with pytest.raises(ClaimCheckUnavailable, match="GENERR007"):
        Rejector(limit=2000).reject(b"x" * 3000, ErrorCode.GENERR007)


def test_a_consumer_s_move_is_keyed_by_its_group_and_no_producer_key_passes_for_one():
    assert moved_key("archivematica") == "moved:archivematica"
    assert moved_by("moved:archivematica") == "archivematica"
    assert moved_by("record#shardId-000000000000/49650") is None
    assert moved_by(None) is None
    # the broker keeps a rejected record's own key, unless it would read as a consumer's move
    assert rejected_key("9f0c7a1e-producer-key", "record#s/1") == "9f0c7a1e-producer-key"
    assert rejected_key("moved:archivematica", "record#s/1") == "record#s/1"
