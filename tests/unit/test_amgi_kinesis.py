"""The Kinesis event-source-mapping AMGI server with trivial apps, independent of the broker."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from rdss.amgi import SEND_FLUSH_EXTENSION, SendFailed
from rdss.amgi.kinesis import KinesisEventSourceMappingHandler
from rdss.model.retry import Backoff

ARN = "arn:aws:kinesis:eu-west-2:123456789012:stream/orders"


def event(*records: tuple[str, bytes], shard: str = "shardId-000000000000", arn: str = ARN) -> dict[str, Any]:
    return {
        "Records": [
            {
                "kinesis": {
                    "kinesisSchemaVersion": "1.0",
                    "partitionKey": f"pk-{sequence}",
                    "sequenceNumber": sequence,
                    "data": base64.b64encode(data).decode(),
                    "approximateArrivalTimestamp": 1795000000.5,
                },
                "eventSource": "aws:kinesis",
                "eventID": f"{shard}:{sequence}",
                "eventSourceARN": arn,
                "awsRegion": "eu-west-2",
            }
            for sequence, data in records
        ]
    }


class FakeKinesis:
    """Records PutRecords calls; entries whose data is in ``throttle`` fail ``times`` times."""

    def __init__(self, throttle: set[bytes] | None = None, times: int = 1) -> None:
        self.calls: list[dict[str, Any]] = []
        self.throttle = throttle or set()
        self.remaining = dict.fromkeys(self.throttle, times)

    def put_records(self, StreamName: str, Records: list[dict[str, Any]]) -> dict[str, Any]:
        self.calls.append({"StreamName": StreamName, "Records": Records})
        results = []
        for i, entry in enumerate(Records):
            if self.remaining.get(entry["Data"], 0) > 0:
                self.remaining[entry["Data"]] -= 1
                results.append({"ErrorCode": "ProvisionedThroughputExceededException", "ErrorMessage": "slow down"})
            else:
                results.append({"ShardId": "shardId-000000000000", "SequenceNumber": str(1000 + i)})
        return {"FailedRecordCount": sum("ErrorCode" in r for r in results), "Records": results}

    def put(self) -> list[bytes]:
        delivered = []
        for call in self.calls:
            delivered.extend(e["Data"] for e in call["Records"])
        return delivered


def handler_for(app: Any, kinesis: FakeKinesis | None = None) -> KinesisEventSourceMappingHandler:
    return KinesisEventSourceMappingHandler(
        app, kinesis=kinesis or FakeKinesis(), backoff=Backoff(max_retries=2, base=0.0), sleep=lambda s: None
    )


def test_one_scope_per_shard_with_every_record_in_order():
    seen: list[tuple[str, list[dict]]] = []

    async def app(scope, receive, send):
        if scope["type"] != "message":
            return
        events, more = [], True
        while more:
            message = await receive()
            events.append(message)
            more = message.get("more_messages", False)
            await send({"type": "message.ack", "id": message["id"]})
        seen.append((scope["address"], events))

    handler = handler_for(app)
    batch = event(("1", b"a"), ("2", b"b"))
    batch["Records"] += event(("9", b"z"), shard="shardId-000000000001")["Records"]
    assert handler(batch, None) == {"batchItemFailures": []}
    assert [address for address, _ in seen] == ["orders", "orders"]
    first = seen[0][1]
    assert [e["id"] for e in first] == ["1", "2"]
    assert [e["payload"] for e in first] == [b"a", b"b"]
    assert [e["more_messages"] for e in first] == [True, False]
    assert first[0]["bindings"] == {
        "kinesis": {
            "partition_key": "pk-1",
            "sequence_number": "1",
            "shard_id": "shardId-000000000000",
            "approximate_arrival_timestamp": 1795000000.5,
        }
    }
    assert first[0]["type"] == "message.receive"
    assert list(first[0]["headers"]) == []
    assert seen[1][1][0]["bindings"]["kinesis"]["shard_id"] == "shardId-000000000001"


def test_nacked_and_unacknowledged_records_are_batch_item_failures():
    async def app(scope, receive, send):
        if scope["type"] != "message":
            return
        more = True
        while more:
            message = await receive()
            more = message.get("more_messages", False)
            if message["payload"] == b"nack":
                await send({"type": "message.nack", "id": message["id"], "message": "cannot"})
            elif message["payload"] == b"ack":
                await send({"type": "message.ack", "id": message["id"]})

    response = handler_for(app)(event(("1", b"ack"), ("2", b"nack"), ("3", b"ignore"), ("4", b"ack")), None)
    assert response == {"batchItemFailures": [{"itemIdentifier": "2"}, {"itemIdentifier": "3"}]}


def test_an_app_that_raises_fails_only_what_it_had_not_acknowledged():
    async def app(scope, receive, send):
        if scope["type"] != "message":
            return
        message = await receive()
        await send({"type": "message.ack", "id": message["id"]})
        raise RuntimeError("boom")

    response = handler_for(app)(event(("1", b"a"), ("2", b"b"), ("3", b"c")), None)
    assert [f["itemIdentifier"] for f in response["batchItemFailures"]] == ["2", "3"]


def test_sends_are_batched_into_put_records_per_stream():
    kinesis = FakeKinesis()

    async def app(scope, receive, send):
        if scope["type"] != "message":
            return
        message = await receive()
        for i in range(1200):
            await send(
                {
                    "type": "message.send",
                    "address": "out",
                    "headers": [],
                    "payload": b"x%d" % i,
                    "bindings": {"kinesis": {"partition_key": "k"}},
                }
            )
        await send({"type": "message.send", "address": "other", "headers": [], "payload": b"y"})
        await send({"type": "message.ack", "id": message["id"]})

    assert handler_for(app, kinesis)(event(("1", b"a")), None) == {"batchItemFailures": []}
    assert [(c["StreamName"], len(c["Records"])) for c in kinesis.calls] == [
        ("out", 500),
        ("out", 500),
        ("out", 200),
        ("other", 1),
    ]
    assert kinesis.calls[0]["Records"][0]["PartitionKey"] == "k"
    assert kinesis.calls[-1]["Records"][0]["PartitionKey"]  # a random key when none is bound


def test_put_records_calls_stay_under_five_mebibytes():
    kinesis = FakeKinesis()

    async def app(scope, receive, send):
        if scope["type"] != "message":
            return
        message = await receive()
        for _ in range(12):
            await send({"type": "message.send", "address": "out", "headers": [], "payload": b"x" * 900_000})
        await send({"type": "message.ack", "id": message["id"]})

    handler_for(app, kinesis)(event(("1", b"a")), None)
    sizes = [sum(len(e["Data"]) + len(e["PartitionKey"]) for e in c["Records"]) for c in kinesis.calls]
    assert len(kinesis.put()) == 12
    assert all(size <= 5 * 1024 * 1024 for size in sizes)
    assert len(sizes) == 3


def test_only_failed_entries_are_retried():
    kinesis = FakeKinesis(throttle={b"b"}, times=2)

    async def app(scope, receive, send):
        if scope["type"] != "message":
            return
        message = await receive()
        for data in (b"a", b"b", b"c"):
            await send({"type": "message.send", "address": "out", "headers": [], "payload": data})
        await send({"type": "message.ack", "id": message["id"]})

    assert handler_for(app, kinesis)(event(("1", b"x")), None) == {"batchItemFailures": []}
    assert [[e["Data"] for e in c["Records"]] for c in kinesis.calls] == [[b"a", b"b", b"c"], [b"b"], [b"b"]]


def test_the_flush_extension_reports_undelivered_sends_so_the_app_can_nack_them():
    kinesis = FakeKinesis(throttle={b"doomed"}, times=99)
    reported: list[tuple[type, list[bytes]]] = []

    async def app(scope, receive, send):
        if scope["type"] != "message":
            return
        assert SEND_FLUSH_EXTENSION in scope["extensions"]
        first, second = await receive(), await receive()
        await send({"type": "message.send", "address": "out", "headers": [], "payload": b"fine"})
        await send({"type": "message.send", "address": "out", "headers": [], "payload": b"doomed"})
        try:
            await send({"type": SEND_FLUSH_EXTENSION})
        except OSError as failure:  # SendFailed is an OSError, as the AMGI spec asks of servers
            reported.append((type(failure), [e["payload"] for e in getattr(failure, "failed", [])]))
        await send({"type": "message.ack", "id": first["id"]})
        await send({"type": "message.nack", "id": second["id"], "message": "output lost"})

    response = handler_for(app, kinesis)(event(("1", b"a"), ("2", b"b")), None)
    assert reported == [(SendFailed, [b"doomed"])]
    assert response == {"batchItemFailures": [{"itemIdentifier": "2"}]}


def test_an_ack_waits_for_earlier_sends_and_fails_with_them():
    kinesis = FakeKinesis(throttle={b"doomed"}, times=99)

    async def app(scope, receive, send):
        if scope["type"] != "message":
            return
        message = await receive()
        await send({"type": "message.send", "address": "out", "headers": [], "payload": b"doomed"})
        await send({"type": "message.ack", "id": message["id"]})  # raises: the output is not delivered

    response = handler_for(app, kinesis)(event(("1", b"a")), None)
    assert response == {"batchItemFailures": [{"itemIdentifier": "1"}]}


def test_lifespan_runs_once_per_environment_and_shares_state():
    log: list[str] = []

    async def app(scope, receive, send):
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                log.append(message["type"])
                if message["type"] == "lifespan.startup":
                    scope["state"]["connection"] = "pool-1"
                    await send({"type": "lifespan.startup.complete"})
                else:
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        else:
            message = await receive()
            log.append(f"batch:{scope['state']['connection']}")
            await send({"type": "message.ack", "id": message["id"]})

    handler = handler_for(app)
    handler(event(("1", b"a")), None)
    handler(event(("2", b"b")), None)
    handler.close()
    assert log == ["lifespan.startup", "batch:pool-1", "batch:pool-1", "lifespan.shutdown"]


def test_an_app_without_lifespan_support_still_serves():
    async def app(scope, receive, send):
        if scope["type"] == "lifespan":
            raise NotImplementedError("no lifespan here")
        message = await receive()
        await send({"type": "message.ack", "id": message["id"]})

    handler = handler_for(app)
    assert handler(event(("1", b"a")), None) == {"batchItemFailures": []}
    handler.close()


def test_a_failed_startup_fails_the_invocation():
    async def app(scope, receive, send):
        if scope["type"] == "lifespan":
            await receive()
            await send({"type": "lifespan.startup.failed", "message": "no database"})

    with pytest.raises(RuntimeError, match="startup failed"):
        handler_for(app)(event(("1", b"a")), None)


def test_unknown_ids_and_event_types_are_refused():
    async def app(scope, receive, send):
        if scope["type"] != "message":
            return
        await receive()
        await send({"type": "message.ack", "id": "not-in-this-batch"})

    # the app's error surfaces as a failed (un-acknowledged) record, not a crash
    assert handler_for(app)(event(("1", b"a")), None) == {"batchItemFailures": [{"itemIdentifier": "1"}]}


def test_a_nack_with_an_error_code_moves_the_record_when_the_server_knows_the_channels():
    """Given where invalid and error are, a nack carrying one of the spec's codes refuses the
    record: decorated onto the code's channel and acknowledged. An unknown code is a plain nack."""
    from rdss.amgi.kinesis import Rejections
    from rdss.amgi.types import NACK_ERROR_CODE_EXTENSION
    from rdss.model import decoration
    from rdss.model.rejection import Rejector

    extensions: list[dict] = []

    async def app(scope, receive, send):
        if scope["type"] != "message":
            return
        extensions.append(scope["extensions"])
        more = True
        while more:
            message = await receive()
            code = {"1": "APPERRMET002", "2": "NOT-A-CODE"}.get(message["id"])
            if code is None:
                await send({"type": "message.ack", "id": message["id"]})
            else:
                await send(
                    {"type": "message.nack", "id": message["id"], "message": "no such dataset", "error_code": code}
                )
            more = message.get("more_messages", False)

    kinesis = FakeKinesis()
    handler = KinesisEventSourceMappingHandler(
        app,
        kinesis=kinesis,
        backoff=Backoff(max_retries=2, base=0.0),
        sleep=lambda s: None,
        rejections=Rejections({"invalid": "rdss-dev-invalid", "error": "rdss-dev-error"}, Rejector()),
    )
    answer = handler(event(("1", b'{"refused": 1}'), ("2", b'{"unknown code": 2}'), ("3", b'{"fine": 3}')))
    assert answer == {"batchItemFailures": [{"itemIdentifier": "2"}]}  # retried like any nack
    assert NACK_ERROR_CODE_EXTENSION in extensions[0]
    [call] = kinesis.calls
    assert call["StreamName"] == "rdss-dev-invalid"  # APPERRMET002: the invalid channel
    [moved] = call["Records"]
    assert decoration.original(moved["Data"]) == b'{"refused": 1}'
    assert moved["PartitionKey"] == "pk-1"
    # without rejections configured the extension is not offered and the nack retries
    plain = handler_for(app)
    assert plain(event(("1", b"{}")))["batchItemFailures"] == [{"itemIdentifier": "1"}]
    assert NACK_ERROR_CODE_EXTENSION not in extensions[-1]
