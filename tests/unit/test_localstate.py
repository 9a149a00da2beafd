"""The local runtimes' state files: one per runtime, written whole, read only while its runtime
runs, matched to a client by its endpoint, removed by its own process only; among several, the one
``--local`` (``RDSS_LOCAL``) names, else the one started last - said in one line."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rdss.cli.common import CommandError, deployment_url
from rdss.host import pointers as localstate
from rdss.host.pointers import LocalState

ENDPOINT = "http://127.0.0.1:4599"


@pytest.fixture(autouse=True)
def state_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    monkeypatch.delenv("RDSS_GATEWAY_URL", raising=False)
    monkeypatch.delenv("RDSS_LOCAL", raising=False)
    return tmp_path / "rdss" / "running" / f"{os.getpid()}.json"


def state(pid: int | None = None, *, environment: str = "local", endpoint: str = ENDPOINT, **more: Any) -> LocalState:
    return LocalState(
        url=localstate.gateway_url(environment, endpoint, "eu-west-2"),
        environment=environment,
        prefix="rdss",
        endpoint=endpoint,
        region="eu-west-2",
        credentials={"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "secret"},
        pid=os.getpid() if pid is None else pid,
        **more,
    )


def test_the_url_names_the_deployment_endpoint_region_and_a_prefix_other_than_rdss() -> None:
    assert localstate.gateway_url("local", ENDPOINT, "eu-west-2") == (
        "kinesis://local?endpoint=http://127.0.0.1:4599&region=eu-west-2"
    )
    assert localstate.gateway_url("t", ENDPOINT, "us-east-1", "x").endswith("&region=us-east-1&prefix=x")


def test_a_running_runtime_names_the_deployment_and_a_gone_one_does_not(state_home: Path) -> None:
    assert localstate.configured_url() is None
    with pytest.raises(CommandError, match="no deployment named"):
        deployment_url(None)

    localstate.write(state())
    assert state_home.stat().st_mode & 0o777 == 0o600
    assert localstate.configured_url() == "kinesis://local?endpoint=http://127.0.0.1:4599&region=eu-west-2"
    assert deployment_url(None) == localstate.configured_url()
    assert deployment_url("memory://x") == "memory://x"  # --url first

    localstate.remove()
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = localstate.write(state(int(gone.stdout)))
    assert localstate.read() is None
    assert localstate.configured_url() is None
    assert not stale.exists()  # a runtime killed with SIGKILL leaves its file: gone once seen stale


def test_a_client_aimed_at_the_runtime_gets_its_region_and_credentials_and_no_other_does() -> None:
    localstate.write(state())
    expected = {
        "region_name": "eu-west-2",
        "aws_access_key_id": "testing",
        "aws_secret_access_key": "secret",
    }
    assert localstate.client_settings(ENDPOINT) == expected
    assert localstate.client_settings(ENDPOINT + "/") == expected
    assert localstate.client_settings("http://127.0.0.1:4598") == {}
    assert localstate.client_settings("https://kinesis.eu-west-2.amazonaws.com") == {}
    assert localstate.client_settings(None) == {}


def test_rdss_clients_aimed_at_the_runtime_need_no_exports(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    from rdss.aws.clients import client

    localstate.write(state())
    kinesis = client("kinesis", endpoint_url=ENDPOINT)
    assert kinesis.meta.region_name == "eu-west-2"
    assert kinesis._request_signer._credentials.access_key == "testing"
    # a region named explicitly wins
    assert client("kinesis", endpoint_url=ENDPOINT, region_name="us-east-1").meta.region_name == "us-east-1"


@pytest.mark.parametrize(
    "content",
    [b"", b"not json", b"[]", b'{"url": 1}', b'{"url": "u", "environment": "e", "prefix": "p", "endpoint": "x"}'],
)
def test_a_damaged_file_is_no_configuration(state_home: Path, content: bytes) -> None:
    state_home.parent.mkdir(parents=True, mode=0o700)
    state_home.write_bytes(content)
    assert localstate.read() is None
    assert localstate.client_settings(ENDPOINT) == {}


def test_only_the_writer_removes_the_file(state_home: Path) -> None:
    localstate.write(state())
    other = localstate.write(state(os.getppid(), environment="other", endpoint="http://127.0.0.1:4598"))
    localstate.remove(os.getpid() + 1)
    assert state_home.exists()
    localstate.remove()
    assert not state_home.exists()
    assert other.exists()  # another runtime's file stays: it still serves
    assert localstate.read() == state(os.getppid(), environment="other", endpoint="http://127.0.0.1:4598")
    localstate.remove()  # already gone: nothing to do


def test_among_several_the_one_named_else_the_latest_and_it_is_said(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # two runtimes, each with its state directory locked as a running one holds it
    held = []
    for name in ("a", "b"):
        directory = tmp_path / name
        directory.mkdir()
        fd = os.open(directory / "lock", os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        held.append(fd)
    first = state(
        os.getppid(), environment="dev", endpoint="http://127.0.0.1:4591", state=str(tmp_path / "a"), started=1.0
    )
    second = state(environment="local", endpoint="http://127.0.0.1:4592", state=str(tmp_path / "b"), started=2.0)
    localstate.write(first)
    localstate.write(second)
    try:
        with caplog.at_level("WARNING"):
            assert localstate.read() == second  # the one started last
        said = [r.getMessage() for r in caplog.records]
        assert len(said) == 1
        assert said[0].startswith("2 local runtimes are running; using the one started last, deployment local")
        assert f"state {tmp_path / 'a'}" in said[0]
        assert "--local ENV|DIR" in said[0]
        monkeypatch.setenv("RDSS_LOCAL", "dev")
        assert localstate.read() == first
        monkeypatch.setenv("RDSS_LOCAL", str(tmp_path / "b"))
        assert localstate.read() == second
        assert localstate.client_settings("http://127.0.0.1:4591")["region_name"] == "eu-west-2"  # each by its endpoint
        monkeypatch.setenv("RDSS_LOCAL", "prod")
        with pytest.raises(localstate.NoSuchRuntime, match="no running local runtime has deployment or state 'prod'"):
            localstate.read()
        with pytest.raises(CommandError, match=r"'prod' .*deployment dev") as refused:
            deployment_url(None)
        assert refused.value.exit_code == 2
    finally:
        for fd in held:
            os.close(fd)
    monkeypatch.delenv("RDSS_LOCAL")
    assert localstate.read() is None  # their state directories are no longer locked: stopped


def test_a_file_another_user_could_have_written_is_not_read(state_home: Path) -> None:
    localstate.write(state())
    os.chmod(state_home.parent, 0o777)
    assert localstate.read() is None  # a directory anyone can write: anyone could point us elsewhere
    os.chmod(state_home.parent, 0o700)
    os.chown(state_home, 65534, 65534)
    assert localstate.read() is None
