"""The classifier against the reference validator, on generated mutations of valid messages.

The reference is what every consumer of the published RDSS 3.0.2 schemas runs: ``jsonschema``'s
Draft4Validator with its FormatChecker over the published (draft-04) schemas
(:mod:`rdss.bench.reference`). Where the reference rejects a message the classifier must reject
it too - else the broker routes what consumers refuse - and where the reference accepts one the
classifier must accept it, except for the deliberate differences named below, each with its
reason. A disagreement nothing below explains fails the test.

The classifier judges a message by the version its header declares (MAJOR 4: 4.0.0, else
3.0.2). A mutation that changes the declared version (3.0.2 to 4.1.0, 4.0.0 to 40.0.0) moves the
message to the other version's rules; it is then compared with that version's reference and its
differences (``_disagreement``), as the 4.0.0 test (test_reference_agreement_4.py) does with the
same machinery.

The published schemas are read where they are (never copied into the project); when they are
nowhere to be found the test fails, it does not skip.
"""

from __future__ import annotations

import copy
import functools
import json
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jsonschema
import jsonschema_rs
import orjson
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from rdss.bench.reference import candidate_locations, default_location, reference_validator
from rdss.model import schemas
from rdss.model.messages import failure_reply
from rdss.model.sequences import split
from rdss.model.validation import Verdict, validate
from rdss.model.workload import Workload
from tests.conftest import valid_examples
from tests.support.published import reference_4

# -- the reference ------------------------------------------------------------------------------


@functools.cache
def reference() -> Callable[[bytes], bool]:
    location = default_location()
    if location is None:
        searched = ", ".join(str(path) for path in candidate_locations())
        pytest.fail(
            f"the published RDSS 3.0.2 schemas are not in any of: {searched}; "
            "set RDSS_REFERENCE_SCHEMAS to the rdss-spec-3.0.2 directory",
            pytrace=False,
        )
    return reference_validator(location)


def _reference_of(version: str) -> Callable[[bytes], bool]:
    """The reference of the version a verdict was judged against."""
    return reference_4() if version == schemas.V4.version else reference()


def test_the_published_schemas_are_found():
    # separately, so a missing directory reads as such, not as a failed property
    assert reference()(_dumps(Workload(1).message("MetadataDelete", "Event")))


# -- deliberate differences ---------------------------------------------------------------------
# Each explains a disagreement on one message: a STRICTER one a message the classifier rejects
# and the reference accepts (checked against the fault the classifier names), a LAXER one the
# other way round (checked by undoing it: the reference must then accept).


@dataclass(frozen=True)
class Difference:
    name: str
    reason: str
    applies: Callable[[dict[str, Any], Verdict], bool]


def _header(message: dict[str, Any]) -> dict[str, Any]:
    header = message.get("messageHeader")
    return header if isinstance(header, dict) else {}


def _total(message: dict[str, Any]) -> Any:
    sequence = _header(message).get("messageSequence")
    return sequence.get("total") if isinstance(sequence, dict) else None


def _is_part(message: dict[str, Any]) -> bool:
    # 4.0.0 (draft 06) counts 2.0 as an integer, 3.0.2 (draft 04) does not: the header stage
    # refuses a 3.0.2 message with such a total before its body is looked at
    total = _total(message)
    return type(total) in (int, float) and total > 1 and float(total).is_integer()


def _names(verdict: Verdict, *prefixes: str) -> bool:
    """The classifier's description starts with one of ``prefixes`` (the field and the rule)."""
    return (verdict.error_description or "").startswith(prefixes)


_MISSING = object()


def _faulty_value(message: dict[str, Any], verdict: Verdict) -> Any:
    """The value at the path the classifier's description starts with (``messageBody.a[0].b: ...``)."""
    path = (verdict.error_description or "").split(":", 1)[0]
    value: Any = message
    for step in re.findall(r"[^.\[\]]+|\[\d+\]", path):
        try:
            value = value[int(step[1:-1])] if step.startswith("[") else value[step]
        except (KeyError, IndexError, TypeError, ValueError):
            return _MISSING
    return value


@functools.cache
def _project_format(name: str) -> jsonschema_rs.Validator:
    return jsonschema_rs.Draft202012Validator({"format": name}, validate_formats=True)


_FORMAT_FAULT = re.compile(r' is not a "([a-z0-9-]+)"$')


def _format_stricter(message: dict[str, Any], verdict: Verdict) -> bool:
    # the classifier names a format fault on a string the reference's FormatChecker accepts
    # as that format (for an address: as a host name, IPv4 or IPv6 address)
    description = verdict.error_description or ""
    match = _FORMAT_FAULT.search(description)
    if match:
        formats: tuple[str, ...] = (match.group(1),)
    elif description.endswith("is not a date-time (RFC 3339: date, time and zone)"):
        formats = ("date-time",)
    elif description.endswith("is not a host name, IPv4 or IPv6 address"):
        formats = ("hostname", "ipv4", "ipv6")
    else:
        return False
    value = _faulty_value(message, verdict)
    checker = jsonschema.Draft4Validator.FORMAT_CHECKER
    return (
        isinstance(value, str)
        and any(checker.conforms(value, name) for name in formats)
        and not any(_project_format(name).is_valid(value) for name in formats)
    )


def _trailing_newline(message: dict[str, Any], verdict: Verdict) -> bool:
    value = _faulty_value(message, verdict)
    return _names(verdict, "messageHeader", "messageBody") and isinstance(value, str) and value.endswith("\n")


def _map_strings(value: Any, change: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return change(value)
    if isinstance(value, dict):
        return {key: _map_strings(child, change) for key, child in value.items()}
    if isinstance(value, list):
        return [_map_strings(child, change) for child in value]
    return value


_LEAP_SECOND = re.compile(r"^(\d{4}-\d\d-\d\d[Tt]\d\d:\d\d:)60(?=[.Zz+-])")


def _failure_reply(message: dict[str, Any], verdict: Verdict) -> bool:
    # undone: as the request it answers (a Command), the reference accepts it
    header = _header(message)
    if not (header.get("messageClass") == "Document" and header.get("errorCode") and header.get("correlationId")):
        return False
    as_request = {**message, "messageHeader": {**header, "messageClass": "Command"}}
    return _reference_of(verdict.version)(_dumps(as_request))


def _leap_second(message: dict[str, Any], verdict: Verdict) -> bool:
    undone = _map_strings(message, lambda text: _LEAP_SECOND.sub(r"\g<1>59", text))
    return undone != message and _reference_of(verdict.version)(_dumps(undone))


STRICTER = (
    Difference(
        "position outside 1..total",
        "the spec numbers a sequence's parts 1..total (ARCHITECTURE: a header fault, GENERR004); the "
        "published header only asks for integers",
        lambda message, verdict: (
            _names(verdict, "messageHeader.messageSequence.position:", "messageHeader.messageSequence.total:")
            and (
                "outside 1..total" in verdict.error_description or "less than the minimum" in verdict.error_description
            )
        ),
    ),
    Difference(
        "a total no sequence can have",
        "a sequence of more than 10,000 parts (rdss.MAX_SEQUENCE_PARTS; 10 GB of full parts) could never "
        "be held whole to be reassembled, so none is waited for (GENERR004); the published header sets "
        "no maximum",
        lambda message, verdict: (
            _names(verdict, "messageHeader.messageSequence.total:")
            and "is more than a sequence may have" in (verdict.error_description or "")
        ),
    ),
    Difference(
        "a Document answering a Read without correlationId",
        "the spec: a response carries the messageId of the request it answers; the published header "
        "cannot state a rule over two fields",
        lambda message, verdict: _names(verdict, "messageHeader.correlationId: required"),
    ),
    Difference(
        "a top-level member besides messageHeader and messageBody",
        "the spec's message is a header and a body; the published schemas describe no envelope",
        lambda message, verdict: _names(verdict, "message: unexpected member"),
    ),
    Difference(
        "a sequence part with a body that is not a string",
        "a part carries a string fragment of the body's JSON text (spec, Multi-Message Sequence)",
        lambda message, verdict: _is_part(message) and _names(verdict, "messageBody: a JSON"),
    ),
    Difference(
        "stricter formats",
        "the classifier checks formats to their RFCs (jsonschema-rs); the reference FormatChecker is "
        "laxer on some (an e-mail address only needs an @)",
        _format_stricter,
    ),
    Difference(
        "a pattern and a trailing newline",
        "JSON Schema patterns are ECMA-262, where $ ends the string; the reference's Python re also "
        "lets $ match before a final newline",
        _trailing_newline,
    ),
)

LAXER = (
    Difference(
        "a sequence part's string body",
        "a part carries a string fragment of the body's JSON text (spec, Multi-Message Sequence); the "
        "whole body is validated once reassembled",
        lambda message, verdict: _is_part(message) and isinstance(message.get("messageBody"), str),
    ),
    Difference(
        "a failure reply's body",
        "a Document answering a Read with an errorCode carries the body of the request it could not "
        "answer (rdss.model.messages.failure_reply), checked as the request's; the published schemas know "
        "only the response body",
        _failure_reply,
    ),
    Difference(
        "a leap second",
        "RFC 3339 allows second 60 (the project reads it, rdss.model.timestamps); "
        "the reference's rfc3339-validator does not",
        _leap_second,
    ),
)


def _explained(differences: tuple[Difference, ...], message: dict[str, Any], verdict: Verdict) -> list[str]:
    return [d.name for d in differences if d.applies(message, verdict)]


# -- generated mutations ------------------------------------------------------------------------


def _seeds() -> list[dict[str, Any]]:
    workload = Workload(23)
    seeds = [
        workload.message(message_type, message_class)
        for message_type in schemas.MESSAGE_TYPES
        for message_class in schemas.classes_for(message_type)
    ]
    seeds += [orjson.loads(path.read_bytes()) for path in valid_examples()]
    for message_type in ("MetadataRead", "VocabularyRead"):
        seeds.append(failure_reply(workload.message(message_type, "Command"), "APPERR001", "cannot answer"))
    seeds += split(workload.large(30_000), limit=12_000)[:2]
    return seeds


SEEDS = _seeds()

_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
_scalar = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.integers(-3, 40)
    | st.integers(-3, 40).map(float)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _text
    | st.sampled_from(["", "x", "Event", "Document", "MetadataRead", "GENERR001", str(uuid.uuid4())])
)
_json = st.recursive(
    _scalar,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(_text, children, max_size=3),
    max_leaves=5,
)
_members = st.sampled_from(
    ["errorCode", "errorDescription", "correlationId", "returnAddress", "messageHistory", "expirationTimestamp", "zz"]
)
# characters that matter to UUIDs, timestamps, versions, addresses and URIs
_edit_chars = st.sampled_from(list("0123456789abcdefABCDEF-:.TtZz+@/ _#?%[]\n"))


def _paths(value: Any, prefix: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            found.extend(_paths(child, (*prefix, key)))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found.extend(_paths(child, (*prefix, index)))
    return found


def _edit(draw: st.DrawFn, text: str) -> str:
    chars = list(text)
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["delete", "replace", "insert", "upper", "append"]))
        position = draw(st.integers(0, max(len(chars) - 1, 0)))
        if kind == "delete" and chars:
            del chars[position]
        elif kind == "replace" and chars:
            chars[position] = draw(_edit_chars)
        elif kind == "upper":
            chars = list("".join(chars).upper())
        elif kind == "append":
            chars.append(draw(_edit_chars))
        else:
            chars.insert(position, draw(_edit_chars))
    return "".join(chars)


def _same_kind(value: Any) -> st.SearchStrategy[Any]:
    """Values of the kind already there: what a careless producer would write."""
    if isinstance(value, str):
        return _text | st.sampled_from(["", "x", "Event", "Document", "MetadataRead", "GENERR001", str(uuid.uuid4())])
    if isinstance(value, bool):
        return st.booleans()
    if isinstance(value, int):
        return st.sampled_from([float(value), value + 1, value - 1, 0, -1, 1, 2**63 - 1]) | st.integers(-3, 40)
    return _json


@dataclass
class Mutated:
    message: dict[str, Any]
    changes: list[str]


@st.composite
def mutated(draw: st.DrawFn, seeds: list[dict[str, Any]] | None = None) -> Mutated:
    """A valid message (one of ``seeds``, by default :data:`SEEDS`) with one to three changes: a
    string edited, a number moved or written with a fraction, a value replaced, a member deleted
    or added, a list item duplicated."""
    message = copy.deepcopy(draw(st.sampled_from(SEEDS if seeds is None else seeds)))
    changes: list[str] = []
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(_paths(message)))
        target: Any = message
        for step in path:
            target = target[step]
        action = draw(st.sampled_from(["edit", "edit", "same", "same", "any", "delete", "insert", "duplicate"]))
        if action == "insert" and isinstance(target, dict):
            member = draw(_members)
            target[member] = draw(_json | _text.filter(bool))
            changes.append(f"{_dotted(path)}: added {member} = {target[member]!r}")
            continue
        if action == "duplicate" and isinstance(target, list) and target:
            target.append(copy.deepcopy(target[0]))
            changes.append(f"{_dotted(path)}: first item duplicated")
            continue
        if not path:
            continue
        parent: Any = message
        for step in path[:-1]:
            parent = parent[step]
        key = path[-1]
        if action == "delete":
            del parent[key]
            changes.append(f"{_dotted(path)}: deleted")
            continue
        if action == "edit" and isinstance(target, str):
            parent[key] = _edit(draw, target)
        elif action in ("edit", "same"):
            parent[key] = draw(_same_kind(target))
        else:
            parent[key] = draw(_json)
        changes.append(f"{_dotted(path)}: {target!r} -> {parent[key]!r}")
    return Mutated(message, changes)


def _dotted(path: tuple[str | int, ...]) -> str:
    return "".join(f"[{step}]" if isinstance(step, int) else f".{step}" for step in path) or "(top)"


# -- the property -------------------------------------------------------------------------------


def _count(outcome: str) -> None:
    """Tallied by ``pytest --hypothesis-show-statistics``: how often each outcome was met."""
    if currently_in_test_context():
        event(outcome)


def _dumps(message: Any) -> bytes:
    """The mutant's JSON text: orjson's, or the standard library's for an integer beyond 64 bits
    (a mutation may draw one; the classifier reads such numbers exactly)."""
    try:
        return orjson.dumps(message)
    except TypeError:
        return json.dumps(message, ensure_ascii=False).encode()


def _disagreement(message: dict[str, Any], version: str = schemas.V3.version) -> str | None:
    """None when the classifier and the reference of ``version`` agree, or disagree as a named
    difference explains; else what happened. A message the classifier judged against the other
    version (its declared version says so) is compared with that version's reference."""
    payload = _dumps(message)
    verdict = validate(payload, check_expiry=False, size_limit=None)
    if verdict.version != version:
        _count(f"judged as declared: {verdict.version}")
        return _disagreement(message, verdict.version)
    expected = _reference_of(version)(payload)
    if expected == verdict.valid:
        _count(f"agree: {verdict.error_code or 'valid'}")
        return None
    if verdict.valid:  # the reference rejects what the classifier would route
        for name in _explained(LAXER, message, verdict):
            _count(f"laxer: {name}")
            return None
        return f"the reference rejects, the classifier accepts: {payload[:300]!r}"
    for name in _explained(STRICTER, message, verdict):
        _count(f"stricter: {name}")
        return None
    return (
        f"the reference accepts, the classifier says {verdict.error_code}: {verdict.error_description}; "
        f"{payload[:300]!r}"
    )


#: As many mutants as the 4.0.0 test draws (test_reference_agreement_4.MUTANTS): a disagreement
#: shows within a few hundred, the rest is the breadth a fuzz test is for.
MUTANTS = 10_000


@settings(max_examples=MUTANTS)
@given(mutated())
def test_the_classifier_agrees_with_the_reference_validator(case: Mutated):
    problem = _disagreement(case.message)
    assert problem is None, f"{problem}\nchanges: {case.changes}"


# -- the named cases, so a difference above cannot hide a regression ----------------------------


def _delete() -> dict[str, Any]:
    return Workload(31).message("MetadataDelete", "Event")


def _create() -> dict[str, Any]:
    return Workload(31).message("MetadataCreate", "Event")


def test_both_reject_an_integer_written_with_a_fraction():
    for message, path in [
        (_delete(), ("messageHeader", "messageSequence", "position")),
        (_create(), ("messageBody", "objectResourceType")),
        (_create(), ("messageBody", "objectFile", 0, "fileSize")),
    ]:
        parent: Any = message
        for step in path[:-1]:
            parent = parent[step]
        parent[path[-1]] = float(parent[path[-1]])
        payload = _dumps(message)
        assert not reference()(payload), path
        assert not validate(payload).valid, path
        assert _disagreement(message) is None


def test_both_accept_any_non_empty_error_code():
    message = _delete()
    message["messageHeader"].update(errorCode="E42", errorDescription="from elsewhere")
    payload = _dumps(message)
    assert reference()(payload)
    assert validate(payload).valid


def _changed(message: dict[str, Any], path: tuple[str | int, ...], value: Any) -> dict[str, Any]:
    changed = copy.deepcopy(message)
    parent: Any = changed
    for step in path[:-1]:
        parent = parent[step]
    if value is _MISSING:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return changed


def test_each_difference_is_real():
    # each named difference on a message the two really disagree on, and nothing else
    read = Workload(31).message("MetadataRead", "Document")
    uuid_ = _delete()["messageBody"]["objectUuid"]
    stricter = {
        "position outside 1..total": _changed(_delete(), ("messageHeader", "messageSequence", "position"), 2),
        "a total no sequence can have": _changed(_delete(), ("messageHeader", "messageSequence", "total"), 10_001),
        "a Document answering a Read without correlationId": _changed(
            read, ("messageHeader", "correlationId"), _MISSING
        ),
        "a top-level member besides messageHeader and messageBody": _changed(_delete(), ("extra",), 1),
        "a sequence part with a body that is not a string": _changed(
            SEEDS[-1], ("messageBody",), _create()["messageBody"]
        ),
        "stricter formats": _changed(
            _create(), ("messageBody", "objectPersonRole", 0, "person", "personMail"), "a@b@c"
        ),
        "a pattern and a trailing newline": _changed(_delete(), ("messageBody", "objectUuid"), uuid_ + "\n"),
    }
    laxer = {
        "a sequence part's string body": SEEDS[-1],
        "a failure reply's body": failure_reply(
            Workload(31).message("MetadataRead", "Command"), "APPERRMET003", "not held here"
        ),
        "a leap second": _changed(_create(), ("messageBody", "objectDate", 0, "dateValue"), "2016-12-31T23:59:60Z"),
    }
    assert set(stricter) == {d.name for d in STRICTER}
    assert set(laxer) == {d.name for d in LAXER}
    for name, message in [*stricter.items(), *laxer.items()]:
        payload = _dumps(message)
        verdict = validate(payload, check_expiry=False)
        assert reference()(payload) != verdict.valid, name
        assert _explained(LAXER if verdict.valid else STRICTER, message, verdict) == [name]


def test_a_message_declaring_major_4_is_judged_as_4_0_0():
    # the published 3.0.2 header asks only for a semantic version, so its reference accepts a
    # 3.0.2 message declaring 4.1.0; the classifier judges it by the version it declares, and
    # the 4.0.0 reference refuses it too (no tenantJiscID, objectUuid where 4.0.0 has objectUUID)
    message = _changed(_delete(), ("messageHeader", "version"), "4.1.0")
    payload = _dumps(message)
    assert reference()(payload)
    verdict = validate(payload)
    assert (verdict.valid, verdict.version) == (False, "4.0.0")
    assert not reference_4()(payload)
    assert _disagreement(message) is None
