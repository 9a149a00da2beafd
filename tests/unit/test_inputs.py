"""Reading a message file: :func:`rdss.host.inputs.ndjson` tells one message from newline-delimited
JSON whatever the bytes, and leaves judging them to the classifier."""

from __future__ import annotations

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from rdss.host.inputs import ndjson


def nested(depth: int, opening: bytes, closing: bytes, inner: bytes = b"1") -> bytes:
    return opening * depth + inner + closing * depth


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 20_000),
    st.sampled_from([(b"[", b"]"), (b'{"a":', b"}"), (b'[{"a":', b"}]")]),
    st.booleans(),
)
def test_a_value_nested_at_any_depth_is_one_input_for_the_classifier(depth, brackets, then_a_line):
    """Past orjson's 1,024 levels the standard library's scanner recursed until RecursionError,
    a traceback from rdss send where validate and request said GENERR007."""
    data = nested(depth, *brackets)
    if then_a_line:
        data += b'\n{"a": 1}\n'
    lines = ndjson(data)
    as_lines = [(1, data.split(b"\n")[0]), (2, b'{"a": 1}')]  # a message a line, each judged by its own
    if not then_a_line or brackets[0].startswith(b"["):
        assert lines is None  # one input (or lines not starting with an object): the classifier's to refuse
    elif depth <= 900:
        assert lines == as_lines
    else:  # deeper than either parser reads for sure (how deep the standard library goes, the stack says)
        assert lines in (None, as_lines)


@settings(max_examples=300)
@given(st.binary(max_size=64), st.binary(max_size=64))
def test_any_bytes_are_one_input_or_lines_that_start_with_an_object(head, tail):
    deep = nested(3_000, b"[", b"]")
    for data in (head, head + b"\n" + tail, b'{"a": 1}\n' + head, head + b"\n" + deep, deep + b"\n" + head):
        lines = ndjson(data)
        if lines is None:
            continue
        numbers = [number for number, _ in lines]
        assert numbers == sorted(set(numbers))
        assert len(lines) >= 2
        assert all(line.strip() and b"\n" not in line for _, line in lines)
        assert isinstance(orjson.loads(lines[0][1]), dict)
