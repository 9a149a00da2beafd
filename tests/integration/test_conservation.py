"""Conservation: thousands of messages, invalid ones, duplicates and sequences, pushed through
the local runtime while PutRecords partially fails, DynamoDB throttles and the broker dies
mid-batch - and on some records dies every time until an operator redrives the batches it
parked. Every input must be accounted for exactly once - routed, invalid, error or duplicate -
no message routed twice, and the audit archive must hold every record published (and redriven).

Then a vendor's gateway consumes the metadata channel: some messages are poison to its handler,
and invalid records were written straight onto the channel. Each routed message is processed
once or moved to ``error`` (GENERR009) once; each invalid record is moved to ``invalid`` once -
by the consumer itself, keyed ``moved:<group>``: its moves never enter ``input``, so the accounting
of every published record is the same after the consumer as before."""

from __future__ import annotations

import copy
import random
import threading
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from rdss.aws.putrecords import PutRecordsBatcher, Record
from rdss.cli import main
from rdss.gateway import Gateway, Received
from rdss.gateway.received import ReceiveStats
from rdss.local.accounting import Accounting, Input, account, read_channel
from rdss.local.emulator import Endpoint
from rdss.local.runtime import Runtime, Settings
from rdss.model import decoration
from rdss.model.retry import Backoff
from rdss.model.sequences import split
from rdss.model.workload import Workload
from tests.support.breadth import share
from tests.support.faults import Proxy, client_error, partial_put_records
from tests.support.listening import listen_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

#: invalid records published, a fifth of each kind (four kinds invalid, one - expired - error)
INVALID = share(250, floor=5)


class Crash(BaseException):
    """The function dies: a timeout, out of memory. Nothing inside it can catch this."""


def faulty_clients(endpoint: Endpoint, stuck: set[str]):
    """Broker clients with faults; ``stuck`` messageIds crash the broker whenever it claims them
    (until the set is emptied), so their batches end in the on-failure queue."""
    rng = random.Random(5)
    state = {"throttles": 8, "crashes": 3, "ledgers": 0, "stuck": 0}

    lock = threading.Lock()  # the broker's claims are made from a pool of threads

    def put_item(real: Any, **kwargs: Any) -> Any:
        if "ConditionExpression" in kwargs:  # a claim
            if kwargs["Item"]["messageId"]["S"] in stuck:
                with lock:
                    state["stuck"] += 1
                raise Crash("the broker dies on this record every time")
            with lock:
                throttle = state["throttles"] > 0 and rng.random() < 0.3
                state["throttles"] -= throttle
            if throttle:
                raise client_error("ProvisionedThroughputExceededException", "PutItem")
            return real(**kwargs)
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
            return Proxy(client, put_item=put_item)
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


def test_every_input_is_accounted_for_exactly_once_under_faults(
    endpoint: Endpoint, runtimes: Callable[..., Runtime], monkeypatch: pytest.MonkeyPatch
):
    for name, value in endpoint.environment().items():  # for `rdss redrive`, as an operator would
        monkeypatch.setenv(name, value)
    stuck: set[str] = set()
    clients, state = faulty_clients(endpoint, stuck)
    settings = Settings(
        environment=f"c{uuid.uuid4().hex[:8]}", shards=2, batch_size=100, sweep_interval=3600, max_retries=2
    )
    runtime = runtimes(settings, clients=clients)
    runtime.provision()
    workload = Workload(2026)
    rng = random.Random(7)

    items: list[tuple[str, list[bytes]]] = []
    valid = workload.mix(share(2000))
    items += [(f"valid-{i}", [orjson.dumps(m)]) for i, m in enumerate(valid)]
    items += [(name, [payload]) for name, payload in invalid_variants(workload, INVALID)]
    copies = [rng.randrange(len(valid)) for _ in range(share(150))]
    items += [(f"duplicate-{i}", [orjson.dumps(valid[original])]) for i, original in enumerate(copies)]
    for i in range(6):
        parts = [orjson.dumps(p) for p in split(workload.large(40_000), 9_000)]
        items.append((f"sequence-{i}", parts))
    bad = workload.large(40_000)
    del bad["messageBody"]["objectTitle"]
    items.append(("sequence-invalid", [orjson.dumps(p) for p in split(bad, 9_000)]))
    items.append(("duplicate-part", [copy.copy(items[-2][1][1])]))  # a part published twice

    # the broker dies on these whenever it meets them, until the operator steps in
    stuck.update(valid[i]["messageHeader"]["messageId"] for i in rng.sample(range(len(valid)), 5))
    payloads = [p for _, records in items for p in records]
    published = runtime.publish(payloads)
    inputs, cursor = [], 0
    for name, records in items:
        inputs.append(Input(name, published[cursor : cursor + len(records)]))
        cursor += len(records)

    runtime.drain(timeout=600)
    parked = runtime.failed_batches()["broker"]
    assert parked >= 1  # the batches with a stuck record
    assert sum(o == "unaccounted" for o in (a.outcome for a in account(runtime, inputs).inputs)) >= len(stuck)

    # the operator fixes the cause, then redrives what the mapping parked
    stuck.clear()
    assert main(["redrive", "--url", f"kinesis://{settings.environment}", "--dry-run"]) == 0
    assert main(["redrive", "--url", f"kinesis://{settings.environment}"]) == 0
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
    assert Counter(a.outcome for a in invalid) == {"invalid": INVALID * 4 // 5, "error": INVALID // 5}
    # none routed twice; every valid message routed
    assert max(result.routed_ids.values()) == 1
    assert len(result.routed_ids) == len(valid) + sum(
        len(r) for n, r in items if n.startswith("sequence-") and n != "sequence-invalid"
    )
    # the audit archive holds every record published, as published - and each redriven copy
    audit = Counter(result.audit_records)
    assert Counter(payloads) - audit == Counter()  # nothing published is missing
    redriven = audit - Counter(payloads)
    assert set(redriven) <= set(payloads)  # and what is there twice was redriven, once
    assert 1 <= redriven.total() <= sum(b.batch_size for b in runtime.mappings["broker"].stats.failed_batches)
    # the faults really happened
    assert state["crashes"] == 0
    assert state["throttles"] < 8
    broker = runtime.mappings["broker"].stats
    assert broker.function_errors >= 3
    assert broker.bisections >= 1
    assert state["stuck"] >= parked
    assert runtime.failed_batches() == {"broker": 0, "sequencer": 0, "archiver": 0}

    consume_metadata(runtime, endpoint, workload, inputs, result)


def consume_metadata(
    runtime: Runtime, endpoint: Endpoint, workload: Workload, inputs: list[Input], before: Accounting
) -> None:
    """A vendor's consumer of ``metadata``: poison messages and invalid records written straight
    onto the channel are moved, never skipped, never stuck; everything else is processed once."""
    routed = read_channel(runtime, "metadata")
    entered = len(read_channel(runtime, "input"))
    headers = [orjson.loads(r)["messageHeader"] for r in routed]
    whole = sorted(h["messageId"] for h in headers if h["messageSequence"]["total"] == 1)
    sequences = {h["messageSequence"]["sequence"] for h in headers if h["messageSequence"]["total"] > 1}
    poison = set(random.Random(11).sample(whole, 4))
    direct = [payload for _, payload in invalid_variants(workload, 10) if b"2020-01-01T00:00:00Z" not in payload]
    stream = runtime.deployment.stream("metadata")
    report = PutRecordsBatcher(endpoint.client("kinesis")).put(
        [Record(stream, payload, f"direct-{i}") for i, payload in enumerate(direct)]
    )
    assert report.ok
    url = f"kinesis://{runtime.deployment.environment}?endpoint={endpoint.url}&region={endpoint.region}"
    processed: Counter[str] = Counter()

    def handler(received: Received) -> None:
        if received.message_id in poison:
            raise ValueError(f"cannot map {received.message_type} to the repository's schema")
        processed[received.message_id] += 1

    expected = len(whole) - len(poison) + len(sequences)  # (sequences as one message)

    def done(stats: ReceiveStats) -> bool:  # everything handled, moved or refused
        return len(processed) >= expected and stats.poison >= len(poison) and stats.invalid >= len(direct)

    with Gateway(url, application="vendor", lease_duration=2.0) as vendor:
        stats = listen_until(
            vendor, "metadata", handler, done, max_attempts=2, backoff=Backoff(base=0.01), poll_interval=0.05
        )
        entries = {i: vendor.repository.entry(i) for i in poison}
    # the consumer put its moves on invalid and error itself: nothing entered input, the broker
    # had nothing more to do, and every published record is accounted as it was before
    assert len(read_channel(runtime, "input")) == entered
    runtime.drain(timeout=300)
    assert runtime.failed_batches() == {"broker": 0, "sequencer": 0, "archiver": 0}
    after = account(runtime, inputs)
    assert [a.as_report() for a in after.inputs] == [a.as_report() for a in before.inputs]
    assert after.unreadable == before.unreadable == 0
    assert before.moves == []
    # the moves, each once, told apart by their partition key moved:vendor
    moves = Counter((m.group, m.channel, m.error_code) for m in after.moves)
    assert moves[("vendor", "error", "GENERR009")] == len(poison)
    moved_invalid = [(m.message_id, m.error_code) for m in after.moves if m.channel == "invalid"]
    assert len(moved_invalid) == len(direct), moved_invalid
    assert {group for group, _, _ in moves} == {"vendor"}
    assert Counter(m.message_id for m in after.moves if m.error_code == "GENERR009") == Counter(poison)
    assert set(whole) - poison <= set(processed)  # every other routed message processed...
    assert len(processed) == expected
    assert max(processed.values()) == 1  # ...once
    assert stats.poison == len(poison)
    assert stats.invalid == len(direct)
    moved = [orjson.loads(r)["messageHeader"] for r in read_channel(runtime, "error")]
    assert Counter(h["messageId"] for h in moved if h.get("errorCode") == "GENERR009") == Counter(poison)
    assert all("ValueError: cannot map" in h["errorDescription"] for h in moved if h.get("messageId") in poison)
    assert all(e is not None and (e.status, e.error_code) == ("RECEIVED", "GENERR009") for e in entries.values())
    # each record written straight onto the channel is on invalid once, its bytes intact
    originals = Counter(decoration.original(r) for r in read_channel(runtime, "invalid"))
    assert all(originals[payload] == 1 for payload in direct)
