"""``rdss send``, ``rdss tail`` and ``rdss request`` on the memory backend: contracts, exit codes,
one clear line per error."""

from __future__ import annotations

import argparse
import io
import re
import threading
import uuid
from pathlib import Path
from typing import Any
from unittest.mock import ANY

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rdss.cli import main
from rdss.gateway import Gateway, select
from rdss.gateway.log import memory as memory_backend
from rdss.host.inputs import ndjson
from rdss.model import history
from rdss.model.messages import reply
from rdss.model.sequences import sequence_id
from rdss.model.validation import validate
from rdss.model.workload import Workload, Workload4
from tests.conftest import EXAMPLES


@pytest.fixture
def url(monkeypatch):
    name = f"cli-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("RDSS_GATEWAY_URL", f"memory://{name}")
    yield f"memory://{name}"
    memory_backend.discard(name)


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def write(tmp_path: Path, name: str, message: dict) -> Path:
    path = tmp_path / name
    path.write_bytes(orjson.dumps(message))
    return path


def test_send_prints_one_line_per_message_and_the_url_comes_from_the_environment(url, capsys, tmp_path):
    create = EXAMPLES / "valid" / "metadata-create-event.json"
    big = write(tmp_path, "big.json", Workload(1).large(1_500_000))
    code, out, err = run(capsys, "send", str(create), str(big), "--to", "metadata")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].startswith(f"{create}: sent ")
    assert lines[0].endswith(" to metadata")
    whole = orjson.loads(big.read_bytes())["messageHeader"]["messageId"]
    sequence = sequence_id(whole)
    first = memory_backend.bus(url.split("//")[1]).payloads("metadata")[1]
    assert lines[1].endswith(
        f"sent {whole} to metadata as 2 parts (sequence {sequence}; consumers receive it whole as message "
        f"{orjson.loads(first)['messageHeader']['messageId']} of sequence {sequence})"
    )
    bus = memory_backend.bus(url.split("//")[1])
    sent = bus.payloads("metadata")[0]
    assert history.extends(create.read_bytes(), sent)  # byte for byte, plus the gateway's hop
    assert [hop["machineId"] for hop in history.hops(sent)] == ["rdss-cli"]
    assert len(bus.payloads("metadata")) == 3


def test_an_invalid_file_is_named_with_its_code_nothing_is_sent_and_the_exit_is_1(url, capsys):
    valid = EXAMPLES / "valid" / "metadata-delete-event.json"
    invalid = EXAMPLES / "invalid" / "GENERR010-message-id-upper-case.json"
    code, out, err = run(capsys, "send", str(valid), str(invalid))
    assert code == 1
    assert out == ""
    lines = err.splitlines()
    assert any(line.startswith(f"{invalid}: GENERR010 ") for line in lines)
    # the refusal is also logged, with its code (on standard error when there is no syslog)
    assert any("[WARNING] Message refused" in line and "errorCode=GENERR010" in line for line in lines)
    assert "nothing sent" in err
    assert "Traceback" not in err
    assert memory_backend.bus(url.split("//")[1]).payloads("input") == []


def test_usage_and_io_errors_exit_2_with_one_line(url, capsys, tmp_path):
    code, _, err = run(capsys, "send", str(tmp_path / "missing.json"))
    assert code == 2
    assert err.strip() == f"rdss send: cannot read {tmp_path / 'missing.json'}: No such file or directory"
    code, _, err = run(capsys, "send", str(EXAMPLES / "valid" / "metadata-delete-event.json"), "--url", "kinesis:/dev")
    assert code == 2
    assert err.count("\n") == 1
    assert "not a gateway URL" in err
    code, _, err = run(capsys, "tail", "metadata", "--url", "nats://x", "--count", "1")
    assert code == 2
    assert "no gateway backend for nats://" in err


def test_tail_prints_every_record_as_a_json_line(url, capsys):
    messages = Workload(2).mix(3)
    Gateway(url, application="producer").send_all(messages, channel="vocabulary")
    code, out, err = run(capsys, "tail", "vocabulary", "--from-start", "--count", "3")
    assert (code, err) == (0, "")
    printed = [orjson.loads(line) for line in out.splitlines()]
    assert [p["messageHeader"].pop("messageHistory") for p in printed] == [
        [{"machineId": "producer", "machineAddress": history.machine_address(), "timestamp": ANY}]
    ] * 3
    assert printed == messages


def test_tail_without_from_start_shows_only_new_records(url, capsys):
    Gateway(url, application="producer").send(Workload(3).message("MetadataDelete", "Event"), channel="metadata")
    code, out, _ = run(capsys, "tail", "metadata", "--idle", "0.2", "--interval", "0.05")
    assert (code, out) == (0, "")


def test_request_answered_with_a_failure_reply_exits_1_and_prints_the_code(url, capsys, tmp_path):
    read = Workload(5).message("MetadataRead", "Command")

    def respond() -> None:
        g = Gateway(url, application="responder")
        g.listen(
            "input",
            lambda received: g.reply_error(received, "APPERRMET003", "no such object"),
            max_messages=1,
            idle_timeout=5,
            poll_interval=0.02,
            selector=select(message_class="Command"),
        )

    thread = threading.Thread(target=respond)
    thread.start()
    code, out, err = run(
        capsys, "request", str(write(tmp_path, "read.json", read)), "--timeout", "30", "--interval", "0.05"
    )
    thread.join(10)
    assert code == 1
    assert err.startswith("rdss request: the request failed: APPERRMET003: no such object (the reply to ")
    failure = orjson.loads(out)
    assert failure["messageHeader"]["errorCode"] == "APPERRMET003"
    assert failure["messageHeader"]["correlationId"] == read["messageHeader"]["messageId"]


def test_request_prints_the_reply(url, capsys, tmp_path):
    read = Workload(4).message("MetadataRead", "Command")
    document = reply(read, Workload(4).research_object())
    thread = _answer_one_request(url, [], document["messageBody"])
    code, out, err = run(
        capsys, "request", str(write(tmp_path, "read.json", read)), "--timeout", "5", "--interval", "0.05"
    )
    thread.join(10)
    assert (code, err) == (0, "")
    answer = orjson.loads(out)
    assert answer["messageHeader"]["correlationId"] == read["messageHeader"]["messageId"]
    assert answer["messageBody"] == document["messageBody"]


def test_a_request_timeout_is_one_line_and_exit_1(url, capsys, tmp_path):
    read = Workload(5).message("MetadataRead", "Command")
    code, out, err = run(
        capsys, "request", str(write(tmp_path, "read.json", read)), "--timeout", "0.2", "--interval", "0.05"
    )
    assert (code, out) == (1, "")
    assert err.strip() == f"rdss request: no reply to {read['messageHeader']['messageId']} on responses within 0.2 s"


def test_send_of_ndjson_sends_each_message_named_by_its_line(url, capsys, tmp_path, monkeypatch):
    workload = Workload(5)
    messages = [workload.message("MetadataCreate", "Event") for _ in range(3)]
    lines = [orjson.dumps(m) for m in messages]
    ndjson = tmp_path / "kept.ndjson"
    ndjson.write_bytes(lines[0] + b"\n" + lines[1] + b"\r\n\n" + lines[2] + b"\n")  # as tail prints, a blank line
    code, out, err = run(capsys, "send", str(ndjson))
    assert (code, err) == (0, "")
    ids = [m["messageHeader"]["messageId"] for m in messages]
    assert out.splitlines() == [
        f"{ndjson}:1: sent {ids[0]} to input",
        f"{ndjson}:2: sent {ids[1]} to input",
        f"{ndjson}:4: sent {ids[2]} to input",
    ]
    sent = memory_backend.bus(url.split("//")[1]).payloads("input")
    assert [orjson.loads(p)["messageHeader"]["messageId"] for p in sent] == ids
    assert all(history.extends(line, payload) for line, payload in zip(lines, sent, strict=True))
    # from standard input too: rdss tail ... | rdss send -
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"\n".join(lines))))
    code, out, _ = run(capsys, "send", "-", "--to", "metadata")
    assert (code, len(out.splitlines())) == (0, 3)
    assert out.splitlines()[2].startswith("-:3: sent ")


def test_ndjson_with_a_bad_line_sends_nothing_and_names_the_line(url, capsys, tmp_path):
    good = orjson.dumps(Workload(6).message("MetadataCreate", "Event"))
    ndjson = tmp_path / "mixed.ndjson"
    ndjson.write_bytes(good + b"\n" + b'{"messageHeader": 7}\n' + good[:-5] + b"\n")
    code, out, err = run(capsys, "send", str(ndjson))
    assert (code, out) == (1, "")
    assert f"{ndjson}:2: GENERR004 " in err
    assert f"{ndjson}:3: GENERR007 " in err
    assert memory_backend.bus(url.split("//")[1]).payloads("input") == []


def test_send_judges_each_message_by_the_version_it_declares(url, capsys, tmp_path):
    four = write(tmp_path, "four.json", Workload4(8).message("MetadataCreate", "Event"))
    code, out, err = run(capsys, "send", str(four))
    assert (code, err) == (0, "")
    assert out.startswith(f"{four}: sent ")
    [sent] = memory_backend.bus(url.split("//")[1]).payloads("input")
    assert (validate(sent).valid, validate(sent).version) == (True, "4.0.0")  # with the sender's hop added
    # a 3.0.2 message declaring 4.0.0 lacks tenantJiscID; a 4.0.0 vocabulary message has no form
    shaped_3 = Workload(8).message("MetadataCreate", "Event")
    shaped_3["messageHeader"]["version"] = "4.0.0"
    vocabulary = Workload4(8).message("MetadataDelete", "Event")
    vocabulary["messageHeader"]["messageType"] = "VocabularyPatch"
    for name, message, expected in [("shaped.json", shaped_3, "GENERR004"), ("vocab.json", vocabulary, "GENERR002")]:
        path = write(tmp_path, name, message)
        code, out, err = run(capsys, "send", str(path))
        assert (code, out) == (1, "")
        assert f"\n{path}: {expected} " in err
    assert len(memory_backend.bus(url.split("//")[1]).payloads("input")) == 1


def test_an_array_of_messages_is_refused_with_a_hint(url, capsys, tmp_path):
    array = tmp_path / "messages.json"
    array.write_bytes(orjson.dumps([Workload(7).message("MetadataCreate", "Event")]))
    code, _, err = run(capsys, "send", str(array))
    assert code == 1
    [line] = [line for line in err.splitlines() if line.startswith(str(array))]
    assert line.endswith(
        "(a JSON array: rdss send takes one message a file, or newline-delimited JSON, a message "
        "a line: jq -c '.[]' FILE > FILE.ndjson)"
    )


@settings(max_examples=40, deadline=None)
@given(
    payload=st.binary(max_size=64)
    | st.sampled_from([b"", b" \r\n", b"\xef\xbb\xbf{}", b"1e400", b"[]", b"{" * 2000, b'{"messageHeader": 5}'])
)
def test_a_request_file_holding_anything_is_refused_in_one_line_never_a_traceback(payload, tmp_path_factory):
    name = f"cli-{uuid.uuid4().hex[:8]}"
    path = tmp_path_factory.mktemp("request") / "request.json"
    path.write_bytes(payload)
    try:
        code = main(["request", str(path), "--timeout", "0.2", "--interval", "0.05", "--url", f"memory://{name}"])
        assert code in (1, 2)
        assert memory_backend.bus(name).payloads("input") == []  # refused before it is sent
    finally:
        memory_backend.discard(name)


def test_a_request_naming_its_header_twice_is_refused_not_resolved_to_the_last(url, capsys, tmp_path):
    # parsed and re-serialised with a returnAddress, it would have lost the first header and passed
    read = Workload(6).message("MetadataRead", "Command")
    del read["messageHeader"]["returnAddress"]
    text = orjson.dumps(read).decode()
    path = tmp_path / "twice.json"
    path.write_text('{"messageHeader": {"messageType": "MetadataCreate"}, ' + text[1:])
    code, out, err = run(capsys, "request", str(path), "--timeout", "0.2", "--interval", "0.05")
    assert (code, out) == (1, "")
    assert err.splitlines()[-1].startswith(f"rdss request: {path}: GENERR007: ")
    assert 'GENERR007: payload: the message names the member "messageHeader" more than once' in err
    assert memory_backend.bus(url.split("//")[1]).payloads("input") == []


def test_an_empty_request_file_is_refused_with_the_classifier_s_words(url, capsys, tmp_path):
    path = tmp_path / "empty.json"
    path.write_bytes(b"")
    code, out, err = run(capsys, "request", str(path), "--timeout", "0.2")
    assert (code, out) == (1, "")
    assert err.splitlines()[-1] == f"rdss request: {path}: GENERR007: payload: empty, expected a JSON object"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=6,
)


@settings(max_examples=200)
@given(st.lists(st.dictionaries(st.text(max_size=4), json_values, max_size=3), min_size=2, max_size=5), json_values)
def test_ndjson_is_a_json_object_a_line_and_one_value_is_one_message(objects, value):
    data = b"\n".join(orjson.dumps(o) for o in objects)
    assert ndjson(data) == [(n, orjson.dumps(o)) for n, o in enumerate(objects, 1)]
    assert ndjson(orjson.dumps(value, option=orjson.OPT_INDENT_2)) is None  # one value, however it is laid out
    assert ndjson(orjson.dumps(objects)) is None  # an array: the caller's to refuse, with its hint


def test_a_large_send_and_join_say_what_consumers_receive(url, capsys, tmp_path):
    """What ``rdss send`` prints of a large message, and what ``rdss join`` prints of its parts, is
    what a consumer receives: the whole under part 1's messageId, with the sequence's id."""
    big = write(tmp_path, "big.json", Workload(3).large(1_500_000))
    code, out, _ = run(capsys, "send", str(big), "--to", "metadata")
    assert code == 0
    said = re.search(r"consumers receive it whole as message (\S+) of sequence (\S+)\)$", out.strip())
    assert said, out
    received = []
    with Gateway(url, application="reader") as reader:
        reader.listen("metadata", lambda r: received.append(r.message), idle_timeout=0.5, poll_interval=0.01)
    [whole] = received
    header = whole["messageHeader"]
    assert (header["messageId"], header["messageSequence"]["sequence"]) == said.groups()
    code, _, _ = run(capsys, "split", str(big), "--out", str(tmp_path / "parts"))
    assert code == 0
    code, joined, _ = run(capsys, "join", *map(str, sorted((tmp_path / "parts").iterdir())))
    assert code == 0
    joined_header = orjson.loads(joined)["messageHeader"]
    assert (joined_header["messageId"], joined_header["messageSequence"]["sequence"]) == said.groups()
    for command in ("join", "send", "split"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        assert "sequence" in capsys.readouterr().out


@settings(max_examples=100)
@given(st.dictionaries(st.text(max_size=4), json_values, min_size=1, max_size=4), st.data())
def test_a_context_naming_a_member_twice_is_refused_once_is_kept(context, data):
    # Mosaic's message_context travels beside every message: which of two "a" a reader keeps is a guess
    from rdss.cli.gateway import _json_object

    text = orjson.dumps(context).decode()
    assert _json_object(text) == context
    name = data.draw(st.sampled_from(sorted(context)))
    twice = text[:-1] + "," + orjson.dumps({name: None}).decode()[1:]
    with pytest.raises(argparse.ArgumentTypeError, match="more than once"):
        _json_object(twice)


@pytest.mark.parametrize("depth", [1_025, 5_000, 100_000])
@pytest.mark.parametrize(
    "command",
    [
        ("send",),
        ("request", "--timeout", "0.2"),
        ("validate",),
        ("translate", "--to", "4.0.0"),
        ("split", "--out", "{tmp}/parts"),
        ("join",),
    ],
)
def test_every_command_reading_a_message_file_says_generr007_for_json_nested_at_any_depth(
    url, capsys, tmp_path, command, depth
):
    """rdss send told a message file from newline-delimited JSON by the standard library's scanner,
    which recursed past orjson's 1,024 levels into a RecursionError traceback."""
    for name, data in {
        "deep.json": b"[" * depth + b"]" * depth,
        "deep-object.json": b'{"a":' * depth + b"1" + b"}" * depth,
        "deep.ndjson": b"[" * depth + b"]" * depth + b'\n{"a": 1}\n',
    }.items():
        path = tmp_path / name
        path.write_bytes(data)
        verb, *options = command
        code, out, err = run(capsys, verb, str(path), *(o.format(tmp=tmp_path) for o in options))
        assert code == 1, (name, out, err)
        said = [line for line in (out + err).splitlines() if "GENERR007" in line and "malformed JSON" in line]
        assert said, (name, out, err)
        assert "(a JSON array" not in out + err  # not a list of messages: no hint to send each
    assert memory_backend.bus(url.split("//")[1]).payloads("input") == []
    assert not (tmp_path / "parts").exists()


def _answer_one_request(url: str, addresses: list[str], body: Any = None) -> threading.Thread:
    """A responder answering one request at its returnAddress (with ``body``, default a research
    object), noting each returnAddress it saw."""

    def respond() -> None:
        g = Gateway(url, application="responder")

        def answer(received):
            addresses.append(received.header["returnAddress"])
            answered = (
                body if body is not None else reply(received.message, Workload(4).research_object())["messageBody"]
            )
            g.send(reply(received.message, answered), channel=received.header["returnAddress"])

        g.listen(
            "input",
            answer,
            max_messages=1,
            idle_timeout=5,
            poll_interval=0.02,
            selector=select(message_class="Command"),
        )

    thread = threading.Thread(target=respond)
    thread.start()
    return thread


@pytest.mark.parametrize("reply_to", ["metadata", "responses", None])
def test_an_explicit_reply_to_wins_over_the_returnaddress_of_the_file_rdss_new_writes(url, capsys, tmp_path, reply_to):
    """rdss new writes returnAddress responses, and --reply-to was ignored whenever the file named one."""
    code, skeleton, _ = run(capsys, "new", "MetadataRead", "--class", "Command")
    assert orjson.loads(skeleton)["messageHeader"]["returnAddress"] == "responses"
    path = tmp_path / "read.json"
    path.write_text(skeleton)
    addresses: list[str] = []
    thread = _answer_one_request(url, addresses)
    option = () if reply_to is None else ("--reply-to", reply_to)
    code, out, err = run(capsys, "request", str(path), *option, "--timeout", "5", "--interval", "0.05")
    thread.join(10)
    assert (code, err) == (0, "")
    assert addresses == [reply_to or "responses"]  # the flag, else the file's own
    answer = orjson.loads(out)
    assert answer["messageHeader"]["correlationId"] == orjson.loads(skeleton)["messageHeader"]["messageId"]
    (sent,) = memory_backend.bus(url.split("//")[1]).payloads("input")
    assert orjson.loads(sent)["messageHeader"]["returnAddress"] == (reply_to or "responses")


def test_reply_to_gives_a_returnaddress_to_a_request_naming_none(url, capsys, tmp_path):
    read = Workload(4).message("MetadataRead", "Command")
    read["messageHeader"].pop("returnAddress", None)
    addresses: list[str] = []
    thread = _answer_one_request(url, addresses)
    code, _, err = run(
        capsys, "request", str(write(tmp_path, "r.json", read)), "--reply-to", "metadata", "--timeout", "5"
    )
    thread.join(10)
    assert (code, err, addresses) == (0, "", ["metadata"])


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["send", str(EXAMPLES / "valid" / "metadata-create-command.json")], "rdss send: nothing sent: {url} is a bus"),
        (
            ["send", str(EXAMPLES / "valid" / "metadata-create-command.json"), "--to", "metadata"],
            "rdss send: nothing sent",
        ),
        (["tail", "metadata", "--idle", "0.1"], "rdss tail: {url} is a bus inside this process"),
        (
            ["request", str(EXAMPLES / "valid" / "metadata-read-command.json"), "--timeout", "0.2"],
            "rdss request: nothing sent: {url} is",
        ),
        (["tail", "input", "--from-start", "--idle", "0.1"], "rdss tail: {url} is a bus inside this process"),
    ],
)
def test_a_memory_bus_is_refused_where_the_process_ends_with_the_command(url, capsys, monkeypatch, argv, said):
    """rdss send said "sent ... to input" and exit 0 with the message gone with the process, and
    rdss tail waited on a bus nothing could ever send to."""
    monkeypatch.setattr("sys.argv", ["rdss", *argv])
    code, (out, err) = main(), capsys.readouterr()  # the process's own command line, as the rdss program runs it
    assert (code, out) == (2, "")
    assert err.startswith(said.format(url=url))
    assert err.count("\n") == 1
    assert "kinesis://ENV?region=REGION or amqp://USER@HOST/VHOST" in err
    assert memory_backend.bus(url.split("//")[1]).payloads("input") == []
    # main called by a program, which holds the bus on: sent, or tailed, or a request sent (none answers)
    assert run(capsys, *argv)[0] == (1 if argv[0] == "request" else 0)


def test_an_invalid_message_on_a_memory_bus_gets_its_verdict_first(url, capsys, monkeypatch, tmp_path):
    path = write(tmp_path, "bad.json", {"messageHeader": 7})
    monkeypatch.setattr("sys.argv", ["rdss", "send", str(path)])
    code, (out, err) = main(), capsys.readouterr()
    assert (code, out) == (1, "")
    assert err.splitlines()[-2:] == [
        f"{path}: GENERR004 messageHeader: a JSON number, expected an object",
        "rdss send: nothing sent: 1 invalid message(s)",
    ]
