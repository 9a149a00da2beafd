"""Multi-message sequences: split then join is the identity, every part within the limit."""

from __future__ import annotations

import random

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rdss.messages import new_message
from rdss.sequences import Reassembler, SequenceError, join, split
from rdss.validation import validate
from rdss.workload import Workload

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
