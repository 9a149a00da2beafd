"""A ``role=`` URL assumes the vendor's role with the gateway's own (base) credentials: with none
anywhere, the gateway says so in one line naming what is missing - never botocore's
``'NoneType' object has no attribute 'get_frozen_credentials'`` - and the commands exit 2."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rdss.aws.clients import assumed_session
from rdss.aws.failures import ClientConfigurationError
from rdss.cli import main
from rdss.gateway import Gateway
from rdss.host import pointers as localstate
from tests.conftest import EXAMPLES

ROLE = "arn:aws:iam::123456789012:role/rdss-local-vendor-acme"
VALID = EXAMPLES / "valid" / "metadata-create-command.json"


@pytest.fixture(autouse=True)
def no_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No credentials in the environment, the shared files, the instance metadata or a running
    local runtime's state file."""
    for name in list(os.environ):
        if name.startswith(("AWS_", "RDSS_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


def url(endpoint: str | None = None) -> str:
    query = f"region=eu-west-2&role={ROLE}&external_id=d327b3e3b5be4114e7602b84"
    return f"kinesis://local?{query}" + (f"&endpoint={endpoint}" if endpoint else "")


def test_the_gateway_names_what_is_missing() -> None:
    with pytest.raises(ClientConfigurationError) as raised:
        Gateway(url(), application="acme")
    said = str(raised.value)
    assert said.startswith(f"no AWS credentials to assume role {ROLE} with: set AWS_PROFILE, or AWS_ACCESS_KEY_ID")
    assert "\n" not in said


def test_rdss_send_exits_2_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["send", str(VALID), "--url", url("http://127.0.0.1:9"), "--application", "acme"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith("rdss send: no AWS credentials to assume role"), err
    assert "Traceback" not in err
    assert "get_frozen_credentials" not in err
    # no local runtime here: the local deployment's credentials come from where it runs
    assert "run where it runs: its state file" in err


def test_a_url_printed_before_a_restart_on_another_port_says_where_it_serves_now(
    capsys: pytest.CaptureFixture[str],
) -> None:
    running = "http://127.0.0.1:41001"
    localstate.write(
        localstate.LocalState(
            url=localstate.gateway_url("local", running, "eu-west-2"),
            environment="local",
            prefix="rdss",
            endpoint=running,
            region="eu-west-2",
            credentials={"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"},
            pid=os.getpid(),  # alive: this process
        )
    )
    assert main(["tail", "metadata", "--idle", "1", "--url", url("http://127.0.0.1:41002")]) == 2
    err = capsys.readouterr().err
    assert f"rdss local up serves {running} now, not http://127.0.0.1:41002" in err, err
    assert err.count("\n") == 1, err


@given(
    account=st.from_regex(r"\d{12}", fullmatch=True),
    name=st.from_regex(r"[\w+=,.@-]{1,64}", fullmatch=True),
    external_id=st.none() | st.from_regex(r"[\w+=,.@:/-]{2,64}", fullmatch=True),
    endpoint=st.none() | st.integers(1, 65535).map(lambda port: f"http://127.0.0.1:{port}"),
    region=st.none() | st.sampled_from(["eu-west-2", "us-east-1"]),
)
def test_any_role_without_base_credentials_is_one_line(
    account: str, name: str, external_id: str | None, endpoint: str | None, region: str | None
) -> None:
    """Whatever the role, external ID, endpoint and region: one line naming the role, raised
    before any call is made."""
    role = f"arn:aws:iam::{account}:role/{name}"
    with pytest.raises(ClientConfigurationError) as raised:
        assumed_session(role, external_id=external_id, session_name="rdss-gateway", region=region, endpoint=endpoint)
    said = str(raised.value)
    assert said.startswith(f"no AWS credentials to assume role {role} with:")
    assert "\n" not in said
