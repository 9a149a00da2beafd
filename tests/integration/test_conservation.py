"""Conservation: thousands of messages, invalid ones, duplicates and sequences, pushed through
the local runtime while PutRecords partially fails, DynamoDB throttles and the broker dies
mid-batch. Every input must be accounted for exactly once - routed, invalid, error or
duplicate - no message routed twice, and the audit archive must hold every record published."""

from __future__ import annotations

import copy
import random
import uuid
from collections import Counter
from typing import Any

import orjson
import pytest

from rdss.local.emulator import Endpoint
from rdss.local.runtime import Runtime, Settings
from rdss.sequences import split
from tests.support.faults import Proxy, client_error, partial_put_records
from tools.accounting import Input, account
from tools.workload import Workload

pytestmark = [pytest.mark.integration, pytest.mark.slow]


class Crash(BaseException):
    """The function dies: a timeout, out of memory. Nothing inside it can catch this."""


def faulty_clients(endpoint: Endpoint):
    rng = random.Random(5)
    state = {"throttles": 8, "crashes": 3, "ledgers": 0}

    def transact(real: Any, **kwargs: Any) -> Any:
        if state["throttles"] > 0 and rng.random() < 0.3:
            state["throttles"] -= 1
            raise client_error("ProvisionedThroughputExceededException", "TransactWriteItems")
        return real(**kwargs)

    def put_item(real: Any, **kwargs: Any) -> Any:
        result = real(**kwargs)
        if kwargs["Item"]["messageId"]["S"].startswith("ledger#"):
            state["ledgers"] += 1
            if state["crashes"] > 0 and state["ledgers"] % 4 == 0:
                state["crashes"] -= 1
                raise Crash("the broker died after its outputs were recorded")
        return result

    def clients(processor: str, service: str) -> Any:
        client = endpoint.client(service)
        if processor != "broker":
            return client
        if service == "kinesis":
            throttle = partial_put_records(lambda call, entry: call % 3 == 1 and rng.random() < 0.1)
            return Proxy(client, put_records=throttle)
        if service == "dynamodb":
            return Proxy(client, transact_write_items=transact, put_item=put_item)
        return client

    return clients, state


def invalid_variants(workload: Workload, count: int) -> list[tuple[str, bytes]]:
    made = []
    for i in range(count):
        message = workload.message("MetadataDelete", "Event")
        kind = i % 5
        if kind == 0:
            payload = orjson.dumps(message)[: -(i % 7 + 2)]  # truncated: GENERR007
        elif kind == 1:
            message["messageHeader"]["messageId"] = f"bad-{i}"  # GENERR010
            payload = orjson.dumps(message)
        elif kind == 2:
            del message["messageHeader"]["generator"]  # GENERR004
            payload = orjson.dumps(message)
        elif kind == 3:
            message["messageBody"] = {"objectUuid": message["messageBody"]["objectUuid"], "extra": i}  # GENERR001
            payload = orjson.dumps(message)
        else:
            message["messageHeader"]["messageTimings"]["expirationTimestamp"] = "2020-01-01T00:00:00Z"  # GENERR003
            payload = orjson.dumps(message)
        made.append((f"invalid-{i}", payload))
    return made


def test_every_input_is_accounted_for_exactly_once_under_faults(endpoint: Endpoint):
    clients, state = faulty_clients(endpoint)
    settings = Settings(environment=f"c{uuid.uuid4().hex[:8]}", shards=2, batch_size=100, sweep_interval=3600)
    runtime = Runtime(endpoint, settings, clients=clients)
    runtime.provision()
    workload = Workload(2026)
    rng = random.Random(7)

    items: list[tuple[str, list[bytes]]] = []
    valid = workload.mix(2000)
    items += [(f"valid-{i}", [orjson.dumps(m)]) for i, m in enumerate(valid)]
    items += [(name, [payload]) for name, payload in invalid_variants(workload, 250)]
    copies = [rng.randrange(len(valid)) for _ in range(150)]
    items += [(f"duplicate-{i}", [orjson.dumps(valid[original])]) for i, original in enumerate(copies)]
    for i in range(6):
        parts = [orjson.dumps(p) for p in split(workload.large(40_000), 9_000)]
        items.append((f"sequence-{i}", parts))
    bad = workload.large(40_000)
    del bad["messageBody"]["objectTitle"]
    items.append(("sequence-invalid", [orjson.dumps(p) for p in split(bad, 9_000)]))
    items.append(("duplicate-part", [copy.copy(items[-2][1][1])]))  # a part published twice

    payloads = [p for _, records in items for p in records]
    published = runtime.publish(payloads)
    inputs, cursor = [], 0
    for name, records in items:
        inputs.append(Input(name, published[cursor : cursor + len(records)]))
        cursor += len(records)

    runtime.drain(timeout=600)
    result = account(runtime, inputs)
    outcomes = result.outcomes()

    assert set(outcomes) <= {"routed", "invalid", "error", "duplicate"}, outcomes
    by_name = {a.name: a for a in result.inputs}
    # a message published several times is routed once; which copy wins depends on the shards
    groups: dict[int, list[str]] = {i: [f"valid-{i}"] for i in range(len(valid))}
    for i, original in enumerate(copies):
        groups[original].append(f"duplicate-{i}")
    for names in groups.values():
        fates = Counter(by_name[n].outcome for n in names)
        assert fates["routed"] == 1, (names, fates)
        assert fates["duplicate"] == len(names) - 1, (names, fates)
    assert all(by_name[f"sequence-{i}"].outcome == "routed" for i in range(6))
    assert by_name["sequence-invalid"].outcome == "invalid"
    assert by_name["duplicate-part"].outcome == "duplicate"
    invalid = [a for a in result.inputs if a.name.startswith("invalid-")]
    assert Counter(a.outcome for a in invalid) == {"invalid": 200, "error": 50}
    # none routed twice; every valid message routed
    assert max(result.routed_ids.values()) == 1
    assert len(result.routed_ids) == len(valid) + sum(
        len(r) for n, r in items if n.startswith("sequence-") and n != "sequence-invalid"
    )
    # the audit archive holds every record published, as published
    assert Counter(result.audit_records) == Counter(payloads)
    # the faults really happened
    assert state["crashes"] == 0
    assert state["throttles"] < 8
    broker = runtime.mappings["broker"].stats
    assert broker.function_errors >= 3
    assert broker.bisections >= 1
    assert runtime.failed_batches() == {"broker": 0, "sequencer": 0}
    runtime.deprovision()
