"""The one JSON-text walker (rdss.model.jsontext) that decoration and messageHistory change bytes
in place with: every member's spans hold exactly its name and value, whatever the spacing, the
characters or the nesting; a duplicate name resolves to the last, as parsers keep it; anything
but a well-formed object is refused, never misread."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rdss.model import jsontext

values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)
layouts = st.sampled_from([{"separators": (",", ":")}, {"indent": 2}, {"separators": (" , ", " : ")}])


@given(st.lists(st.tuples(st.text(max_size=6), values), max_size=6), layouts, st.booleans())
def test_every_member_s_spans_hold_its_name_and_value(pairs, layout, ascii_only):
    # members written one by one, so names may repeat as a producer may repeat them
    dumps = lambda v: json.dumps(v, ensure_ascii=ascii_only, **layout)  # noqa: E731
    text = " { " + " , ".join(f"{dumps(name)} : {dumps(value)}" for name, value in pairs) + " } "
    found = list(jsontext.members(text, jsontext.skip(text, 0)))
    assert [(m.name, m.value) for m in found] == pairs
    for member in found:
        assert json.loads(text[member.start : member.end]) == member.value
        assert text[member.name_start] == '"'
        assert json.loads(text[member.name_start : text.index(":", member.name_start + len(dumps(member.name)))]) == (
            member.name
        )
        encoded = text.encode("utf-8")
        assert encoded[jsontext.byte_offset(text, member.start) :].decode("utf-8") == text[member.start :]
    for name in {name for name, _ in pairs}:
        last = [value for n, value in pairs if n == name][-1]
        for whole in (True, False):
            member = jsontext.top_level(text, name, whole=whole)
            assert member is not None
            assert member.value == last


@pytest.mark.parametrize("text", ["", "[]", "{", '{"a" 1}', '{"a":1,}', '{"a":1 "b":2}', "{a:1}", '{"a":}'])
def test_anything_but_a_well_formed_object_is_refused(text):
    with pytest.raises((ValueError, IndexError)):
        jsontext.top_level(text, "a", whole=True)


def test_stopping_early_reads_no_further_than_the_last_occurrence_of_the_name():
    # what follows the header is not parsed when the name does not come again
    text = '{"messageHeader":{"a":1},"messageBody":{"x":'
    member = jsontext.top_level(text, "messageHeader", whole=False)
    assert member is not None
    assert member.value == {"a": 1}
    with pytest.raises((ValueError, IndexError)):
        jsontext.top_level(text, "messageHeader", whole=True)


def test_a_duplicate_spelt_with_an_escape_is_still_the_one_kept():
    text = '{"messageHeader":{"a":1},"messageHead\\u0065r":{"a":2},"messageBody":{}}'
    assert json.loads(text)["messageHeader"] == {"a": 2}
    for whole in (True, False):
        member = jsontext.top_level(text, "messageHeader", whole=whole)
        assert member is not None
        assert member.value == {"a": 2}
