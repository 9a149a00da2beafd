"""The classifier's two paths: the valid path (one parse, one ``is_valid`` of the validator
compiled for the message's type and class) and the staged walk that describes a failure. They
must reach the same verdict, and the valid path must do its work once."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rdss.model import schemas, validation
from rdss.model.messages import failure_reply
from rdss.model.sequences import split
from rdss.model.validation import _Classifier, _validator, validate
from rdss.model.workload import Workload, Workload4

# within 64 bits: orjson serialises no wider
_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.integers(0, 40).map(float)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=6,
)
_MESSAGES = [
    *Workload(99).mix(60),
    *split(Workload(98).large(40_000), limit=15_000),
    failure_reply(Workload(97).message("MetadataRead", "Command"), "APPERRMET003", "not held here"),
    failure_reply(Workload(97).message("VocabularyRead", "Command"), "APPERRVOC002", "no such vocabulary"),
]


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            found.extend(_paths(child, (*prefix, key)))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found.extend(_paths(child, (*prefix, index)))
    return found


@st.composite
def mutated_messages(draw: st.DrawFn) -> dict[str, Any]:
    message = copy.deepcopy(draw(st.sampled_from(_MESSAGES)))
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in _paths(message) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent: Any = message
        for step in path[:-1]:
            parent = parent[step]
        action = draw(st.sampled_from(["replace", "delete", "insert", "duplicate"]))
        if action == "delete":
            del parent[path[-1]]
        elif action == "insert" and isinstance(parent, dict):
            parent[draw(st.text(max_size=12))] = draw(_json)
        elif action == "duplicate" and isinstance(parent, list):
            parent.append(copy.deepcopy(parent[path[-1]]))
        else:
            parent[path[-1]] = draw(_json)
    return message


@settings(max_examples=800)
@given(mutated_messages())
def test_the_valid_path_and_the_staged_walk_agree(message: dict[str, Any]):
    payload = orjson.dumps(message)
    verdict = validate(payload, check_expiry=False)
    staged = _Classifier(payload, None, False, 1_000_000).classify(None)
    assert verdict.error_code == staged.error_code
    assert verdict.is_part == staged.is_part


def test_every_supported_pair_has_one_validator_and_classes_share_it():
    compiled = set()
    for message_type in schemas.MESSAGE_TYPES:
        for message_class in schemas.classes_for(message_type):
            whole = _validator(message_type, message_class, False)
            assert whole is not None, (message_type, message_class)
            assert whole is _validator(message_type, message_class, False)  # compiled once
            compiled.add(id(whole))
            # every part, whatever its type, carries a string fragment: one validator for all
            assert _validator(message_type, message_class, True) is schemas.validator(schemas.PART)
    bodies = {schemas.body_schema(t, c) for t in schemas.MESSAGE_TYPES for c in schemas.classes_for(t)}
    assert len(compiled) == len(bodies)
    assert _validator("MetadataRead", "Event", False) is None
    assert _validator("MetadataPatch", "Event", False) is None
    assert _validator(["MetadataCreate"], "Event", False) is None  # unhashable: the walk explains


class _Counting:
    """Stands in for a compiled validator and counts the calls the classifier makes."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.calls: list[str] = []

    def is_valid(self, instance: Any) -> bool:
        self.calls.append("is_valid")
        return bool(self.real.is_valid(instance))

    def iter_errors(self, instance: Any) -> Any:
        self.calls.append("iter_errors")
        return self.real.iter_errors(instance)


@pytest.mark.parametrize(
    ("message_type", "message_class"),
    [(t, c) for t in schemas.MESSAGE_TYPES for c in schemas.classes_for(t)],
)
def test_a_valid_message_costs_one_parse_and_one_is_valid(monkeypatch, message_type: str, message_class: str):
    message = Workload(5).message(message_type, message_class)
    key = (message_type, message_class, False, schemas.V3)
    counting = _Counting(_validator(*key))
    monkeypatch.setitem(validation._VALIDATORS, key, counting)
    parses: list[bytes] = []
    real_loads = orjson.loads
    monkeypatch.setattr(validation.orjson, "loads", lambda data: parses.append(data) or real_loads(data))
    verdict = validate(orjson.dumps(message))
    assert verdict.valid
    assert counting.calls == ["is_valid"]
    assert len(parses) == 1


@pytest.mark.parametrize(
    ("message_type", "message_class"),
    [(t, c) for t in schemas.V4.message_types for c in schemas.V4.classes_for(t)],
)
def test_a_valid_4_0_0_message_costs_one_parse_and_one_is_valid_too(monkeypatch, message_type: str, message_class: str):
    message = Workload4(5).message(message_type, message_class)
    key = (message_type, message_class, False, schemas.V4)
    counting = _Counting(_validator(*key))
    monkeypatch.setitem(validation._VALIDATORS, key, counting)
    verdict = validate(orjson.dumps(message))
    assert (verdict.valid, verdict.version) == (True, "4.0.0")
    assert counting.calls == ["is_valid"]


@pytest.mark.parametrize("message_type", ["MetadataRead", "VocabularyRead"])
def test_a_failure_reply_takes_the_valid_path_with_its_requests_validator(monkeypatch, message_type: str):
    failure = failure_reply(Workload(5).message(message_type, "Command"), "APPERR001", "cannot answer")
    key = (message_type, "Command", False, schemas.V3)  # the request's body, the reply's own header
    counting = _Counting(_validator(*key))
    monkeypatch.setitem(validation._VALIDATORS, key, counting)
    assert validate(orjson.dumps(failure)).valid
    assert counting.calls == ["is_valid"]


def test_an_invalid_message_is_described_by_the_staged_walk(monkeypatch):
    message = Workload(5).message("MetadataDelete", "Event")
    message["messageBody"]["objectUuid"] = "nope"
    key = ("MetadataDelete", "Event", False, schemas.V3)
    counting = _Counting(_validator(*key))
    monkeypatch.setitem(validation._VALIDATORS, key, counting)
    verdict = validate(orjson.dumps(message))
    assert str(verdict.error_code) == "GENERR010"
    assert verdict.error_description.startswith("messageBody.objectUuid:")
    assert counting.calls == ["is_valid"]  # the walk uses the header and body validators


def test_unique_items_follow_json_equality():
    history = Workload(6).message("MetadataDelete", "Event")
    hop = {"machineId": "m1", "machineAddress": "10.0.0.1", "timestamp": "2026-11-21T12:00:00Z"}
    history["messageHeader"]["messageHistory"] = [hop, dict(hop)]
    assert str(validate(orjson.dumps(history), check_expiry=False).error_code) == "GENERR004"
    history["messageHeader"]["messageHistory"] = [hop, {**hop, "machineId": "m2"}]
    assert validate(orjson.dumps(history), check_expiry=False).valid
