"""The gateway's Local Data Repository apart from the broker's (issue 14): a vendor's gateway on
kinesis:// keeps its entries in a store of its own - a SQLite file on its host by default, or
``ldr=dynamodb://TABLE`` - and nothing it writes reaches the deployment's ``messages`` table, so
the broker's de-duplication cannot be disturbed by it."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import orjson
import pytest

from rdss.gateway import Gateway
from rdss.gateway.backend import state_directory
from rdss.gateway.url import URLError
from rdss.model.workload import Workload
from rdss.repository import RECEIVED, SENT
from tests.support.gateway_system import FAST, gateway_url, vendor_table
from tests.support.system import System

pytestmark = pytest.mark.integration


def gateway(system: System, application: str, ldr: str | None = None) -> Gateway:
    clients = {"kinesis": system.client("kinesis"), "dynamodb": system.client("dynamodb")}
    return Gateway(gateway_url(system, ldr), application=application, clients=clients, backoff=FAST, lease_duration=1.0)


def table_keys(system: System, table: str) -> list[str]:
    dynamodb = system.client("dynamodb")
    items = dynamodb.scan(TableName=table, ConsistentRead=True)["Items"]
    return sorted(item["messageId"]["S"] for item in items)


def sqlite_rows(path: Path) -> dict[tuple[str, str], str]:
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT application, message_id, status FROM messages").fetchall()
    return {(application, message_id): status for application, message_id, status in rows}


def run_broker(system: System) -> None:
    system.mapping("input", system.handler(system.broker())).drain()


def send_route_receive(system: System, ldr: str | None) -> tuple[list[str], list[str]]:
    """A vendor sends through the broker and another receives: (sent ids, received ids)."""
    messages = Workload(61).mix(12)
    with gateway(system, "vendor-producer", ldr) as producer:
        receipts = producer.send_all(messages)
        producer.send(messages[0])  # at least once: the same message again, for the broker to drop
    run_broker(system)
    with (
        gateway(system, "vendor-consumer", ldr) as consumer,
        consumer.receiver("metadata", poll_interval=0.05) as inbox,
    ):
        received = []
        while (message := inbox.receive(timeout=1)) is not None:
            received.append(message.message_id)
            inbox.ack(message)
    return [r.message_id for r in receipts], received


def routed(system: System) -> list[Any]:
    return [orjson.loads(r) for r in system.read("metadata") + system.read("vocabulary") + system.read("responses")]


def test_by_default_the_repository_is_a_file_of_the_host_and_the_broker_table_holds_only_claims(system: System):
    sent, received = send_route_receive(system, ldr=None)
    messages_table = table_keys(system, system.deployment.table("messages"))
    # the broker's table: its claims of the messages (bare messageIds) and its batch ledgers, nothing else
    assert [k for k in messages_table if not k.startswith("ledger#")] == sorted(sent)
    assert not any(k.startswith("gateway:") for k in messages_table)
    # every message routed once (the resend dropped as a duplicate), none lost to a gateway entry
    routed_ids = [m["messageHeader"]["messageId"] for m in routed(system)]
    assert sorted(routed_ids) == sorted(sent)
    metadata_ids = [
        m["messageHeader"]["messageId"] for m in orjson.loads(b"[" + b",".join(system.read("metadata")) + b"]")
    ]
    assert sorted(received) == sorted(metadata_ids)
    # the vendors' entries are in the file on this host, with the spec's statuses
    path = state_directory() / f"kinesis-rdss-{system.deployment.environment}.sqlite"
    rows = sqlite_rows(path)
    assert {rows[("vendor-producer", m)] for m in sent} == {SENT}
    assert {rows[("vendor-consumer", m)] for m in received} == {RECEIVED}


def test_ldr_dynamodb_keeps_the_entries_in_the_vendors_table(system: System):
    table = vendor_table(system)
    sent, received = send_route_receive(system, ldr=f"dynamodb://{table}")
    vendor = table_keys(system, table)
    assert sorted(f"gateway:vendor-producer:{m}" for m in sent) == [k for k in vendor if "producer" in k]
    assert sorted(f"gateway:vendor-consumer:{m}" for m in received) == [k for k in vendor if "consumer" in k]
    broker = table_keys(system, system.deployment.table("messages"))
    assert [k for k in broker if not k.startswith("ledger#")] == sorted(sent)
    assert sorted(m["messageHeader"]["messageId"] for m in routed(system)) == sorted(sent)


def test_a_vendor_store_holding_the_broker_s_keys_changes_nothing_for_the_broker(system: System):
    """Whatever a gateway writes lands in its own store: even entries under bare messageIds
    (a gateway that had the broker's key form) do not make the broker drop anything."""
    table = vendor_table(system)
    messages = Workload(62).mix(5)
    ids = [m["messageHeader"]["messageId"] for m in messages]
    with gateway(system, "vendor", ldr=f"dynamodb://{table}") as producer:
        producer.repository.table.put_many([(m, {"status": SENT}) for m in ids])  # type: ignore[attr-defined]
        producer.send_all(messages)
    run_broker(system)
    assert sorted(m["messageHeader"]["messageId"] for m in routed(system)) == sorted(ids)


def test_a_gateway_running_in_aws_must_name_its_table(system: System, monkeypatch):
    monkeypatch.setenv("AWS_EXECUTION_ENV", "AWS_ECS_FARGATE")
    with pytest.raises(URLError, match="ldr=dynamodb://TABLE"):
        gateway(system, "vendor")
    with pytest.raises(URLError, match="expected dynamodb://TABLE"):
        gateway(system, "vendor", ldr="dynamodb://")
    gateway(system, "vendor", ldr=f"dynamodb://{vendor_table(system)}").close()
