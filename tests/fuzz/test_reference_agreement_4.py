"""The classifier against the published 4.0.0 validator, on generated mutations of valid 4.0.0
messages - the 3.0.2 test (test_reference_agreement.py) again, for the version the preservation
side speaks.

The reference is what the 4.0.0 specification's own validator does (rdss.bench.reference:
``jsonschema`` Draft6Validator, a resolver over the published schemas' ``$id``s, a FormatChecker,
the whole-message definition of the message's type). Every verdict must be equal but for the
deliberate differences the 3.0.2 test names, each with its reason - they are the same rules
(sequences, correlation, formats to their RFCs, failure replies, leap seconds), and no other is
allowed here. A mutant whose declared version stops being MAJOR 4 is judged as 3.0.2 and compared
with the 3.0.2 reference.

The published specification is read where it is, found as the 3.0.2 data model is (a directory
named rdss-spec-4.0.0 beside the checkout, or $RDSS_REFERENCE_SCHEMAS_4); when it is nowhere to
be found the test fails, it does not skip.
"""

from __future__ import annotations

import copy
from typing import Any

import orjson
from hypothesis import given, settings

from rdss.model import schemas, skeletons
from rdss.model.messages import failure_reply
from rdss.model.sequences import split
from rdss.model.validation import validate
from rdss.model.workload import Workload4
from tests.fuzz.test_reference_agreement import (
    _MISSING,
    LAXER,
    STRICTER,
    Mutated,
    _changed,
    _disagreement,
    _explained,
    mutated,
)
from tests.support.published import examples_4, reference_4

V4 = schemas.V4.version


def test_the_published_4_0_0_schemas_are_found():
    # separately, so a missing directory reads as such, not as a failed property
    assert reference_4()(orjson.dumps(Workload4(1).message("MetadataDelete", "Event")))


def _seeds() -> list[dict[str, Any]]:
    workload = Workload4(23)
    seeds = [
        workload.message(message_type, message_class)
        for message_type in schemas.V4.message_types
        for message_class in schemas.V4.classes_for(message_type)
    ]
    seeds += [skeletons.skeleton(t, c, version=V4) for t in schemas.V4.message_types for c in schemas.V4.classes_for(t)]
    seeds += [example.message for example in examples_4() if example.valid]
    seeds.append(failure_reply(workload.message("MetadataRead", "Command"), "APPERRMET003", "not held here"))
    seeds += split(workload.large(30_000), limit=12_000)[:2]
    return seeds


SEEDS_4 = _seeds()


def test_the_seeds_are_valid_4_0_0_messages_to_both():
    for seed in SEEDS_4:
        payload = orjson.dumps(seed)
        verdict = validate(payload, check_expiry=False)
        assert (verdict.valid, verdict.version) == (True, V4), verdict.error_description
        if seed["messageHeader"]["messageSequence"]["total"] == 1 and "errorCode" not in seed["messageHeader"]:
            assert reference_4()(payload)


MUTANTS = 10_000


@settings(max_examples=MUTANTS)
@given(mutated(SEEDS_4))
def test_the_classifier_agrees_with_the_published_4_0_0_validator(case: Mutated):
    problem = _disagreement(case.message, V4)
    assert problem is None, f"{problem}\nchanges: {case.changes}"


# -- the named cases, so a difference cannot hide a regression ----------------------------------


def _delete() -> dict[str, Any]:
    return Workload4(31).message("MetadataDelete", "Event")


def _create() -> dict[str, Any]:
    return Workload4(31).message("MetadataCreate", "Event")


def test_each_difference_is_real_in_4_0_0():
    # each difference the 3.0.2 test names, on a 4.0.0 message the two really disagree on - but
    # the top-level member, which the published 4.0.0 whole-message schemas refuse as well
    read = Workload4(31).message("MetadataRead", "Document")
    uuid_ = _delete()["messageBody"]["objectUUID"]
    parts = split(Workload4(31).large(30_000), limit=12_000)
    stricter = {
        "position outside 1..total": _changed(_delete(), ("messageHeader", "messageSequence", "position"), 2),
        "a total no sequence can have": _changed(_delete(), ("messageHeader", "messageSequence", "total"), 10_001),
        "a Document answering a Read without correlationId": _changed(
            read, ("messageHeader", "correlationId"), _MISSING
        ),
        "a sequence part with a body that is not a string": _changed(
            parts[0], ("messageBody",), _create()["messageBody"]
        ),
        "stricter formats": _changed(
            _create(), ("messageBody", "objectPersonRole", 0, "person", "personMail"), "a@b@c"
        ),
        "a pattern and a trailing newline": _changed(_delete(), ("messageBody", "objectUUID"), uuid_ + "\n"),
    }
    laxer = {
        "a sequence part's string body": parts[0],
        "a failure reply's body": failure_reply(
            Workload4(31).message("MetadataRead", "Command"), "APPERRMET003", "not held here"
        ),
        "a leap second": _changed(_create(), ("messageBody", "objectDate", 0, "dateValue"), "2016-12-31T23:59:60Z"),
    }
    assert set(stricter) == {d.name for d in STRICTER} - {"a top-level member besides messageHeader and messageBody"}
    assert set(laxer) == {d.name for d in LAXER}
    for name, message in [*stricter.items(), *laxer.items()]:
        payload = orjson.dumps(message)
        verdict = validate(payload, check_expiry=False)
        assert verdict.version == V4, name
        assert reference_4()(payload) != verdict.valid, name
        assert _explained(LAXER if verdict.valid else STRICTER, message, verdict) == [name]
    extra = _changed(_delete(), ("extra",), 1)
    assert not reference_4()(orjson.dumps(extra))
    assert not validate(orjson.dumps(extra)).valid


def test_both_accept_an_integer_written_with_a_fraction_in_4_0_0():
    # draft 06 counts 1.0 as an integer (3.0.2's draft 04 does not): so do the 4.0.0 schemas
    for path in [
        ("messageHeader", "messageSequence", "position"),
        ("messageHeader", "tenantJiscID"),
        ("messageBody", "objectFile", 0, "fileSize"),
    ]:
        message = copy.deepcopy(_create())
        message["messageBody"]["objectFile"] = [Workload4(3).file(0)]
        parent: Any = message
        for step in path[:-1]:
            parent = parent[step]
        parent[path[-1]] = float(parent[path[-1]])
        payload = orjson.dumps(message)
        assert reference_4()(payload), path
        assert validate(payload).valid, path


def test_a_message_declaring_another_major_version_is_judged_as_3_0_2():
    message = _changed(_delete(), ("messageHeader", "version"), "40.0.0")
    payload = orjson.dumps(message)
    assert reference_4()(payload)  # the published 4.0.0 schemas ask only for a version
    verdict = validate(payload)
    assert (verdict.valid, verdict.version, str(verdict.error_code)) == (False, "3.0.2", "GENERR004")
    assert _disagreement(message, V4) is None  # explained: the 3.0.2 reference refuses it too
