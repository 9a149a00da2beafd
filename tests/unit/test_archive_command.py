"""``rdss archive`` when its target fails: said at start in one line, and the group's leases given
back when a write fails mid-run (a restart reads at once instead of waiting out the lease)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from moto import mock_aws

from rdss.cli import main
from rdss.gateway.backend import Delivery
from rdss.gateway.wiretap import Archiver


def test_a_bucket_that_is_not_there_is_refused_at_start(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-2")
    with mock_aws():
        code = main(["archive", "--url", "memory://archive-test", "--to", "s3://no-such-bucket/audit", "--idle", "1"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("rdss archive: --to s3://no-such-bucket/audit:")
    assert "Traceback" not in err
    assert err.count("\n") == 1


class _Consumer:
    def __init__(self) -> None:
        self.closed = False
        self.committed = False
        self._left = [Delivery("input", "p0", "1", b"{}", "k", 0.0)]

    def poll(self, max_messages: int = 100, *, wait: float = 0.0, **_: Any) -> list[Delivery]:
        deliveries, self._left = self._left, []
        return deliveries

    def settle(self, deliveries: Sequence[Delivery]) -> None:
        raise AssertionError("nothing settles before its object is written")

    def commit(self) -> None:
        self.committed = True

    def close(self) -> None:
        self.closed = True


class _Transport:
    def __init__(self) -> None:
        self.made = _Consumer()

    def consumer(self, channel: str, **_: Any) -> _Consumer:
        return self.made


class _Refusing:
    def put(self, key: str, body: bytes) -> None:
        raise OSError(28, "No space left on device")


def test_a_write_that_fails_closes_the_consumer_and_settles_nothing() -> None:
    transport = _Transport()
    archiver = Archiver(transport, _Refusing(), buffer_seconds=3600)  # type: ignore[arg-type]
    with pytest.raises(OSError, match="No space"):
        archiver.run(idle_timeout=0.01, poll_interval=0.0)
    assert transport.made.closed
    assert archiver.stats.records == 0
