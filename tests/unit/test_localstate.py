"""The local runtime's state file: written whole, read only while its process lives, matched to a
client by its endpoint, and removed by its own process only."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rdss import localstate
from rdss.cli.common import CommandError, deployment_url
from rdss.localstate import LocalState

ENDPOINT = "http://127.0.0.1:4599"


@pytest.fixture(autouse=True)
def state_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    monkeypatch.delenv("RDSS_GATEWAY_URL", raising=False)
    return tmp_path / "rdss" / "local.json"


def state(pid: int | None = None) -> LocalState:
    return LocalState(
        url=localstate.gateway_url("local", ENDPOINT, "eu-west-2"),
        environment="local",
        prefix="rdss",
        endpoint=ENDPOINT,
        region="eu-west-2",
        credentials={"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "secret"},
        pid=os.getpid() if pid is None else pid,
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

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    localstate.write(state(int(gone.stdout)))
    assert localstate.read() is None
    assert localstate.configured_url() is None


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
    from rdss.aws import client

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
    state_home.parent.mkdir(parents=True)
    state_home.write_bytes(content)
    assert localstate.read() is None
    assert localstate.client_settings(ENDPOINT) == {}


def test_only_the_writer_removes_the_file(state_home: Path) -> None:
    localstate.write(state())
    localstate.remove(os.getpid() + 1)
    assert state_home.exists()
    localstate.remove()
    assert not state_home.exists()
    localstate.remove()  # already gone: nothing to do
