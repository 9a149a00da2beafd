"""messageHistory hops: appended without touching another byte, accepted by the classifier."""

from __future__ import annotations

from datetime import UTC, datetime

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rdss.model import history
from rdss.model.sequences import join, split
from rdss.model.validation import validate
from rdss.model.workload import Workload

BROKER = history.Hop("rdss-dev-broker", "ip-10-0-0-1.eu-west-2.compute.internal", "2026-11-21T09:14:03.120Z")
SEQUENCER = history.Hop("rdss-dev-sequencer", "10.0.0.2", "2026-11-21T09:14:03.480Z")


def test_a_first_hop_is_inserted_where_the_spec_orders_it():
    message = Workload(1).message("MetadataCreate", "Event")
    payload = orjson.dumps(message)
    hopped = history.append(payload, BROKER)
    insertion = b'"messageHistory":[' + orjson.dumps(BROKER.entry()) + b"],"
    at = payload.index(b'"version"')
    assert hopped == payload[:at] + insertion + payload[at:]
    assert list(orjson.loads(hopped)["messageHeader"])[-3:] == ["messageHistory", "version", "generator"]
    assert orjson.loads(hopped)["messageHeader"]["messageHistory"] == [BROKER.entry()]
    assert validate(hopped).valid


@pytest.mark.parametrize("option", [0, orjson.OPT_INDENT_2])
def test_later_hops_go_at_the_end_of_the_array_in_any_layout(option: int):
    message = Workload(2).message("VocabularyPatch", "Event")
    payload = orjson.dumps(message, option=option)
    once = history.append(payload, BROKER)
    twice = history.append(once, SEQUENCER)
    assert history.hops(twice) == [BROKER.entry(), SEQUENCER.entry()]
    assert twice.startswith(once[: once.index(b"]", once.index(b"messageHistory"))])
    assert history.extends(payload, twice)
    assert history.extends(once, twice)
    assert not history.extends(twice, once)
    assert validate(twice).valid


@pytest.mark.parametrize(
    "header",
    [
        {"messageId": "m", "version": "3.0.2", "generator": "g"},
        {"version": "3.0.2", "messageId": "m"},
        {"messageId": "m", "messageClass": "Event"},
    ],
)
def test_the_fast_path_for_a_parsed_header_gives_the_same_bytes(header: dict[str, str]):
    payload = orjson.dumps({"messageHeader": header, "messageBody": {}})
    assert history.append(payload, BROKER, header=header) == history.append(payload, BROKER)
    message = Workload(3).message("MetadataRead", "Command")
    payload = orjson.dumps(message)
    first = history.append(payload, BROKER, header=message["messageHeader"])
    assert first == history.append(payload, BROKER)
    header = orjson.loads(first)["messageHeader"]
    assert history.append(first, SEQUENCER, header=header) == history.append(first, SEQUENCER)


def test_a_header_with_nothing_after_history_in_spec_order_gains_it_at_the_end():
    payload = b'{"messageHeader": {"messageId": "m"\n}, "messageBody": {}}'
    hopped = history.append(payload, BROKER)
    assert hopped == payload.replace(b'"m"\n}', b'"m"\n,"messageHistory":[' + orjson.dumps(BROKER.entry()) + b"]}")


def test_an_existing_empty_history_and_non_ascii_text_before_it():
    payload = (
        b'{ "messageHeader" : {"generator": "d\xc3\xa9p\xc3\xb4t", "messageHistory" : [ ] }, "messageBody": {"x": 1}}'
    )
    hopped = history.append(payload, BROKER)
    assert hopped == payload.replace(b"[ ]", b"[ " + orjson.dumps(BROKER.entry()) + b"]")


def test_the_same_hop_twice_is_kept_once_because_the_schema_wants_entries_unique():
    payload = history.append(orjson.dumps(Workload(4).message("MetadataDelete", "Event")), BROKER)
    assert history.append(payload, BROKER) == payload


@pytest.mark.parametrize(
    "payload",
    [b"not json", b"[1, 2]", b'{"messageBody": {}}', b'{"messageHeader": {"messageHistory": 7}}', b"\xff"],
)
def test_what_is_not_a_message_is_refused(payload: bytes):
    with pytest.raises(ValueError):
        history.append(payload, BROKER)


def test_a_later_duplicate_header_key_is_the_one_that_gains_the_hop():
    payload = b'{"messageHeader": {"a": 1}, "messageBody": {}, "messageHeader": {"b": 2}}'
    hopped = history.append(payload, BROKER)
    assert orjson.loads(hopped)["messageHeader"] == {"b": 2, "messageHistory": [BROKER.entry()]}


def test_a_reassembled_sequence_carries_the_history_of_its_first_part():
    whole = Workload(5).large(2_100_000)
    parts = [orjson.loads(history.append(orjson.dumps(p), BROKER)) for p in split(whole)]
    first = orjson.loads(history.append(orjson.dumps(parts[0]), SEQUENCER))
    joined = join([first, *parts[1:]])
    assert joined["messageHeader"]["messageHistory"] == [BROKER.entry(), SEQUENCER.entry()]
    assert joined["messageBody"] == whole["messageBody"]


def test_a_hop_names_this_machine_with_a_valid_address():
    hop = history.hop("app", now=datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC))
    assert hop.timestamp == "2026-01-02T03:04:05.678Z"
    payload = history.append(orjson.dumps(Workload(6).message("MetadataCreate", "Event")), hop)
    assert validate(payload).valid, validate(payload).error_description


@given(
    st.lists(st.sampled_from([BROKER, SEQUENCER]), min_size=1, max_size=4), st.sampled_from([0, orjson.OPT_INDENT_2])
)
def test_extends_recognises_any_chain_of_hops(chain: list[history.Hop], option: int):
    payload = orjson.dumps(Workload(7).message("MetadataUpdate", "Event"), option=option)
    record = payload
    for hop in chain:
        record = history.append(record, hop)
    assert history.extends(payload, record)
    assert not history.extends(payload, record.replace(b'"version"', b'"version" '))


def test_a_later_header_key_spelled_with_an_escape_is_the_one_that_gains_the_hop():
    payload = b'{"messageHeader": {"a": 1}, "messageBody": {}, "message\\u0048eader": {"b": 2}}'
    hopped = history.append(payload, BROKER)
    assert orjson.loads(hopped)["messageHeader"] == {"b": 2, "messageHistory": [BROKER.entry()]}
