"""One local runtime on the embedded emulator, after a realistic workload, served by one
console (actions allowed) for the whole module, and one headless Chromium (Debian's chromium and
chromium-driver: ``make chromium``) driven by selenium."""

from __future__ import annotations

import base64
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from selenium import webdriver

from rdss.gateway import Gateway
from rdss.local.accounting import Input
from rdss.local.emulator import Endpoint, connect
from rdss.local.runtime import Published, Runtime, Settings
from rdss.model import decoration
from rdss.model.workload import Workload
from rdss.status import console
from rdss.status.sources import ConsoleSource
from tests.support.browser import chromium

ROOT = Path(__file__).resolve().parents[2]
#: Where the pages' screenshots go (the docs show them: make console-screenshots).
SCREENSHOTS = ROOT / "build" / "console"
#: What a script that ran would log: the pages must never show it.
SENTINEL = "XSS-RAN"
#: Text fields of a message carrying markup and script in every form a page might interpret.
PAYLOADS = (
    f"<script>console.log('{SENTINEL}')</script>",
    f"<img src=x onerror=console.log('{SENTINEL}')>",
    f"javascript:console.log('{SENTINEL}')",
)


class Crash(BaseException):
    """The broker dies on a poisoned record (a timeout, out of memory): its batch is parked."""


class Poisoned:
    def __init__(self, handler: Any, ids: set[str]) -> None:
        self.handler = handler
        self.ids = ids

    def __call__(self, event: dict[str, Any], context: Any) -> Any:
        for record in event["Records"]:
            data = base64.b64decode(record["kinesis"]["data"])
            if any(i.encode() in data for i in self.ids):
                raise Crash("the broker died on a poisoned record")
        return self.handler(event, context)


@dataclass
class Deployed:
    runtime: Runtime
    published: list[Published]
    #: messageIds of the records whose batch the broker parked
    stuck: list[str]
    poisoned: Poisoned
    #: a routed message's id, to search for
    routed: str
    #: the messageId of the message carrying markup
    hostile: str

    def inputs(self) -> list[Input]:
        return [Input(str(i), [p]) for i, p in enumerate(self.published)]


@pytest.fixture(scope="module")
def endpoint() -> Iterator[Endpoint]:
    endpoint = connect()
    yield endpoint
    endpoint.stop()


def fall_behind(runtime: Runtime, state: Path) -> None:
    """Consumer group ``archive`` reads five records of ``metadata`` and commits: the rest wait
    unread, its lag."""
    endpoint = runtime.endpoint
    url = f"kinesis://{runtime.deployment.environment}?region={endpoint.region}&endpoint={endpoint.url}"
    clients = {"kinesis": endpoint.client("kinesis"), "dynamodb": endpoint.client("dynamodb")}
    gateway = Gateway(f"{url}&ldr=sqlite://{state / 'ldr.sqlite'}", application="archive", clients=clients)
    with gateway, gateway.receiver("metadata", poll_interval=0.05) as inbox:
        for _ in range(5):
            received = inbox.receive(timeout=30)
            assert received is not None
            inbox.ack(received)
        inbox.commit()


@pytest.fixture(scope="module")
def deployed(endpoint: Endpoint, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployed]:
    settings = Settings(environment=f"c{uuid.uuid4().hex[:8]}", shards=2, max_retries=1, sweep_interval=3600)
    runtime = Runtime(endpoint, settings)
    runtime.provision()
    try:
        workload = Workload(33)
        messages = workload.mix(30)
        stuck = [m["messageHeader"]["messageId"] for m in messages[3:5]]
        poisoned = Poisoned(runtime.mappings["broker"].handler, set(stuck))
        runtime.mappings["broker"].handler = poisoned
        # a message whose texts carry markup: its correlationId (not a UUID: GENERR010, and
        # the error's description quotes it) and its title
        hostile = workload.message("MetadataCreate", "Event")
        hostile["messageHeader"]["correlationId"] = PAYLOADS[1]
        hostile["messageBody"]["objectTitle"] = PAYLOADS[0]
        payloads = [orjson.dumps(m) for m in messages] + [orjson.dumps(hostile)]
        published = runtime.publish(payloads)
        # an error code that is markup, as a peer might write one on the error channel
        decorated = decoration.decorate(orjson.dumps(workload.mix(1)[0]), "GENERR004", PAYLOADS[2])
        forged = decorated.replace(b'"errorCode":"GENERR004"', orjson.dumps({"errorCode": PAYLOADS[0]})[1:-1])
        runtime.endpoint.client("kinesis").put_record(
            StreamName=runtime.deployment.stream("error"), Data=forged, PartitionKey="forged"
        )
        runtime.drain()
        assert runtime.failed_batches()["broker"] >= 1, "the workload parks a batch"
        fall_behind(runtime, tmp_path_factory.mktemp("consumer"))
        routed = messages[10]["messageHeader"]["messageId"]
        yield Deployed(runtime, published, stuck, poisoned, routed, hostile["messageHeader"]["messageId"])
    finally:
        runtime.deprovision()


@dataclass
class Served:
    url: str
    base: str
    settings: console.Settings


@pytest.fixture(scope="module")
def served(deployed: Deployed) -> Iterator[Served]:
    source = ConsoleSource(deployed.runtime.deployment, deployed.runtime.endpoint.client)
    server, settings = console.serve(source, allow_actions=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield Served(console.url(settings), f"http://127.0.0.1:{settings.port}", settings)
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    driver = chromium()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    yield driver
    driver.quit()
