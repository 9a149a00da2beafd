"""The one walker of a JSON object's members that decoration and messageHistory edit through."""

from __future__ import annotations

import json

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rdss.model import jsontext

_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)


@given(
    st.dictionaries(st.text(max_size=6), _values, max_size=5),
    st.sampled_from([None, 2]),
    st.booleans(),
)
def test_each_member_lies_where_it_says_in_any_layout(obj: dict[str, object], indent: int | None, ascii_: bool):
    text = " \n" + json.dumps(obj, indent=indent, ensure_ascii=ascii_) + " "
    found = list(jsontext.members(text))
    assert [m.name for m in found] == list(obj)
    for member in found:
        assert json.JSONDecoder().raw_decode(text, member.name_start)[0] == member.name
        assert json.loads(text[member.value_start : member.value_end]) == member.value == obj[member.name]


def test_the_last_of_a_name_is_kept_even_when_spelled_with_an_escape():
    text = '{"h": 1, "b": [2], "\\u0068": {"x": 3}}'
    member = jsontext.last_member(text, "h")
    assert member is not None
    assert member.value == {"x": 3} == orjson.loads(text)["h"]
    assert jsontext.last_member('{"h": 1} trailing', "h") == (  # the object ends the walk
        jsontext.Member("h", 1, 6, 7, 1)
    )
    assert jsontext.last_member('{"b": 1}', "h") is None


@pytest.mark.parametrize(
    "text",
    [
        "",
        "  ",
        "[1]",
        '{"a" 1}',
        '{"a": 1',
        '{"a": 1 "b": 2}',
        '{"a": }',
        "{a: 1}",
        '{"a":' + "[" * 1100 + "]" * 1100 + "}",
    ],
)
def test_what_is_not_an_object_or_is_too_deep_to_walk_is_a_value_error(text: str):
    with pytest.raises(ValueError):
        list(jsontext.members(text))


def test_byte_offsets_count_utf8_bytes():
    text = '{"é": "ü", "a": 1}'
    member = jsontext.last_member(text, "a")
    assert member is not None
    data = text.encode()
    assert data[jsontext.byte_offset(text, member.value_start) : jsontext.byte_offset(text, member.value_end)] == b"1"
