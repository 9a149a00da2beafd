"""``rdss send``, ``rdss tail`` and ``rdss request`` on the memory backend: contracts, exit codes,
one clear line per error."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from unittest.mock import ANY

import orjson
import pytest

from rdss import history
from rdss.cli import main
from rdss.gateway import Gateway, select
from rdss.gateway import memory as memory_backend
from rdss.messages import reply
from rdss.sequences import sequence_id
from rdss.workload import Workload
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
    assert lines[1].endswith(f"sent {whole} to metadata as 2 parts (sequence {sequence_id(whole)})")
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

    def respond() -> None:
        g = Gateway(url, application="responder")

        def answer(received):
            g.send(reply(received.message, document["messageBody"]), channel=received.header["returnAddress"])

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
