"""``rdss local demo --messages DIR`` accounts for any input: generated files of every class -
valid messages with the header's optional fields (errorCode, errorDescription, returnAddress,
correlationId, messageHistory), decorated copies, broken copies sharing a valid message's id,
non-JSON and non-UTF-8 bytes, oversize messages, indented JSON, an empty file - each get one
outcome, as the broker decided it, and the demo exits 0.

Indented records span several lines of the audit archive for now (the archive is
newline-delimited until it keeps records): the demo takes outcomes from the channels and the
Local Data Repository, and reads the archive's lines, whatever they hold, without failing."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from rdss.cli import main
from rdss.model import decoration, history
from rdss.model.messages import failure_reply, reply
from rdss.model.rejection import Rejector
from rdss.model.sequences import split
from rdss.model.validation import validate
from rdss.model.workload import Workload
from tests.support.mutations import mutations

pytestmark = pytest.mark.integration

#: Kinesis's own record limit; the spec's is 1,000,000 bytes.
KINESIS_LIMIT = 1024 * 1024


@dataclass(frozen=True)
class Expected:
    """What the report must say of one input: an outcome of ``outcomes`` and, when given, that
    channel list and errorCode."""

    outcomes: tuple[str, ...]
    channels: list[str] | None = None
    error_code: str | Callable[[str | None], bool] | None = None

    def check(self, item: dict[str, Any]) -> None:
        assert item["outcome"] in self.outcomes, item
        if self.channels is not None:
            assert item["channels"] == self.channels, item
        if callable(self.error_code):
            assert self.error_code(item["errorCode"]), item
        else:
            assert item["errorCode"] == self.error_code, item


def routed(channel: str) -> Expected:
    return Expected(("routed",), [channel])


def rejected(code: str) -> Expected:
    channel = "error" if code in ("GENERR003", "GENERR006") else "invalid"
    return Expected((channel,), [channel], code)


#: A second record of a message the broker already claimed: dropped as a duplicate.
SEEN = Expected(("duplicate",), None, lambda code: code is None)


def inputs(seed: int = 2611) -> dict[str, tuple[bytes, Expected]]:
    """File name -> (its bytes, what the demo must report), every class of input."""
    workload = Workload(seed)
    files: dict[str, tuple[bytes, Expected]] = {}

    def add(name: str, payload: bytes, expected: Expected) -> None:
        files[f"{len(files):03d}-{name}"] = (payload, expected)

    # first of all a broken copy whose header members are of the wrong kinds, sharing its id with
    # a valid message that follows: the demo traces that id (its header read from either copy)
    later = workload.message("MetadataUpdate", "Document")
    mangled = copy.deepcopy(later)
    mangled["messageHeader"] |= {"messageSequence": ["not", "an", "object"], "messageTimings": "yesterday"}
    add("broken-first-copy.json", orjson.dumps(mangled), rejected("GENERR004"))
    add("valid-after-its-broken-copy.json", orjson.dumps(later), routed("metadata"))

    # valid messages, and valid messages carrying the header's optional fields
    create = workload.message("MetadataCreate", "Event")
    add("valid-compact.json", orjson.dumps(create), routed("metadata"))
    fixed = workload.message("MetadataUpdate", "Event")
    fixed["messageHeader"] |= {"errorCode": "GENERR001", "errorDescription": "messageBody.objectTitle: fixed since"}
    add("valid-with-errorcode.json", orjson.dumps(fixed), routed("metadata"))
    patch = workload.message("VocabularyPatch", "Event")
    patch["messageHeader"] |= {"errorCode": "GENERR009", "errorDescription": "gave up after 5 failed attempts"}
    add("valid-with-generr009.json", orjson.dumps(patch), routed("vocabulary"))
    odd = workload.message("MetadataDelete", "Event")
    odd["messageHeader"] |= {"errorCode": "VENDOR-42", "errorDescription": "a code of another system"}
    add("valid-with-other-errorcode.json", orjson.dumps(odd), routed("metadata"))
    request = workload.message("MetadataRead", "Command")
    request["messageHeader"]["returnAddress"] = "metadata"
    add("valid-request-with-returnaddress.json", orjson.dumps(request), routed("metadata"))
    answer = reply(request, workload.message("MetadataRead", "Document")["messageBody"], generator="repository")
    # to its request's returnAddress, or responses if the request is not claimed yet (another shard)
    add("valid-reply-correlationid.json", orjson.dumps(answer), Expected(("routed",)))
    failed = workload.message("VocabularyRead", "Command")
    add("valid-vocabulary-request.json", orjson.dumps(failed), routed("vocabulary"))
    add(
        "valid-failure-reply.json",
        orjson.dumps(failure_reply(failed, "APPERRVOC002", "no such vocabulary")),
        routed("responses"),
    )
    hopped = history.append(
        orjson.dumps(workload.message("MetadataCreate", "Command")), history.hop("an-upstream-gateway")
    )
    add("valid-with-messagehistory.json", hopped, routed("metadata"))
    # a name the report's table must show as it is, not read as markup
    add("valid-[red]-named.json", orjson.dumps(workload.message("MetadataCreate", "Event")), routed("metadata"))

    # indented JSON (rdss new writes it; producers send files as they are)
    indented = workload.message("MetadataCreate", "Event")
    add("valid-indented.json", orjson.dumps(indented, option=orjson.OPT_INDENT_2), routed("metadata"))
    crlf = orjson.dumps(workload.message("MetadataUpdate", "Event"), option=orjson.OPT_INDENT_2)
    add("valid-indented-crlf.json", crlf.replace(b"\n", b"\r\n") + b"\r\n", routed("metadata"))
    broken_indented = workload.message("MetadataDelete", "Event")
    broken_indented["messageHeader"]["messageId"] = "not-a-uuid"
    add("invalid-indented.json", orjson.dumps(broken_indented, option=orjson.OPT_INDENT_2), rejected("GENERR010"))

    # decorated copies: what the invalid and error channels hold, sent back in by a producer
    rejector = Rejector()
    add("decorated-valid-copy.json", rejector.reject(orjson.dumps(create), "APPERRMET001", "x").record, SEEN)
    add(
        "decorated-invalid-copy.json",
        rejector.reject(orjson.dumps(broken_indented), "GENERR010").record,
        rejected("GENERR010"),
    )
    wrapped = rejector.reject(b"\xff\xfe not JSON", "GENERR007", "malformed JSON").record
    add("decorated-wrapper.json", wrapped, rejected("GENERR004"))
    pointer = decoration.claim_check(
        "GENERR006",
        "too large",
        location={"encoding": "s3", "bucket": "b", "key": "k"},
        size=2_000_000,
        sha256="0" * 64,
    )
    add("decorated-claim-check.json", pointer, rejected("GENERR004"))
    twice = decoration.decorate(decoration.decorate(orjson.dumps(fixed), "GENERR001", "once"), "GENERR001", "twice")
    add("decorated-twice.json", twice, rejected("GENERR004"))

    # broken copies sharing a valid message's id, and resends
    taken = 0
    for mutation in mutations(create):
        header = mutation.message.get("messageHeader")
        if not isinstance(header, dict) or header.get("messageId") != create["messageHeader"]["messageId"]:
            continue
        add(
            f"broken-copy-{mutation.expected_code}.json",
            orjson.dumps(mutation.message),
            rejected(mutation.expected_code),
        )
        taken += 1
        if taken == 12:
            break
    add("resend.json", orjson.dumps(create), SEEN)
    other_body = copy.deepcopy(create)
    other_body["messageBody"]["objectTitle"] = "another title under the same messageId"
    # another message under a claimed messageId: a conflict, kept on invalid (a messageId names one message)
    add("same-id-other-body.json", orjson.dumps(other_body), rejected("GENERR004"))
    expired = workload.message("MetadataDelete", "Event")
    expired["messageHeader"]["messageTimings"]["expirationTimestamp"] = "2020-01-01T00:00:00Z"
    add("expired.json", orjson.dumps(expired), rejected("GENERR003"))

    # not JSON, not a message
    for name, payload in (
        ("not-json.txt", b"this is not JSON"),
        ("not-utf8.bin", b"\xff\xfe\x00\x81 binary"),
        ("truncated.json", orjson.dumps(create)[:-3]),
        ("nan.json", b'{"messageHeader": NaN}'),
        ("newlines-only.txt", b"\n\n\n"),
    ):
        add(name, payload, rejected("GENERR007"))
    for name, payload in (("array.json", b"[1, 2, 3]"), ("string.json", b'"a string"'), ("object.json", b"{}")):
        add(name, payload, rejected("GENERR004"))
    add("empty.json", b"", Expected(("invalid", "refused"), None, "GENERR007"))

    # oversize: over the spec's 1,000,000 bytes but within a Kinesis record, and over both
    big = orjson.dumps(workload.large(1_000_100))
    assert 1_000_000 < len(big) < KINESIS_LIMIT - 1_000
    add("oversize-message.json", big, rejected("GENERR006"))
    add("oversize-not-json.txt", b"x" * 1_000_500, rejected("GENERR007"))
    # a sequence whose every part is a file (released whole), and a part whose sequence never
    # completes here: held by the sequencer (pending in its table) - a place, not a loss
    parts = split(workload.large(30_000), limit=12_000)
    assert len(parts) >= 2
    for position, part in enumerate(parts, 1):
        add(f"sequence-part-{position}-of-{len(parts)}.json", orjson.dumps(part), routed("metadata"))
    lone = split(workload.large(30_000), limit=12_000)
    add("sequence-lone-part.json", orjson.dumps(lone[0]), Expected(("pending",), [], None))
    # two parts at one position (another fragment under another messageId) before the last part:
    # the first holds the position and is released with its sequence, the second moved alone
    contested = split(workload.large(30_000), limit=12_000)
    second = copy.deepcopy(contested[0])
    second["messageBody"] = second["messageBody"][::-1]
    second["messageHeader"]["messageId"] = "5b0e3c1a-9d2f-4e6b-8a7c-1f2e3d4c5b6a"
    add("contested-part-1.json", orjson.dumps(contested[0]), routed("metadata"))
    add("contested-part-1-other-body.json", orjson.dumps(second), rejected("GENERR004"))
    for position, part in enumerate(contested[1:], 2):
        add(f"contested-part-{position}.json", orjson.dumps(part), routed("metadata"))
    # totals no sequence can have: refused by the broker, never waited for
    for name, total, message_id in (
        ("10e30", 10**30, "7c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f"),
        ("2e31", 2**31, "8d2e3f4a-5b6c-4d7e-9f8a-0b1c2d3e4f5a"),
    ):
        impossible = copy.deepcopy(contested[1])
        impossible["messageHeader"]["messageSequence"]["total"] = total
        impossible["messageHeader"]["messageId"] = message_id
        add(f"sequence-total-{name}.json", json.dumps(impossible).encode(), rejected("GENERR004"))
    huge = orjson.dumps(workload.large(1_100_000))
    assert len(huge) > KINESIS_LIMIT
    add("oversize-beyond-kinesis.json", huge, Expected(("refused",), [], "GENERR006"))
    return files


def test_inputs_cover_every_class() -> None:
    """The generator itself: the valid ones are valid (with their optional fields), the rest not."""
    files = inputs()
    names = " ".join(files)
    for kind in (
        "valid-with-errorcode",
        "decorated",
        "broken-copy",
        "not-json",
        "oversize",
        "indented",
        "empty",
        "sequence-part",
        "sequence-lone-part",
        "contested-part",
        "sequence-total",
    ):
        assert kind in names, kind
    for name, (payload, expected) in files.items():
        if expected.outcomes == ("routed",):
            assert validate(payload).valid, name


def test_the_demo_reports_one_outcome_for_every_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "250")  # file names unfolded in the printed table
    files = inputs()
    directory = tmp_path / "messages"
    directory.mkdir()
    for name, (payload, _) in files.items():
        (directory / name).write_bytes(payload)
    report = tmp_path / "report.json"
    code = main(["local", "demo", "--messages", str(directory), "--report", str(report), "--no-analytics"])
    output = capsys.readouterr().out
    assert code == 0, output[-3000:]
    body = orjson.loads(report.read_bytes())
    assert [item["file"] for item in body["inputs"]] == sorted(files)  # one outcome per input, in order
    for item in body["inputs"]:
        files[item["file"]][1].check(item)
    # every record the stream took is on input once; the routed ones on their channels
    taken = [item for item in body["inputs"] if item["outcome"] != "refused"]
    assert body["channels"]["input"] == len(taken)
    assert sum(body["channels"][c] for c in ("invalid", "error")) == sum(
        item["outcome"] in ("invalid", "error") for item in body["inputs"]
    )
    assert "unaccounted" not in output
    assert "1 pending" in output
    assert "valid-[red]-named.json" in output
    # it traced the first message whose records went different ways: the broken copy's header read
    trace = body["trace"]
    assert trace["input"] == "000-broken-first-copy.json"
    assert sorted(r["outcome"] for r in trace["timeline"]["records"]) == ["invalid", "routed"]
