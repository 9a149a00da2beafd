"""A vendor's first day, from the installed wheel, against ``rdss local up --vendor ...``:

* the configuration ``rdss vendor config`` prints works in a fresh shell with no exports, as
  docs/vendors.md has the vendor use it; with no credentials to assume the role with (another
  user's shell, no state file) the gateway says what is missing in one line, exit 2;
* each vendor's role is held to its policy: a produces-only vendor reading ``metadata`` and a
  consumes-only vendor putting on ``input`` are refused in one line (exit 2), what each may do
  works, and every message is accounted for;
* the SDK's ``send_all`` rides out a restart of ``rdss local up`` (stopped, started again on its
  port and state): every message reaches ``input``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.package.conftest import LocalRuntime, bare_environment, checked, run, serve
from tests.support.localup import serving

pytestmark = pytest.mark.slow

VENDORS = ("--vendor", "acme:produces", "--vendor", "archive:consumes=metadata")


@pytest.fixture(scope="module")
def runtime(venv: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRuntime]:
    yield from serve(venv, tmp_path_factory.mktemp("vendor"), *VENDORS)


def shell(runtime: LocalRuntime, script: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    """``script`` in bash in the runtime's home, with nothing exported but what a new user has."""
    return run("bash", "-uo", "pipefail", "-c", script, cwd=runtime.home, env=env or runtime.env)


def one_line(result: subprocess.CompletedProcess[bytes]) -> str:
    """The one line a refused command says, from its exit 2."""
    err = result.stderr.decode()
    assert result.returncode == 2, (result.returncode, result.stdout.decode(), err)
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert lines, err
    return lines[-1]


def tail(runtime: LocalRuntime, channel: str, *options: str) -> list[dict]:  # type: ignore[type-arg]
    """Every record of ``channel``, from the start (the runtime's own deployment, by its state file)."""
    result = checked(shell(runtime, f"rdss tail {channel} --from-start --idle 3 {' '.join(options)}"))
    return [json.loads(line) for line in result.stdout.decode().splitlines()]


def ids(records: list[dict]) -> list[str]:  # type: ignore[type-arg]
    return [r["messageHeader"]["messageId"] for r in records]


def test_the_printed_configuration_works_in_a_fresh_shell_and_each_role_is_held_to_its_policy(
    runtime: LocalRuntime,
) -> None:
    checked(shell(runtime, "rdss vendor config acme > acme.sh && rdss vendor config archive > archive.sh"))
    checked(shell(runtime, "rdss new MetadataCreate > create.json && rdss new MetadataUpdate > update.json"))
    created = json.loads((runtime.home / "create.json").read_bytes())["messageHeader"]["messageId"]
    updated = json.loads((runtime.home / "update.json").read_bytes())["messageHeader"]["messageId"]

    # the producer sends, with the printed configuration and nothing else
    sent = checked(shell(runtime, ". ./acme.sh && rdss send create.json --application acme"))
    assert f"sent {created} to input" in sent.stdout.decode()

    # it may not read metadata: one line, exit 2, at once
    said = one_line(shell(runtime, ". ./acme.sh && rdss tail metadata --application acme --idle 5"))
    assert said.startswith("rdss tail: AccessDeniedException: User: arn:aws:sts::"), said
    assert "assumed-role/rdss-local-vendor-acme/" in said
    assert said.endswith(
        "stream/rdss-local-metadata because no identity-based policy allows the kinesis:ListShards action"
    )

    # the consumer may not put on input: one line, exit 2, nothing sent
    said = one_line(shell(runtime, ". ./archive.sh && rdss send update.json --application archive"))
    assert said.startswith(
        f"rdss send: GENERR006: 1 message(s) not sent, e.g. {updated} (AccessDeniedException: User: "
    )
    assert "kinesis:PutRecords on resource: " in said
    assert said.endswith(
        "stream/rdss-local-input because no identity-based policy allows the kinesis:PutRecords action)"
    )

    # another user's shell: no state file, no credentials to assume the role with
    elsewhere = bare_environment(runtime.home / "elsewhere") | {"PATH": runtime.env["PATH"]}
    said = one_line(shell(runtime, ". ./acme.sh && rdss send update.json --application acme", env=elsewhere))
    assert said.startswith(
        "rdss send: no AWS credentials to assume role arn:aws:iam::123456789012:role/rdss-local-vendor-acme with: "
    ), said

    # the consumer reads what the broker routed to metadata, under its role
    read = checked(shell(runtime, ". ./archive.sh && rdss tail metadata --application archive --from-start --idle 5"))
    assert [json.loads(line)["messageHeader"]["messageId"] for line in read.stdout.decode().splitlines()] == [created]
    # every input accounted for: the one message sent entered once; the refused ones never did
    assert ids(tail(runtime, "input")) == [created]
    assert ids(tail(runtime, "metadata")) == [created]


SENDER = """
import json, sys
from rdss.gateway import Gateway
from rdss.model.workload import Workload

url, count = sys.argv[1], int(sys.argv[2])
first, batch = Workload(1).mix(1), Workload(2).mix(count)
with Gateway(url, application="acme") as gateway:
    gateway.send_all(first)  # the deployment answered this gateway
    print("ready", flush=True)
    sys.stdin.readline()  # local up is stopped now
    receipts = gateway.send_all(batch)
    statuses = {gateway.repository.entry(m["messageHeader"]["messageId"]).status for m in batch}
print(json.dumps({"sent": [m["messageHeader"]["messageId"] for m in first + batch],
                  "receipts": [r.message_id for r in receipts], "statuses": sorted(statuses)}))
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_send_all_rides_out_a_restart_of_local_up(venv: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = bare_environment(home)
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}"
    up = [str(venv / "bin/rdss"), "local", "up", "--port", str(free_port()), "--state", str(home / "kept"), *VENDORS]
    (home / "sender.py").write_text(SENDER)
    with serving(up, env, cwd=home):
        url = json.loads(checked(run("rdss", "vendor", "config", "acme", "--json", cwd=home, env=env)).stdout)["url"]
        sender = subprocess.Popen(
            [str(venv / "bin/python"), "sender.py", url, "40"],
            cwd=home,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert sender.stdout is not None
        assert sender.stdin is not None
        assert sender.stdout.readline() == b"ready\n", sender.stderr.read() if sender.stderr else ""
    # stopped (it exited 0): the sender's batch meets a refused connection, and waits
    sender.stdin.write(b"go\n")
    sender.stdin.flush()
    time.sleep(2)
    with serving(up, env, cwd=home):
        out, err = sender.communicate(timeout=300)
        assert sender.returncode == 0, err.decode()[-3000:]
        assert b"Traceback" not in err, err.decode()[-3000:]
        assert b"retrying in" in err  # it said it was waiting
        outcome = json.loads(out)
        assert outcome["receipts"] == outcome["sent"][1:]
        assert outcome["statuses"] == ["SENT"]
        # every message is on input (at least once: a request cut by the stop may have gone before)
        found = checked(run("rdss", "tail", "input", "--from-start", "--idle", "3", cwd=home, env=env)).stdout
        on_input = {json.loads(line)["messageHeader"]["messageId"] for line in found.decode().splitlines()}
        assert set(outcome["sent"]) <= on_input
