"""The ``rdss`` command line: contracts, exit codes, no tracebacks."""

from __future__ import annotations

import errno
import io
import json
import os
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import orjson
import pytest

from rdss.cli import main
from rdss.model.workload import Workload
from tests.conftest import EXAMPLES

VALID = EXAMPLES / "valid" / "metadata-create-event.json"
INVALID = EXAMPLES / "invalid" / "GENERR010-message-id-upper-case.json"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_validate_json_lines_follow_the_contract(capsys):
    code, out, err = run(capsys, "validate", "--json", str(VALID), str(INVALID))
    lines = [orjson.loads(line) for line in out.splitlines()]
    assert code == 1
    assert err == ""
    assert lines[0] == {
        "file": str(VALID),
        "valid": True,
        "errorCode": None,
        "errorDescription": None,
        "version": "3.0.2",
    }
    assert set(lines[1]) == {"file", "valid", "errorCode", "errorDescription", "version"}
    assert lines[1]["valid"] is False
    assert lines[1]["errorCode"] == "GENERR010"
    assert "messageId" in lines[1]["errorDescription"]


def test_validate_json_names_the_version_each_message_was_judged_against(capsys, tmp_path: Path):
    code, out, _ = run(capsys, "new", "--version", "4.0.0", "MetadataDelete")
    assert code == 0
    four = tmp_path / "four.json"
    four.write_text(out)
    vocabulary = orjson.loads(out)
    vocabulary["messageHeader"]["messageType"] = "VocabularyRead"
    (tmp_path / "vocabulary.json").write_bytes(orjson.dumps(vocabulary))
    code, out, _ = run(capsys, "validate", "--json", str(four), str(VALID), str(tmp_path / "vocabulary.json"))
    lines = [orjson.loads(line) for line in out.splitlines()]
    assert code == 1
    assert [(line["valid"], line["version"]) for line in lines] == [(True, "4.0.0"), (True, "3.0.2"), (False, "4.0.0")]
    assert lines[2]["errorCode"] == "GENERR002"
    assert "gone in 4.0.0" in lines[2]["errorDescription"]


def test_validate_exits_0_when_all_are_valid(capsys):
    code, out, _ = run(capsys, "validate", *map(str, sorted((EXAMPLES / "valid").glob("*.json"))))
    assert code == 0
    assert out.count(": valid") == len(list((EXAMPLES / "valid").glob("*.json")))


def test_a_missing_file_is_one_clear_line_and_exit_2(capsys, tmp_path: Path):
    missing = tmp_path / "nope.json"
    code, out, err = run(capsys, "validate", str(VALID), str(missing), str(INVALID))
    assert code == 2
    assert err.strip() == f"rdss validate: cannot read {missing}: No such file or directory"
    assert "Traceback" not in err
    assert out.count("\n") == 2  # the other files were still classified


class _FailingReads(io.RawIOBase):
    """A file that opens and then fails to read, as /proc/self/mem or a device does (EIO)."""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        raise OSError(errno.EIO, os.strerror(errno.EIO))


@pytest.mark.parametrize("command", ["validate", "send", "request", "split", "join"])
def test_a_file_that_fails_mid_read_is_named_in_its_one_line(command, capsys, monkeypatch, tmp_path: Path):
    # the open succeeded, so the OSError of the read carried no file name: "cannot read input"
    named = tmp_path / "device"
    named.touch()
    monkeypatch.setenv("RDSS_GATEWAY_URL", "memory://failing-reads")
    real_open = Path.open
    monkeypatch.setattr(
        Path,
        "open",
        lambda self, *a, **k: io.BufferedReader(_FailingReads()) if self == named else real_open(self, *a, **k),
    )
    argv = [command, str(named)] + (["--out", str(tmp_path / "parts")] if command == "split" else [])
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert err.splitlines()[-1] == f"rdss {command}: cannot read {named}: Input/output error"


def test_standard_input_that_fails_mid_read_is_named(capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(_FailingReads())))
    code, _, err = run(capsys, "validate", "-")
    assert code == 2
    assert err.strip() == "rdss validate: cannot read standard input: Input/output error"


def test_a_missing_file_in_json_mode_still_gets_its_line(capsys, tmp_path: Path):
    code, out, _ = run(capsys, "validate", "--json", str(tmp_path / "nope.json"))
    assert code == 2
    [line] = [orjson.loads(line) for line in out.splitlines()]
    assert line["valid"] is False
    assert line["errorCode"] is None
    assert "cannot read" in line["errorDescription"]


def test_validate_reads_standard_input():
    payload = INVALID.read_bytes()
    result = subprocess.run(
        [sys.executable, "-m", "rdss", "validate", "--json", "-"], input=payload, capture_output=True, check=False
    )
    assert result.returncode == 1
    assert orjson.loads(result.stdout)["file"] == "-"


def test_no_expiry_skips_the_expiry_stage(capsys):
    expired = EXAMPLES / "invalid" / "GENERR003-expired.json"
    assert run(capsys, "validate", str(expired))[0] == 1
    assert run(capsys, "validate", "--no-expiry", str(expired))[0] == 0


def test_usage_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as caught:
        main(["validate"])
    assert caught.value.code == 2


def test_split_and_join_round_trip(capsys, tmp_path: Path):
    big = Workload(12).large(2_200_000)
    source = tmp_path / "big.json"
    source.write_bytes(orjson.dumps(big))
    code, out, _ = run(capsys, "split", str(source), "--out", str(tmp_path / "parts"))
    assert code == 0
    assert "3 parts" in out
    parts = sorted((tmp_path / "parts").glob("part-*.json"))
    assert len(parts) == 3
    assert all(p.stat().st_size <= 1_000_000 for p in parts)
    code, out, _ = run(capsys, "join", *map(str, reversed(parts)))
    assert code == 0
    assert orjson.loads(out)["messageBody"] == big["messageBody"]


def test_split_honours_the_limit_and_join_reports_gaps(capsys, tmp_path: Path):
    code, _, _ = run(capsys, "split", str(VALID), "--out", str(tmp_path), "--limit", "1500")
    assert code == 0
    parts = sorted(tmp_path.glob("part-*.json"))
    assert len(parts) > 1
    assert all(p.stat().st_size <= 1500 for p in parts)
    code, _, err = run(capsys, "join", *map(str, parts[1:]))
    assert code == 1
    assert "missing positions [1]" in err


@pytest.mark.parametrize("total", [10**8, 2**31, 10**30])
def test_join_of_one_part_with_a_huge_total_answers_in_one_line(capsys, tmp_path: Path, total: int):
    code, _, _ = run(capsys, "split", str(VALID), "--out", str(tmp_path), "--limit", "1500")
    assert code == 0
    part = orjson.loads(sorted(tmp_path.glob("part-*.json"))[0].read_bytes())

    def join_alone(total: int) -> tuple[int, str, str, int]:
        part["messageHeader"]["messageSequence"]["total"] = total
        lone = tmp_path / f"lone-{total}.json"
        lone.write_text(json.dumps(part))  # orjson writes no integer beyond 64 bits
        tracemalloc.start()
        try:
            code, out, err = run(capsys, "join", str(lone))
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        return code, out, err, peak

    join_alone(2)  # once first: what a first classification loads is not the answer's
    *_, usual = join_alone(2)  # a part whose sequence lacks one more (reading a file takes a buffer)
    code, out, err, peak = join_alone(total)
    assert code == 1
    assert out == ""
    assert err == (
        f"rdss join: {tmp_path / f'lone-{total}.json'}: GENERR004 messageHeader.messageSequence.total: {total} "
        "parts is more than a sequence may have (at most 10,000: no sequence that long could be held whole to be "
        "reassembled)\n"
    )
    assert peak < usual + 1_000_000  # nothing per position the total names (10^8 took 11.5 GB)


def test_join_refuses_two_different_parts_at_one_position(capsys, tmp_path: Path):
    code, _, _ = run(capsys, "split", str(VALID), "--out", str(tmp_path), "--limit", "1500")
    assert code == 0
    parts = sorted(tmp_path.glob("part-*.json"))
    other = orjson.loads(parts[0].read_bytes())
    other["messageBody"] = other["messageBody"][::-1]
    other["messageHeader"]["messageId"] = "0b3f1d4e-8a4c-4a55-9b4a-7f2f1a1d2c3e"
    (tmp_path / "other.json").write_bytes(orjson.dumps(other))
    code, out, err = run(capsys, "join", *map(str, parts), str(tmp_path / "other.json"))
    assert (code, out) == (1, "")
    assert len(err.splitlines()) == 1
    assert "position 1 of sequence" in err
    assert "another fragment" in err


def test_split_refuses_an_invalid_message(capsys, tmp_path: Path):
    code, _, err = run(capsys, "split", str(INVALID), "--out", str(tmp_path))
    assert code == 1
    assert "GENERR010" in err


@pytest.mark.parametrize(
    ("message_type", "message_class"),
    [("MetadataCreate", None), ("MetadataRead", "Document"), ("VocabularyPatch", "Command")],
)
def test_new_prints_a_valid_skeleton(capsys, tmp_path: Path, message_type: str, message_class: str | None):
    args = ["new", message_type] + (["--class", message_class] if message_class else [])
    code, out, _ = run(capsys, *args)
    assert code == 0
    path = tmp_path / "new.json"
    path.write_text(out)
    assert run(capsys, "validate", str(path))[0] == 0


def test_new_refuses_an_unsupported_class(capsys):
    code, _, err = run(capsys, "new", "MetadataRead", "--class", "Event")
    assert code == 2
    assert err.strip() == "rdss new: MetadataRead does not travel as Event, only as Command or Document"


def test_bench_broker_json_is_the_figures_alone_on_standard_output():
    """The broker writes its log lines and EMF metrics on standard output (Lambda's way): the
    benchmark sends them to standard error, so its --json output parses as it stands."""
    done = subprocess.run(
        [sys.executable, "-m", "rdss", "bench", "broker", "--records", "40", "--batch", "20", "--stub-aws", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env={**os.environ, "POWERTOOLS_METRICS_DISABLED": "false", "POWERTOOLS_LOG_LEVEL": "INFO"},
    )
    figures = orjson.loads(done.stdout)
    assert figures["records"] == 40
    assert figures["calls_per_1000"] > 0
    assert '"batch handled"' in done.stderr  # the broker's lines and metrics are still written
    assert '"CloudWatchMetrics"' in done.stderr


@pytest.mark.parametrize(
    ("blocked", "command", "extra"),
    [
        ("moto", ["local", "demo", "--no-analytics"], "local"),
        ("moto", ["bench", "send", "--messages", "10"], "local"),
        ("flask", ["local", "demo", "--no-analytics"], "local"),
    ],
)
def test_a_command_whose_extra_is_not_installed_says_which_in_one_line(
    tmp_path: Path, blocked: str, command: list[str], extra: str
):
    """A user who installed the core alone (no ``[local]``) gets the pip command, not a traceback."""
    script = (
        "import sys; sys.modules[sys.argv[1]] = None\n"  # what an absent package looks like to import
        "from rdss.cli import main; sys.exit(main(sys.argv[2:]))"
    )
    env = {k: v for k, v in os.environ.items() if k != "AWS_ENDPOINT_URL"}
    done = subprocess.run(
        [sys.executable, "-c", script, blocked, *command],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=60,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    # last: moto without its server's packages warns first
    assert done.stderr.splitlines()[-1] == (
        f"rdss {command[0]}: this needs the {extra} extra ({blocked} is not installed): "
        f"pip install 'rdss-messaging[{extra}]'"
    )


def test_ctrl_c_while_the_command_line_loads_prints_no_traceback():
    # Ctrl-C in the few tenths of a second before main() can catch it raised KeyboardInterrupt out
    # of an import, and Python printed its traceback; the process still dies of SIGINT
    ran = subprocess.run(
        [sys.executable, "-c", "import rdss.cli\nraise KeyboardInterrupt"], capture_output=True, timeout=60, check=False
    )
    assert (ran.returncode, ran.stderr) == (-2, b"")


def test_any_other_uncaught_error_is_still_printed():
    ran = subprocess.run(
        [sys.executable, "-c", "import rdss.cli\nraise RuntimeError('kept')"],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert ran.returncode == 1
    assert b"Traceback" in ran.stderr
    assert b"RuntimeError: kept" in ran.stderr


def test_split_refuses_an_empty_out_rather_than_writing_to_the_working_directory(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as usage:
        main(["split", str(VALID), "--out", ""])
    assert usage.value.code == 2
    assert "argument --out: an empty name is no directory" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("kind", ["file", "fifo", "symlink to /dev/null"])
def test_split_to_something_that_is_not_a_directory_says_so(kind, capsys, tmp_path):
    out = tmp_path / "out"
    if kind == "file":
        out.write_bytes(b"kept")
    elif kind == "fifo":
        os.mkfifo(out)
    else:
        out.symlink_to("/dev/null")
    code, _, err = run(capsys, "split", str(VALID), "--out", str(out))
    assert code == 2
    assert err == f"rdss split: cannot write parts to {out}: it exists and is not a directory\n"


@pytest.mark.parametrize(
    ("argv", "closed", "said"),
    [
        (["validate", "-"], "stdin", "rdss validate: cannot read standard input: it is closed"),
        (["send", "-", "--url", "memory://closed"], "stdin", "rdss send: cannot read standard input: it is closed"),
        (["validate", str(VALID)], "stdout", "rdss: standard output is closed: give it somewhere to go"),
        (
            ["tail", "metadata", "--url", "memory://closed", "--idle", "0.1"],
            "stdout",
            "rdss: standard output is closed",
        ),
    ],
)
def test_a_closed_standard_stream_is_one_line_not_a_traceback(argv, closed, said):
    # started with <&- or >&-, Python's sys.stdin or sys.stdout is None, not a file
    ran = subprocess.run(
        [sys.executable, "-m", "rdss", *argv],
        stdin=subprocess.DEVNULL,
        capture_output=closed != "stdout",
        stderr=subprocess.PIPE if closed == "stdout" else None,
        pass_fds=(),
        preexec_fn=lambda: os.close(0 if closed == "stdin" else 1),
        timeout=60,
        check=False,
    )
    assert ran.returncode == 2
    assert ran.stderr.decode().count("\n") == 1
    assert ran.stderr.decode().startswith(said)
