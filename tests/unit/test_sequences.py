"""Multi-message sequences: split then join is the identity, every part within the limit."""

from __future__ import annotations

import copy
import json
import random
import tracemalloc
import uuid

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rdss import MAX_SEQUENCE_PARTS
from rdss.model import history, schemas
from rdss.model.messages import new_message
from rdss.model.sequences import PartConflict, Reassembler, SequenceError, join, same_part, split
from rdss.model.validation import validate
from rdss.model.workload import Workload

# JSON bodies with everything that makes byte counting hard: multi-byte characters, characters
# that need escaping, control characters, quotes and backslashes.
_text = st.text(alphabet=st.characters(codec="utf-8"), max_size=60)
_bodies = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.floats(allow_nan=False, allow_infinity=False) | _text,
    lambda children: st.lists(children, max_size=6) | st.dictionaries(_text, children, max_size=6),
    max_leaves=40,
)


@settings(max_examples=400)
@given(body=_bodies, limit=st.integers(min_value=700, max_value=2500))
def test_split_then_join_is_the_identity(body, limit: int):
    message = new_message("VocabularyPatch", body)
    parts = split(message, limit)
    for part in parts:
        assert len(orjson.dumps(part)) <= limit
    whole = join(parts)
    assert whole["messageBody"] == body
    if len(parts) > 1:
        sequences = {p["messageHeader"]["messageSequence"]["sequence"] for p in parts}
        assert len(sequences) == 1
        assert [p["messageHeader"]["messageSequence"]["position"] for p in parts] == list(range(1, len(parts) + 1))
        assert {p["messageHeader"]["messageSequence"]["total"] for p in parts} == {len(parts)}
        assert len({p["messageHeader"]["messageId"] for p in parts}) == len(parts)


@settings(max_examples=200)
@given(body=_bodies, seed=st.integers(0, 2**32), limit=st.integers(min_value=700, max_value=1500))
def test_the_reassembler_takes_parts_in_any_order_with_duplicates(body, seed: int, limit: int):
    parts = split(new_message("VocabularyPatch", body), limit)
    rng = random.Random(seed)
    delivery = parts + [rng.choice(parts) for _ in range(len(parts) // 2)]
    rng.shuffle(delivery)
    reassembler = Reassembler()
    wholes = [w for w in (reassembler.add(p) for p in delivery) if w is not None]
    assert [w["messageBody"] for w in wholes][:1] == [body]
    # a duplicate arriving after completion starts a new (incomplete) sequence, never a second whole
    assert all(w["messageBody"] == body for w in wholes)


def test_fragments_never_cut_a_character():
    body = {"text": "€" * 5000 + "😀" * 3000}  # 3- and 4-byte characters
    parts = split(new_message("VocabularyPatch", body), 2000)
    assert len(parts) > 10
    for part in parts:
        part["messageBody"].encode("utf-8")  # a cut character would be a lone surrogate or raise
        assert len(orjson.dumps(part)) <= 2000
    assert join(parts)["messageBody"] == body


def test_a_message_that_fits_is_returned_alone():
    message = Workload(1).message("MetadataDelete", "Event")
    assert split(message) == [message]


def test_a_large_real_message_splits_into_valid_parts_and_joins_back():
    big = Workload(2).large(2_600_000)
    parts = split(big)
    assert len(parts) == 3
    for part in parts:
        payload = orjson.dumps(part)
        assert len(payload) <= 1_000_000
        verdict = validate(payload)
        assert verdict.valid
        assert verdict.is_part
    whole = join(reversed(parts))
    assert whole["messageBody"] == big["messageBody"]
    assert whole["messageHeader"]["messageSequence"]["total"] == 1
    assert whole["messageHeader"]["messageId"] == parts[0]["messageHeader"]["messageId"]


def test_parts_keep_the_header_but_take_new_ids():
    big = Workload(3).large(50_000)
    big["messageHeader"]["returnAddress"] = "responses"
    parts = split(big, 20_000)
    for part in parts:
        header = part["messageHeader"]
        assert header["returnAddress"] == "responses"
        assert header["generator"] == big["messageHeader"]["generator"]
        assert header["messageId"] != big["messageHeader"]["messageId"]


def test_position_digits_grow_with_the_number_of_parts():
    body = {"terms": ["x" * 40] * 3000}
    parts = split(new_message("VocabularyPatch", body), 1000)
    assert len(parts) > 100
    assert all(len(orjson.dumps(p)) <= 1000 for p in parts)
    assert join(parts)["messageBody"] == body


def test_a_limit_smaller_than_the_header_is_refused():
    with pytest.raises(ValueError, match="no room"):
        split(Workload(4).large(10_000), limit=300)


def test_join_refuses_incomplete_and_mixed_sequences():
    a = split(Workload(5).large(30_000), 10_000)
    b = split(Workload(6).large(30_000), 10_000)
    with pytest.raises(SequenceError, match="missing positions"):
        join(a[:-1])
    with pytest.raises(SequenceError, match="two sequences"):
        join([a[0], b[1]])
    with pytest.raises(SequenceError, match="no parts"):
        join([])


def test_the_reassembler_reports_and_discards_incomplete_sequences():
    parts = split(Workload(7).large(30_000), 10_000)
    clock = iter([10.0, 20.0])
    reassembler = Reassembler(clock=lambda: next(clock))
    assert reassembler.add(parts[0]) is None
    [waiting] = reassembler.incomplete()
    assert waiting.positions == (1,)
    assert waiting.total == len(parts)
    assert waiting.first_seen == 10.0
    assert reassembler.discard(waiting.sequence) == [parts[0]]
    assert len(reassembler) == 0


def test_the_reassembler_refuses_a_part_that_disagrees_on_total():
    parts = split(Workload(8).large(30_000), 10_000)
    reassembler = Reassembler()
    reassembler.add(parts[0])
    liar = orjson.loads(orjson.dumps(parts[1]))
    liar["messageHeader"]["messageSequence"]["total"] = 99
    with pytest.raises(SequenceError, match="total"):
        reassembler.add(liar)


# -- parts that conflict, totals no sequence can have ----------------------------------------------
def _other_fragment(part: dict, *, message_id: str | None = None) -> dict:
    other = copy.deepcopy(part)
    other["messageBody"] = part["messageBody"][::-1]
    other["messageHeader"]["messageId"] = message_id or str(uuid.uuid4())
    return other


def test_the_first_part_at_a_position_holds_it_and_another_is_refused_alone():
    parts = split(Workload(20).large(30_000), 10_000)
    reassembler = Reassembler()
    assert reassembler.add(parts[0]) is None
    assert reassembler.add(copy.deepcopy(parts[0])) is None  # the same part again: ignored
    with pytest.raises(PartConflict, match=f"held by part {parts[0]['messageHeader']['messageId']}") as refused:
        reassembler.add(_other_fragment(parts[0]))
    assert refused.value.error_code == "GENERR004"
    assert "another fragment" in str(refused.value)
    same_fragment = copy.deepcopy(parts[0])
    same_fragment["messageHeader"]["messageId"] = str(uuid.uuid4())
    with pytest.raises(PartConflict, match="the same fragment under another messageId"):
        reassembler.add(same_fragment)
    wholes = [reassembler.add(part) for part in parts[1:]]  # the sequence went on without them
    assert wholes[-1] is not None
    assert wholes[-1]["messageBody"] == join(parts)["messageBody"]


def test_the_same_part_with_hops_added_is_the_same_part():
    parts = split(Workload(21).large(30_000), 10_000)
    hopped = orjson.loads(history.append(orjson.dumps(parts[0]), history.hop("broker")))
    assert same_part(parts[0], hopped)
    assert not same_part(parts[0], _other_fragment(parts[0], message_id=parts[0]["messageHeader"]["messageId"]))
    assert join([parts[0], hopped, *parts[1:]])["messageBody"] == join(parts)["messageBody"]


def test_join_refuses_two_different_parts_at_one_position():
    parts = split(Workload(22).large(30_000), 10_000)
    with pytest.raises(PartConflict, match="position 1 of sequence"):
        join([parts[0], _other_fragment(parts[0]), *parts[1:]])


def test_a_part_with_another_total_is_refused_and_its_sequence_goes_on():
    parts = split(Workload(23).large(30_000), 10_000)
    reassembler = Reassembler()
    reassembler.add(parts[0])
    liar = copy.deepcopy(parts[1])
    liar["messageHeader"]["messageSequence"]["total"] = 99
    with pytest.raises(PartConflict, match=f"has {len(parts)} parts \\(its first part said so\\); this part says 99"):
        reassembler.add(liar)
    assert [reassembler.add(p) is not None for p in parts[1:]][-1]


@pytest.mark.parametrize("total", [MAX_SEQUENCE_PARTS + 1, 2**31, 10**8, 10**30])
def test_a_total_no_sequence_can_have_is_refused_without_counting_to_it(total: int):
    part = split(Workload(24).large(30_000), 10_000)[0]
    part["messageHeader"]["messageSequence"]["total"] = total
    tracemalloc.start()
    try:
        with pytest.raises(PartConflict, match="a sequence has 1 to 10,000"):
            join([part])
        with pytest.raises(PartConflict, match="a sequence has 1 to 10,000"):
            Reassembler().add(part)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000  # nothing per position the total names
    verdict = validate(json.dumps(part))
    assert verdict.error_code == "GENERR004"
    assert verdict.error_description == (
        f"messageHeader.messageSequence.total: {total} parts is more than a sequence may have (at most 10,000: "
        "no sequence that long could be held whole to be reassembled)"
    )


def test_the_largest_total_is_a_sequence_and_its_missing_positions_are_named_from_the_gaps():
    part = split(Workload(25).large(30_000), 10_000)[0]
    part["messageHeader"]["messageSequence"]["total"] = MAX_SEQUENCE_PARTS
    assert validate(orjson.dumps(part)).valid
    with pytest.raises(SequenceError, match=r"missing positions \[2, 3, 4, 5, 6, 7, 8, 9, 10, 11\] of 10000"):
        join([part])
    last = copy.deepcopy(part)
    last["messageHeader"]["messageSequence"]["position"] = 3
    with pytest.raises(SequenceError, match=r"missing positions \[2, 4, 5, 6, 7, 8, 9, 10, 11, 12\] of 10000"):
        join([last, part])


def test_the_schemas_maximum_total_is_the_packages():
    total = schemas.documents()["message/header.json"]["$defs"]["messageSequence"]["properties"]["total"]
    assert total["maximum"] == MAX_SEQUENCE_PARTS


def test_split_refuses_a_message_that_would_take_more_parts_than_a_sequence_may_have(monkeypatch):
    # the bound lowered, so that it is reached without a 10 GB message
    monkeypatch.setattr("rdss.model.sequences.MAX_SEQUENCE_PARTS", 5)
    with pytest.raises(ValueError, match=r"would take [0-9]+ parts; a sequence has at most 5"):
        split(new_message("VocabularyPatch", {"terms": ["x" * 40] * 300}), 700)
