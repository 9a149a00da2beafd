"""Retries are for what passes - throttling, 5xx, timeouts, and a connection lost to an endpoint
that has answered before (it is restarting) - and bounded; everything else fails at once:
connection refused by an endpoint that never answered, a name that does not resolve, no
credentials, a missing stream, a role STS refuses."""

from __future__ import annotations

import socket
import time
from typing import Any

import pytest
from botocore.exceptions import (
    ClientError,
    ConnectionClosedError,
    EndpointConnectionError,
    HTTPClientError,
    NoCredentialsError,
    NoRegionError,
    ParamValidationError,
    ReadTimeoutError,
    SSLError,
)
from botocore.hooks import HierarchicalEmitter
from hypothesis import given
from hypothesis import strategies as st

from rdss.aws.clients import assumed_session, client
from rdss.aws.failures import Answered, ClientConfigurationError, describe, transient, unusable
from rdss.aws.putrecords import PutRecordsBatcher, Record
from rdss.model.retry import Backoff


def refusal(code: str, status: int = 400) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": "no"}, "ResponseMetadata": {"HTTPStatusCode": status}}, "Op")


@pytest.mark.parametrize(
    ("error", "again"),
    [
        (refusal("ThrottlingException"), True),
        (refusal("ProvisionedThroughputExceededException"), True),
        (refusal("InternalFailure", 500), True),
        (refusal("Whatever", 503), True),
        (ReadTimeoutError(endpoint_url="http://x"), True),
        (ConnectionClosedError(endpoint_url="http://x"), True),
        (EndpointConnectionError(endpoint_url="http://x"), False),
        (NoCredentialsError(), False),
        (NoRegionError(), False),
        (ParamValidationError(report="ExternalId too short"), False),
        (refusal("ResourceNotFoundException"), False),
        (refusal("AccessDeniedException"), False),
        (refusal("ValidationError"), False),
    ],
)
def test_only_what_passes_is_retried(error, again):
    assert transient(error) is again


def test_what_says_the_deployment_cannot_be_used():
    assert all(unusable(code) for code in ("EndpointConnectionError", "ResourceNotFoundException", "NoRegionError"))
    assert not any(unusable(code) for code in ("ProvisionedThroughputExceededException", "RecordTooLarge"))
    assert describe(refusal("ResourceNotFoundException")) == "ResourceNotFoundException: no"


class _Kinesis:
    """Answers put_records with each error in turn, then succeeds."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.calls = 0

    def put_records(self, StreamName: str, Records: list[dict[str, Any]]) -> dict[str, Any]:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return {"Records": [{"ShardId": "shardId-0", "SequenceNumber": str(n)} for n in range(len(Records))]}


def put(kinesis: _Kinesis) -> tuple[Any, list[float]]:
    waits: list[float] = []
    batcher = PutRecordsBatcher(kinesis, backoff=Backoff(max_retries=3), sleep=waits.append)
    return batcher.put([Record("s", b"{}", "k")]), waits


@pytest.mark.parametrize(
    "error",
    [
        EndpointConnectionError(endpoint_url="http://127.0.0.1:9/"),
        NoCredentialsError(),
        refusal("ResourceNotFoundException"),
    ],
    ids=["refused", "no-credentials", "no-stream"],
)
def test_a_failure_no_retry_would_change_fails_at_once(error):
    kinesis = _Kinesis(error)
    report, waits = put(kinesis)
    assert (kinesis.calls, waits) == (1, [])
    assert [(f.error_code, f.retries_exhausted) for f in report.failed] == [
        (type(error).__name__ if not isinstance(error, ClientError) else "ResourceNotFoundException", False)
    ]


def test_throttling_and_timeouts_are_retried_within_bounds():
    kinesis = _Kinesis(refusal("ThrottlingException"), ReadTimeoutError(endpoint_url="http://x"))
    report, waits = put(kinesis)
    assert kinesis.calls == 3
    assert waits == [0.2, 0.4]
    assert len(report.delivered) == 1

    forever = _Kinesis(*[refusal("InternalFailure", 500)] * 10)
    report, waits = put(forever)
    assert forever.calls == 4  # the first attempt and 3 retries
    assert report.failed[0].retries_exhausted


def test_a_role_is_assumed_when_the_gateway_opens(monkeypatch):
    """A role or external ID STS refuses, or STS unreachable, is said at once - not on every
    call of every retry later."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(EndpointConnectionError):
        assumed_session(
            "arn:aws:iam::123456789012:role/r",
            external_id="abcdef",
            session_name="test",
            region="eu-west-2",
            endpoint=f"http://127.0.0.1:{port}",
        )
    assert time.monotonic() - started < 15


def test_a_client_that_cannot_be_made_is_a_botocore_error(monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", "garbage")
    with pytest.raises(ClientConfigurationError, match="cannot use garbage for kinesis"):
        client("kinesis", region_name="eu-west-2")


def test_a_client_without_a_region_says_where_to_give_one(monkeypatch, tmp_path):
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))  # no rdss local up's state file
    with pytest.raises(ClientConfigurationError, match=r"no AWS region for kinesis: .*\?region=REGION"):
        client("kinesis")


class _Answering(_Kinesis):
    """:class:`_Kinesis` with botocore's event system: each answer emits ``after-call``, as a
    boto3 client does."""

    def __init__(self, *errors: BaseException) -> None:
        super().__init__(*errors)
        self.meta = type("Meta", (), {"events": HierarchicalEmitter()})()

    def put_records(self, StreamName: str, Records: list[dict[str, Any]]) -> dict[str, Any]:
        answer = super().put_records(StreamName, Records)
        self.meta.events.emit("after-call.kinesis.PutRecords", http_response=None, parsed=answer)
        return answer


LOST = {
    "refused": lambda: EndpointConnectionError(endpoint_url="http://127.0.0.1:4566/"),
    "closed": lambda: ConnectionClosedError(endpoint_url="http://127.0.0.1:4566/"),
    "reset": lambda: HTTPClientError(error=ConnectionResetError(104, "Connection reset by peer")),
}


@given(
    kinds=st.lists(st.sampled_from(sorted(LOST)), max_size=6),
    answered_before=st.booleans(),
    retries=st.integers(0, 4),
)
def test_a_connection_lost_after_the_endpoint_answered_is_retried_within_the_backoff(kinds, answered_before, retries):
    """An endpoint restarting: once it has answered, a connection refused, closed or reset is
    retried with the spec's delays until it answers again or the retries run out (GENERR005:
    ``retries_exhausted``); before it ever answered, it is a wrong address, told at once."""
    kinesis = _Answering()
    answered = Answered()
    answered.watch(kinesis)
    waits: list[float] = []
    batcher = PutRecordsBatcher(
        kinesis, backoff=Backoff(max_retries=retries), sleep=waits.append, retry_on=answered.transient
    )
    if answered_before:
        assert batcher.put([Record("s", b"{}", "first")]).ok
    kinesis.errors, kinesis.calls = [LOST[kind]() for kind in kinds], 0
    report = batcher.put([Record("s", b"{}", "k")])
    # the model: the k-th failure is retried if the endpoint answered before (a restart) or it
    # passes anyway (a connection closed mid-call), while retries are left
    spec = [0.2 * 2**n for n in range(retries)]
    calls, outcome = 0, "delivered"
    for error in [LOST[kind]() for kind in kinds]:
        calls += 1
        if not (answered_before or transient(error)):
            outcome = "failed at once"
            break
        if calls > retries:
            outcome = "retries exhausted"
            break
    else:
        calls += 1
    assert kinesis.calls == calls
    assert waits == pytest.approx(spec[: min(calls - 1, retries)])
    if outcome == "delivered":
        assert report.ok
    else:
        assert [f.retries_exhausted for f in report.failed] == [outcome == "retries exhausted"]
    if kinds and answered_before:  # a restart never fails at once
        assert outcome != "failed at once"


def test_a_certificate_refused_is_never_a_restart():
    answered = Answered()
    answered.answered = True
    assert not answered.transient(SSLError(endpoint_url="https://x", error="certificate verify failed"))
    assert answered.transient(EndpointConnectionError(endpoint_url="https://x"))
