"""Faults around the broker: partial PutRecords failures, DynamoDB throttling, crashes mid-batch.
After each, with Lambda's redelivery: no message lost, none routed twice."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import orjson
import pytest

from rdss.model.workload import Workload
from tests.support.faults import Proxy, client_error, partial_put_records
from tests.support.system import System

pytestmark = pytest.mark.integration

ROUTED = ("metadata", "vocabulary", "responses")


class Crash(BaseException):
    """The process dies (a timeout, out of memory): nothing in the function can catch it."""


def publish_mix(system: System, seed: int, count: int = 60) -> list[dict]:
    messages = Workload(seed).mix(count)
    system.publish([orjson.dumps(m) for m in messages])
    return messages


def routed_ids(system: System) -> Counter[str]:
    return Counter(orjson.loads(r)["messageHeader"]["messageId"] for channel in ROUTED for r in system.read(channel))


def assert_exactly_once(system: System, messages: list[dict]) -> None:
    counts = routed_ids(system)
    expected = {m["messageHeader"]["messageId"] for m in messages}
    assert set(counts) == expected, "lost or foreign messages"
    assert max(counts.values()) == 1, [k for k, v in counts.items() if v > 1][:3]


def drain(system: System, handler: Any, **kwargs: Any):
    mapping = system.mapping("input", handler, batch_size=25, **kwargs)
    mapping.drain()
    return mapping


def test_transient_partial_put_records_failures_retry_only_the_failed_entries(system: System):
    messages = publish_mix(system, 1)
    # on the first call of each batch's flush, every third entry is throttled
    throttle = partial_put_records(lambda call, e: call % 2 == 1 and hash(e["Data"]) % 3 == 0)
    kinesis = Proxy(system.client("kinesis"), put_records=throttle)
    mapping = drain(system, system.handler(system.broker(), kinesis=kinesis))
    assert mapping.stats.retries == 0  # absorbed inside the invocation
    assert_exactly_once(system, messages)


def test_persistent_put_records_failures_nack_only_the_affected_records(system: System):
    messages = publish_mix(system, 2)
    victim = messages[7]["messageHeader"]["messageId"].encode()
    # the victim's output fails on every call until the fault is lifted
    state = {"fail": True}
    throttle = partial_put_records(lambda call, e: state["fail"] and victim in e["Data"])
    kinesis = Proxy(system.client("kinesis"), put_records=throttle)
    handler = system.handler(system.broker(), kinesis=kinesis)
    mapping = system.mapping("input", handler, batch_size=25, max_retries=1000)
    responses: list[dict] = []

    def observe(event: dict, context: Any) -> dict:
        response = handler(event, context)
        responses.append(response)
        if response["batchItemFailures"]:
            state["fail"] = False  # throttling passes by the time Lambda retries
        return response

    mapping.handler = observe
    mapping.drain()
    failed = [f["itemIdentifier"] for r in responses for f in r["batchItemFailures"]]
    assert len(failed) == 1  # only the victim's record was nacked
    assert mapping.stats.retries == 1
    assert_exactly_once(system, messages)


def test_dynamodb_throttling_nacks_and_the_retry_routes_once(system: System):
    messages = publish_mix(system, 3)
    lock = threading.Lock()
    throttled: dict[str, Any] = {"left": 6, "key": None}

    def put_item(real: Any, **kwargs: Any) -> Any:
        if "ConditionExpression" in kwargs:  # a claim: one message's is refused 6 times running
            key = kwargs["Item"]["messageId"]["S"]
            with lock:
                throttled["key"] = throttled["key"] or key
                refuse = key == throttled["key"] and throttled["left"] > 0
                throttled["left"] -= refuse
            if refuse:
                raise client_error("ProvisionedThroughputExceededException", "PutItem")
        return real(**kwargs)

    dynamodb = Proxy(system.client("dynamodb"), put_item=put_item)
    mapping = drain(system, system.handler(system.broker(dynamodb=dynamodb)), max_retries=10)
    assert throttled["left"] == 0
    assert mapping.stats.retries >= 1  # 4 attempts, then UNAVAILABLE: the batch went back
    assert_exactly_once(system, messages)


def test_every_claim_throttled_at_first_is_retried(system: System):
    messages = publish_mix(system, 4, count=20)
    lock = threading.Lock()
    tried: Counter[str] = Counter()

    def put_item(real: Any, **kwargs: Any) -> Any:
        if "ConditionExpression" in kwargs:  # a claim
            key = kwargs["Item"]["messageId"]["S"]
            with lock:
                tried[key] += 1
                first = tried[key] == 1
            if first:
                raise client_error("ThrottlingException", "PutItem")
        return real(**kwargs)

    dynamodb = Proxy(system.client("dynamodb"), put_item=put_item)
    mapping = drain(system, system.handler(system.broker(dynamodb=dynamodb)))
    assert len(tried) >= len(messages)
    assert min(tried.values()) >= 2
    assert mapping.stats.retries == 0  # retried within the invocation, with backoff
    assert_exactly_once(system, messages)


def test_a_crash_before_the_outputs_are_sent_loses_nothing(system: System):
    messages = publish_mix(system, 5)
    state = {"crashes": 1}

    def put_records(real: Any, **kwargs: Any) -> Any:
        if state["crashes"]:
            state["crashes"] -= 1
            raise RuntimeError("the function crashed mid-batch")
        return real(**kwargs)

    kinesis = Proxy(system.client("kinesis"), put_records=put_records)
    mapping = drain(system, system.handler(system.broker(), kinesis=kinesis))
    assert mapping.stats.retries >= 1
    assert_exactly_once(system, messages)


def test_a_crash_after_the_outputs_are_sent_routes_nothing_twice(system: System):
    messages = publish_mix(system, 6)
    state = {"crashes": 1}

    def put_item(real: Any, **kwargs: Any) -> Any:
        result = real(**kwargs)
        if kwargs["Item"]["messageId"]["S"].startswith("ledger#") and state["crashes"]:
            state["crashes"] -= 1
            raise Crash("the function died after its ledger was written")
        return result

    dynamodb = Proxy(system.client("dynamodb"), put_item=put_item)
    mapping = drain(system, system.handler(system.broker(dynamodb=dynamodb)))
    assert mapping.stats.function_errors >= 1
    assert_exactly_once(system, messages)


def test_a_timeout_after_the_work_is_done_is_retried_without_routing_twice(system: System):
    messages = publish_mix(system, 7)
    handler = system.handler(system.broker())
    state = {"timeouts": 2}

    def times_out(event: dict, context: Any) -> dict:
        response = handler(event, context)  # the work is done...
        if state["timeouts"]:
            state["timeouts"] -= 1
            raise TimeoutError("Task timed out after 60.00 seconds")  # ...but Lambda never hears of it
        return response

    mapping = drain(system, times_out)
    assert mapping.stats.function_errors == 2
    assert mapping.stats.bisections >= 1
    assert_exactly_once(system, messages)
