"""The local runtime's state on disk: the journal's frames, the pollers' positions, the state
directory, what counts as a change, and the pins that make a replay reproduce a request."""

from __future__ import annotations

import io
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from rdss.local import determinism
from rdss.local.durable import Changes, DurableApp, action, mutating
from rdss.local.journal import Entry, Journal, entries, read_committed, scan
from rdss.local.positions import Positions
from rdss.local.server import Listener, PortUnavailable
from rdss.local.state import MARKER, StateDirectory, StateError, default_directory


def entry(index: int, body: bytes = b"{}") -> Entry:
    environ = {"REQUEST_METHOD": "POST", "PATH_INFO": "/", "HTTP_X_AMZ_TARGET": "Kinesis_20131202.PutRecord"}
    return Entry(index, 1_700_000_000.5 + index, 200, environ, body)


# -- the journal ------------------------------------------------------------------------------
def write_journal(state: StateDirectory, bodies: list[bytes], *, first: int = 1) -> Journal:
    journal = Journal(state.files, end=state.files.size("journal"), last=first - 1)
    for index, body in enumerate(bodies, first):
        journal.append(entry(index, body))
        journal.sync(index)
    return journal


def test_journal_entries_come_back_whole_and_in_order(tmp_path: Path):
    state = StateDirectory(tmp_path / "state")
    bodies = [b"", b"\x00\xff binary \n", b"x" * 100_000]
    write_journal(state, bodies).close()
    found = scan(state.files, committed=read_committed(state.files))
    assert (found.entries, found.first, found.last, found.torn, found.damage) == (3, 1, 3, 0, None)
    read = list(entries(state.files, found.end))
    assert [e.body for e in read] == bodies
    assert [e.index for e in read] == [1, 2, 3]
    assert read[1] == entry(2, bodies[1])
    assert read_committed(state.files) == 3


@pytest.mark.parametrize("cut", [1, 5, 12, 28, 40])
def test_a_torn_last_frame_is_cut_and_the_whole_ones_kept(tmp_path: Path, cut: int):
    state = StateDirectory(tmp_path / "state")
    write_journal(state, [b"payload-1", b"payload-2"]).close()
    whole = state.journal.stat().st_size
    with state.journal.open("ab") as file:  # a crash in the middle of writing the third (never acknowledged)
        file.write(entry(3, b"payload-3").frame()[:cut])
    found = scan(state.files, committed=read_committed(state.files))
    assert (found.last, found.end, found.torn, found.damage) == (2, whole, cut, None)
    Journal(state.files, end=found.end, last=2).close()
    assert state.journal.stat().st_size == whole


def test_restart_keeps_only_what_a_snapshot_does_not_hold(tmp_path: Path):
    state = StateDirectory(tmp_path / "state")
    journal = write_journal(state, [b"1", b"2"])
    through = journal.size
    journal.append(entry(3, b"3"))  # appended while the snapshot was written
    journal.sync(3)
    journal.drop_through(through, 1)
    journal.close()
    found = scan(state.files, covered=2, committed=read_committed(state.files))
    assert [e.index for e in entries(state.files, found.end)] == [3]
    assert found.damage is None


# -- what is journalled -----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("method", "target", "body", "changes"),
    [
        ("POST", "Kinesis_20131202.PutRecords", b"{}", True),
        ("POST", "Kinesis_20131202.GetRecords", b"{}", False),
        ("POST", "Kinesis_20131202.GetShardIterator", b"{}", False),
        ("POST", "Kinesis_20131202.ListShards", b"{}", False),
        ("POST", "DynamoDB_20120810.TransactWriteItems", b"{}", True),
        ("POST", "DynamoDB_20120810.TransactGetItems", b"{}", False),
        ("POST", "DynamoDB_20120810.Query", b"{}", False),
        ("POST", "AmazonSQS.ReceiveMessage", b"{}", True),  # moves messages out of sight
        ("POST", None, b"Action=CreateRole&RoleName=x", True),
        ("POST", None, b"Action=GetRole&RoleName=x", False),
        ("PUT", None, b"object bytes", True),  # S3 says it with the method
        ("DELETE", None, b"", True),
        ("GET", None, b"", False),
        ("HEAD", None, b"", False),
    ],
)
def test_only_requests_that_may_change_state_are_journalled(
    method: str, target: str | None, body: bytes, changes: bool
):
    environ = {"REQUEST_METHOD": method, "QUERY_STRING": ""}
    if target:
        environ["HTTP_X_AMZ_TARGET"] = target
    elif body.startswith(b"Action="):
        environ["CONTENT_TYPE"] = "application/x-www-form-urlencoded; charset=utf-8"
    assert mutating(environ, body) is changes


def test_the_action_comes_from_the_target_the_query_or_the_form():
    assert action({"HTTP_X_AMZ_TARGET": "Kinesis_20131202.PutRecord"}, b"") == "PutRecord"
    assert action({"QUERY_STRING": "Action=AssumeRole&Version=2011-06-15"}, b"") == "AssumeRole"
    form = {"CONTENT_TYPE": "application/x-www-form-urlencoded"}
    assert action(form, b"Version=1&Action=SendMessage") == "SendMessage"
    assert action({"QUERY_STRING": "list-type=2"}, b"") is None


def test_changes_wake_a_waiter_at_once():
    changes = Changes()
    seen = changes.version
    assert changes.wait(seen, 0.01) is False
    changes.bump()
    started = time.monotonic()
    assert changes.wait(seen, 10) is True
    assert time.monotonic() - started < 1


# -- positions --------------------------------------------------------------------------------
def test_positions_survive_a_new_process_and_stay_per_poller(tmp_path: Path):
    state = StateDirectory(tmp_path / "state")
    positions = Positions(state)
    broker = positions.of("mapping:broker")
    broker["shardId-000000000000"] = "41"
    broker["shardId-000000000000"] = "42"
    positions.of("firehose:input")["shardId-000000000001"] = "7"
    again = Positions(state)
    assert dict(again.of("mapping:broker")) == {"shardId-000000000000": "42"}
    assert again.of("firehose:input").get("shardId-000000000001") == "7"
    assert again.of("mapping:sequencer").get("shardId-000000000000") is None
    del again.of("mapping:broker")["shardId-000000000000"]
    assert Positions(state).snapshot() == {"mapping:broker": {}, "firehose:input": {"shardId-000000000001": "7"}}
    assert not (state.path / "positions.json.tmp").exists()
    assert again.rebuilt is None


def test_positions_without_a_state_directory_stay_in_memory():
    positions = Positions()
    positions.of("p")["s"] = "1"
    assert dict(positions.of("p")) == {"s": "1"}


# -- the state directory ----------------------------------------------------------------------
def test_default_directory_follows_xdg_state_home(tmp_path: Path):
    assert default_directory("local", {"XDG_STATE_HOME": str(tmp_path), "HOME": "/h"}) == tmp_path / "rdss/local/local"
    assert default_directory("dev", {"HOME": "/h"}) == Path("/h/.local/state/rdss/local/dev")
    # relative values are ignored, as the XDG base directory specification says
    assert default_directory("dev", {"XDG_STATE_HOME": "rel", "HOME": "/h"}) == Path("/h/.local/state/rdss/local/dev")


def test_a_state_directory_is_marked_locked_and_emptied_only_when_fresh(tmp_path: Path):
    path = tmp_path / "state"
    state = StateDirectory(path)
    assert (path / MARKER).is_file()
    assert oct(path.stat().st_mode & 0o777) == "0o700"
    state.journal.write_bytes(b"kept")
    with pytest.raises(StateError, match=f"in use by rdss local up \\(pid {os.getpid()}\\)"):
        StateDirectory(path)
    state.close()
    StateDirectory(path).close()
    assert state.journal.read_bytes() == b"kept"
    StateDirectory(path, fresh=True).close()
    assert not state.journal.exists()


def test_a_directory_that_is_not_state_is_never_used(tmp_path: Path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(StateError, match="not an rdss local state directory"):
        StateDirectory(tmp_path, fresh=True)
    assert (tmp_path / "notes.txt").read_text() == "mine"
    with pytest.raises(StateError, match="not a directory"):
        StateDirectory(tmp_path / "notes.txt")


def test_an_unwritable_place_is_a_state_error(tmp_path: Path):
    (tmp_path / "file").write_text("")
    with pytest.raises(StateError, match="state directory"):
        StateDirectory(tmp_path / "file" / "below")


# -- reproducible requests --------------------------------------------------------------------
def test_a_pinned_request_draws_the_same_ids_and_reads_the_same_clock():
    from moto.core import utils
    from moto.moto_api._internal import mock_random

    def draw() -> tuple[str, bytes, object, str]:
        return str(mock_random.uuid4()), os.urandom(8), utils.utcnow(), mock_random.get_random_string(12)

    with determinism.reproducible(42, 1_700_000_000.25):
        first = draw()
    with determinism.reproducible(42, 1_700_000_000.25):
        assert draw() == first
    assert str(first[2]) == "2023-11-14 22:13:20.250000"
    assert draw()[0] != first[0]  # unpinned, moto's source is random again
    assert utils.utcnow().year >= 2026


# -- the port ---------------------------------------------------------------------------------
def test_a_listener_binds_at_once_and_takes_connections_only_when_opened():
    listener = Listener(lambda environ, start_response: [], 0)
    try:
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", listener.port), timeout=2)
        listener.open()
        socket.create_connection(("127.0.0.1", listener.port), timeout=2).close()
        with pytest.raises(PortUnavailable, match="in use"):
            Listener(lambda environ, start_response: [], listener.port)
    finally:
        listener.close()
    with pytest.raises(PortUnavailable, match="out of range"):
        Listener(lambda environ, start_response: [], 70000)


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        (["--port", "99999"], "99999 is not a port"),
        (["--port", "-1"], "-1 is not a port"),
        (["--port", "x"], "'x' is not a whole number"),
        (["--shards", "0"], "0 is out of range"),
        (["--shards", "51"], "51 is out of range"),
        (["--compact-every", "0"], "0 is out of range"),
        (["--env", "../up"], "is not a deployment name"),
    ],
)
def test_local_up_refuses_numbers_out_of_range_at_once(arguments: list[str], says: str, tmp_path: Path):
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "rdss", "local", "up", "--state", str(tmp_path / "s"), *arguments],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert says in result.stderr
    assert "Traceback" not in result.stderr
    assert time.monotonic() - started < 15
    assert not (tmp_path / "s").exists()


def test_local_up_on_a_port_in_use_exits_2_at_once(tmp_path: Path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "rdss", "local", "up", "--state", str(tmp_path / "s"), "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [f"rdss local: --port: port {port}: Address already in use"]


# -- the journalled app -----------------------------------------------------------------------
class Recorder:
    """A WSGI app that records what reached it and answers 200 with a pinned uuid."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, bytes, bytes]] = []

    def __call__(self, environ: dict, start_response: Callable) -> list[bytes]:
        from moto.moto_api._internal import mock_random

        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        answer = str(mock_random.uuid4()).encode()
        self.seen.append((environ.get("HTTP_X_AMZ_TARGET", environ["REQUEST_METHOD"]), body, answer))
        start_response("200 OK", [("Content-Type", "application/json")])
        return [answer]


def call(app: DurableApp, target: str, body: bytes) -> tuple[str, bytes]:
    environ = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/",
        "QUERY_STRING": "",
        "CONTENT_LENGTH": str(len(body)),
        "HTTP_X_AMZ_TARGET": target,
        "wsgi.input": io.BytesIO(body),
        "wsgi.url_scheme": "http",
    }
    answer: dict = {}
    content = b"".join(app(environ, lambda status, headers, exc_info=None: answer.update(status=status)))
    return answer["status"], content


def test_changes_are_journalled_and_replayed_with_the_same_answers_reads_are_not(tmp_path: Path):
    first = DurableApp(Recorder(), StateDirectory(tmp_path / "state"))
    first.recover()
    answers = [call(first, "Kinesis_20131202.PutRecord", b'{"n": %d}' % n) for n in range(3)]
    call(first, "Kinesis_20131202.GetRecords", b"{}")
    first.state.close()  # as after a SIGKILL: no snapshot, the journal as it is

    replayed = Recorder()
    second = DurableApp(replayed, StateDirectory(tmp_path / "state"))
    recovery = second.recover()
    assert (recovery.replayed, recovery.diverged, recovery.snapshot_index) == (3, 0, 0)
    target = "Kinesis_20131202.PutRecord"
    assert replayed.seen == [(target, b'{"n": %d}' % n, answer) for n, (_, answer) in enumerate(answers)]
    assert call(second, "Kinesis_20131202.PutRecord", b"{}")[1] != answers[-1][1]


def test_a_journal_that_cannot_be_written_stops_every_acknowledgement(tmp_path: Path):
    app = DurableApp(Recorder(), StateDirectory(tmp_path / "state"))
    app.recover()
    assert call(app, "Kinesis_20131202.PutRecord", b"{}")[0] == "200 OK"
    assert app._journal is not None
    os.close(app._journal._fd)  # the disk goes away
    status, content = call(app, "Kinesis_20131202.PutRecord", b"{}")
    assert status.startswith("503")
    assert b"the journal cannot be written" in content
    assert call(app, "Kinesis_20131202.PutRecord", b"{}")[0].startswith("503")
    assert call(app, "Kinesis_20131202.GetRecords", b"{}")[0] == "200 OK"  # reads still answer


# -- snapshots --------------------------------------------------------------------------------


def test_a_snapshot_keeps_kms_keys_whose_private_keys_do_not_pickle(tmp_path: Path) -> None:
    """Every KMS key moto makes holds a ``cryptography`` private key (a Rust object pickle
    refuses): the snapshot keeps it as PEM, and the key signs and decrypts after a reload."""
    import boto3
    from moto import mock_aws

    from rdss.local import snapshot

    with mock_aws():
        kms = boto3.client("kms", region_name="eu-west-2")
        symmetric = kms.create_key()["KeyMetadata"]["KeyId"]
        signing = kms.create_key(KeySpec="RSA_2048", KeyUsage="SIGN_VERIFY")["KeyMetadata"]["KeyId"]
        sealed = kms.encrypt(KeyId=symmetric, Plaintext=b"kept")["CiphertextBlob"]
        public = kms.get_public_key(KeyId=signing)["PublicKey"]
        state = StateDirectory(tmp_path / "state")
        assert snapshot.write(state.files, state.key, snapshot.dump(7)) > 0
    with mock_aws():  # a fresh emulator: nothing until the snapshot is loaded
        assert snapshot.load(state.files, state.key) == 7
        kms = boto3.client("kms", region_name="eu-west-2")
        assert kms.decrypt(CiphertextBlob=sealed)["Plaintext"] == b"kept"
        assert kms.get_public_key(KeyId=signing)["PublicKey"] == public
        signed = kms.sign(KeyId=signing, Message=b"m", SigningAlgorithm="RSASSA_PKCS1_V1_5_SHA_256")["Signature"]
        verdict = kms.verify(
            KeyId=signing, Message=b"m", Signature=signed, SigningAlgorithm="RSASSA_PKCS1_V1_5_SHA_256"
        )
        assert verdict["SignatureValid"]
