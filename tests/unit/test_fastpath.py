"""The C fast path is an optimisation, never a second opinion: it may defer a valid message to
the reference engine (jsonschema-rs), but it must never accept one the reference rejects."""

from __future__ import annotations

import copy
import uuid
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rdss import fastpath, schemas
from rdss.validation import _Classifier, _plan, validate
from tools.workload import Workload

pytestmark = pytest.mark.skipif(not fastpath.available(), reason="the C extension is not built")


def _reference(check: str):
    refs = {
        "uuid": {"$ref": schemas.uri("model/types.json#/$defs/uuid")},
        "semver": {"$ref": schemas.uri("model/types.json#/$defs/semVer")},
        "date-time": {"type": "string", "format": "date-time"},
        "email": {"type": "string", "format": "email"},
        "uri": {"type": "string", "format": "uri"},
        "hostname": {"type": "string", "format": "hostname"},
        "ipv4": {"type": "string", "format": "ipv4"},
        "ipv6": {"type": "string", "format": "ipv6"},
    }
    return schemas._compile(refs[check])


REFERENCE = {name: _reference(name) for name in fastpath.CHECKS}


def _near(valid: list[str], alphabet: str) -> st.SearchStrategy[str]:
    """Strings close to valid ones (edits drawn from a relevant alphabet) and arbitrary ones."""
    edit = st.tuples(
        st.sampled_from(valid), st.lists(st.tuples(st.integers(0, 80), st.sampled_from(alphabet + "")), max_size=4)
    )

    def apply(item: tuple[str, list[tuple[int, str]]]) -> str:
        text, edits = item
        chars = list(text)
        for position, char in edits:
            if chars and position % 3 == 0:
                del chars[position % len(chars)]
            elif chars and position % 3 == 1:
                chars[position % len(chars)] = char
            else:
                chars.insert(position % (len(chars) + 1), char)
        return "".join(chars)

    return st.one_of(edit.map(apply), st.text(alphabet=alphabet, max_size=40), st.text(max_size=20))


SAMPLES = {
    "uuid": (
        [str(uuid.uuid4()), str(uuid.uuid1()), "6ba7b810-9dad-51d1-80b4-00c04fd430c8"],
        "0123456789abcdefABCDEF-g",
    ),
    "semver": (["3.0.2", "10.20.30", "1.0.0-rc.1+build.5", "0.0.0-alpha-1"], "0123456789.-+abcXYZ"),
    "date-time": (
        ["2026-11-21T12:00:00Z", "2024-02-29T23:59:59.123+05:30", "2026-11-21t12:00:00.5z"],
        "0123456789-:TtZz.+ ",
    ),
    "email": (["ada.lovelace@example.ac.uk", "a+b@x.org", "first_last@sub.domain.example"], 'abc.@-_+!#~"() []\\0'),
    "uri": (
        [
            "https://repo.example.ac.uk/files/a%20b?x=1#top",
            "s3://bucket/key",
            "urn:isbn:0451450523",
            "http://u:p@h:8080/",
        ],
        "abc:/?#[]@!$&'()*+,;=%-._~ 019",
    ),
    "hostname": (["repo.example.ac.uk", "localhost", "a-b.c-d.example"], "abc.-_09 "),
    "ipv4": (["192.0.2.17", "10.0.0.1", "255.255.255.255"], "0123456789."),
}


@pytest.mark.parametrize("check", sorted(SAMPLES))
def test_string_checks_accept_the_common_forms(check: str):
    for sample in SAMPLES[check][0]:
        assert fastpath.check_string(check, sample), sample
        assert REFERENCE[check].is_valid(sample), sample


@pytest.mark.parametrize("check", sorted(SAMPLES))
def test_string_checks_never_accept_what_the_reference_rejects(check: str):
    valid, alphabet = SAMPLES[check]

    @settings(max_examples=800)
    @given(_near(valid, alphabet))
    def conservative(text: str) -> None:
        if fastpath.check_string(check, text):
            assert REFERENCE[check].is_valid(text), repr(text)

    conservative()


def test_ipv6_and_leap_seconds_are_deferred_not_rejected():
    assert not fastpath.check_string("ipv6", "2001:db8::1")
    assert REFERENCE["ipv6"].is_valid("2001:db8::1")
    assert not fastpath.check_string("date-time", "2016-12-31T23:59:60Z")
    assert REFERENCE["date-time"].is_valid("2016-12-31T23:59:60Z")


# -- whole messages ---------------------------------------------------------------------------
# within 64 bits: orjson serialises no wider (and parses wider integers as floats)
_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=6,
)
_MESSAGES = list(Workload(99).mix(60))


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    found = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            found.extend(_paths(child, (*prefix, key)))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found.extend(_paths(child, (*prefix, index)))
    return found


@st.composite
def mutated_messages(draw) -> dict:
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


@settings(max_examples=1500)
@given(mutated_messages())
def test_the_fast_path_never_accepts_what_the_reference_rejects(message: dict):
    header = message.get("messageHeader")
    if not isinstance(header, dict):
        return
    sequence = header.get("messageSequence")
    total = sequence.get("total") if isinstance(sequence, dict) else None
    try:
        plan = _plan(header.get("messageType"), header.get("messageClass"), total != 1)
    except TypeError:
        return
    if plan is None or plan[0] is None:
        return
    fast, reference = plan
    if fast.is_valid(message):
        assert reference.is_valid(message)


@settings(max_examples=800)
@given(mutated_messages())
def test_the_fast_path_and_the_staged_walk_agree(message: dict):
    payload = orjson.dumps(message)
    fast = validate(payload, check_expiry=False)
    staged = _Classifier(payload, None, False, 1_000_000).classify(None)
    assert fast.error_code == staged.error_code
    assert fast.is_part == staged.is_part


def test_every_plan_compiles_to_the_fast_path():
    for message_type in schemas.MESSAGE_TYPES:
        for message_class in schemas.classes_for(message_type):
            for part in (False, True):
                plan = _plan(message_type, message_class, part)
                assert plan is not None, (message_type, message_class, part)
                assert plan[0] is not None, (message_type, message_class, part)


def test_unsupported_keywords_leave_the_reference_alone():
    assert fastpath.compile_checker({"type": "string", "pattern": "^x+$"}) is None
    assert fastpath.compile_checker({"type": "object", "propertyNames": {"maxLength": 3}}) is None
    assert fastpath.compile_checker({"type": "number", "minimum": 0.5}) is None


def test_unique_items_follow_json_equality():
    checker = fastpath.compile_checker({"type": "array", "uniqueItems": True})
    assert checker is not None
    assert not checker.is_valid([1, 1.0])
    assert checker.is_valid([1, True])
    assert checker.is_valid([0, False, None, "", [], {}])
    assert not checker.is_valid([{"a": [1, {"b": 2}]}, {"a": [1, {"b": 2.0}]}])
    many = [{"n": i} for i in range(100)]
    assert checker.is_valid(many)
    assert not checker.is_valid([*many, {"n": 50}])
