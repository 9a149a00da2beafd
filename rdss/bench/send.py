"""``rdss bench send``: the gateway's batch send against the embedded emulator.

N messages go through :meth:`rdss.gateway.Gateway.send_all` exactly as a vendor's application
in AWS sends them: classified, recorded TO_SEND in its Local Data Repository (a DynamoDB table of
its own, ``ldr=dynamodb://``), put with batched PutRecords (500 a call), recorded SENT. Every AWS
call is real HTTP to the emulator (or to ``AWS_ENDPOINT_URL`` when set); a botocore
``before-call`` hook counts them by operation.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from rdss.bench.aws_calls import CallCounter
from rdss.bench.figures import Measured
from rdss.deployment.topology import Deployment
from rdss.model.messages import Message
from rdss.model.workload import Workload


@dataclass(frozen=True)
class Figures(Measured):
    messages: int
    mean_bytes: float
    shards: int
    seconds: float
    aws: str
    #: AWS calls by operation (data plane and control plane alike).
    calls: dict[str, int]

    @property
    def messages_per_second(self) -> float:
        return self.messages / self.seconds

    @property
    def put_records_calls(self) -> int:
        return self.calls.get("PutRecords", 0)

    @property
    def put_records_per_1000(self) -> float:
        return self.put_records_calls * 1000 / self.messages

    @property
    def calls_per_1000(self) -> float:
        return sum(self.calls.values()) * 1000 / self.messages


def _client(endpoint: Any, service: str) -> Any:
    """A client configured as the gateway configures its own, pointed at ``endpoint``."""
    from rdss.gateway.log.kinesis import GATEWAY_CLIENT_CONFIG

    return endpoint.client(service, config=GATEWAY_CLIENT_CONFIG)


def small_messages(count: int, seed: int = 5) -> list[Message]:
    """``count`` small valid messages (MetadataDelete events, ~0.5 kB each)."""
    workload = Workload(seed)
    return [workload.message("MetadataDelete", "Event") for _ in range(count)]


def run(count: int, *, shards: int = 2, realistic: bool = False, seed: int = 5, journal: bool = False) -> Figures:
    """Time one ``send_all`` of ``count`` messages; count the AWS calls it makes. With
    ``journal``, against an embedded emulator keeping its journal as ``rdss local up`` does."""
    messages = Workload(seed).mix(count) if realistic else small_messages(count, seed)
    if not journal:
        from rdss.local.emulator import connect

        return _run(messages, shards, connect())
    from rdss.local.emulator import Emulator
    from rdss.local.state import StateDirectory

    with tempfile.TemporaryDirectory(prefix="rdss-bench-send-") as directory:
        state = StateDirectory(Path(directory))
        try:
            emulator = Emulator(state=state)
            emulator.recover()
            return _run(messages, shards, emulator.open(), "embedded emulator with its journal")
        finally:
            state.close()


def _run(messages: list[Message], shards: int, endpoint: Any, aws: str | None = None) -> Figures:
    from rdss.gateway import Gateway
    from rdss.local.emulator import provisioned
    from rdss.repository.dynamodb import create_table

    count = len(messages)
    mean = sum(len(orjson.dumps(m)) for m in messages) / count
    aws = aws or ("embedded emulator" if endpoint.embedded else (endpoint.url or "AWS"))
    deployment = Deployment(f"bench{int(time.time())}")
    ldr = f"bench-{deployment.environment}-ldr"
    try:
        with provisioned(endpoint, deployment, shards=shards, tables=[ldr]):
            counter = CallCounter()
            clients = {
                "kinesis": counter.attach(endpoint.client("kinesis")),
                "dynamodb": counter.attach(endpoint.client("dynamodb")),
            }
            create_table(clients["dynamodb"], ldr)
            url = f"kinesis://{deployment.environment}?region={endpoint.region}&ldr=dynamodb://{ldr}"
            if endpoint.url:
                url += f"&endpoint={endpoint.url}"
            with Gateway(url, application="bench", clients=clients) as gateway:
                counter.start()
                started = time.perf_counter()
                receipts = gateway.send_all(messages)
                seconds = time.perf_counter() - started
                counter.stop()
            if len(receipts) != count:  # pragma: no cover - send_all raises first
                raise AssertionError(f"{count - len(receipts)} messages not sent")
    finally:
        endpoint.stop()
    return Figures(count, mean, shards, seconds, aws, counter.counted())
