"""Across versions on the local runtime, as vendors run it: each vendor declares the version its
application reads (``rdss local up --vendor NAME:...:reads=4.0.0``), ``rdss vendor config`` says
it, and the gateway opened with that configuration reads that version - a 3.0.2 repository and a
4.0.0 preservation system (and the reverse) exchange create, update, delete and a read
request/reply through the runtime's own broker, each under its vendor role."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from rdss.cli import main
from rdss.gateway import Gateway
from rdss.local.emulator import Endpoint
from rdss.local.runtime import Runtime, Settings
from rdss.local.vendor_stack import LocalVendor
from rdss.model.retry import Backoff
from tests.support import versions

pytestmark = pytest.mark.integration


@pytest.fixture(params=[("3.0.2", "4.0.0"), ("4.0.0", "3.0.2")], ids=["3.0.2-to-4.0.0", "4.0.0-to-3.0.2"])
def runtime(request: Any, endpoint: Endpoint, monkeypatch: pytest.MonkeyPatch) -> Iterator[Runtime]:
    written, read = request.param
    vendors = {
        f"repository-{written.replace('.', '')}": LocalVendor(produces=True, reads=written),
        f"preservation-{read.replace('.', '')}": LocalVendor(consumes=("metadata",), reads=read),
        f"responder-{read.replace('.', '')}": LocalVendor(produces=True, consumes=("metadata",), reads=read),
    }
    runtime = Runtime(endpoint, Settings(environment=f"x{uuid.uuid4().hex[:8]}", shards=1, vendors=vendors))
    runtime.provision()
    for name, value in endpoint.environment().items():  # the vendors' own credentials assume their roles
        monkeypatch.setenv(name, value)
    runtime.start()
    yield runtime
    runtime.stop()
    runtime.deprovision()


def test_vendors_of_different_versions_exchange_through_the_local_runtime(
    runtime: Runtime, capsys: pytest.CaptureFixture[str], tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    url = f"kinesis://{runtime.deployment.environment}?endpoint={runtime.endpoint.url}"
    configs = {}
    for name in runtime.settings.vendors:
        assert main(["vendor", "config", name, "--url", url, "--json"]) == 0
        configs[name] = json.loads(capsys.readouterr().out)
    written = next(c["version"] for n, c in configs.items() if n.startswith("repository"))
    read = next(c["version"] for n, c in configs.items() if n.startswith("preservation"))
    assert (written, read) != ("3.0.2", "3.0.2")

    def make(application: str, **options: Any) -> Gateway:
        config = configs[application]
        assert options.pop("reads") == config["version"]  # what the vendor declared, as its config says
        return Gateway(
            config["url"],
            application=config["application"],
            reads=config["version"],
            backoff=Backoff(max_retries=5, base=0.01),
            lease_duration=1.0,
            reply_poll_interval=0.1,
            **options,
        )

    versions.exchange(make, written=written, read=read, channel="metadata", request_channel="metadata", timeout=60)
