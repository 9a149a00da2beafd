"""The compaction with the errors archive (``--errors``): records accounted as the broker decided.

The archives are made the way the running system makes them: every record in the audit archive
as sent, and what the broker does with each - the real classifier (rdss.model.validation), messageIds
claimed by valid records only, rejections decorated (rdss.model.decoration) into the errors archive.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from pyspark.sql import SparkSession

from glue_jobs import audit_compaction, runtime, schema
from rdss.archive import entries as archive
from rdss.bench.glue_archive import write_archive
from rdss.bench.glue_inprocess import compact_in_process
from rdss.model import decoration
from rdss.model.errors import ErrorCode
from rdss.model.validation import validate
from rdss.model.workload import Workload
from tests.glue.test_audit_compaction import plain, put, read_rows
from tests.support import archives

MOMENT = datetime(2026, 11, 3, 9, 0, tzinfo=UTC)


@dataclass
class Broker:
    """What the broker decides for each record, in order (the claim rule of rdss.processors.broker.app)."""

    claimed: set[str] = field(default_factory=set)
    duplicates: int = 0
    rejected: list[tuple[bytes, str, str]] = field(default_factory=list)  # payload, code, channel
    accepted: dict[str, bytes] = field(default_factory=dict)  # messageId -> the record it curated

    def receive(self, payload: bytes) -> None:
        verdict = validate(payload, now=MOMENT)
        if not verdict.valid:
            assert verdict.error_code is not None
            assert verdict.channel is not None
            self.rejected.append((payload, str(verdict.error_code), verdict.channel.value))
            return
        message_id = verdict.header["messageId"] if verdict.header else None
        assert message_id
        if message_id in self.claimed:
            self.duplicates += 1
        else:
            self.claimed.add(message_id)
            self.accepted[message_id] = payload


def broken_copies(message: dict[str, Any]) -> list[bytes]:
    """Copies of a message under its messageId that the broker refuses, each for its own reason."""
    copies = []

    def variant(change: Any) -> bytes:
        copy = orjson.loads(orjson.dumps(message))
        change(copy)
        return orjson.dumps(copy)

    copies.append(variant(lambda m: m.pop("messageBody")))  # GENERR001
    copies.append(variant(lambda m: m["messageHeader"].update(messageClass="Bogus")))  # GENERR004
    copies.append(variant(lambda m: m["messageHeader"].update(messageType="MetadataPurge")))  # GENERR002
    copies.append(variant(lambda m: m["messageHeader"].pop("generator")))  # GENERR004
    copies.append(variant(lambda m: m["messageHeader"].update(version="three")))  # GENERR004
    copies.append(variant(lambda m: m["messageBody"].update(objectUuid="not-a-uuid")))  # GENERR010
    copies.append(orjson.dumps(message)[:-7])  # truncated: GENERR007, no messageId to read
    for index in range(24):  # body faults that differ byte-wise
        copies.append(variant(lambda m, i=index: m["messageBody"].update(unexpected=i)))  # GENERR001
    return copies


@dataclass(frozen=True)
class Scenario:
    broker: Broker
    audit: Path
    errors: Path
    sent: list[bytes]


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Scenario:
    root = tmp_path_factory.mktemp("verdicts")
    workload = Workload(31)
    first = workload.message("MetadataDelete", "Event")
    other = workload.message("MetadataDelete", "Event")
    valid, other_valid = orjson.dumps(first), orjson.dumps(other)
    copies = broken_copies(first)
    oversize = orjson.dumps(workload.large(1_000_100))
    # a broken copy first (it must not become the curated row), the valid message, the other
    # broken copies, one of them twice byte for byte, a plain resend, garbage and a deposit too
    # large for one message
    sent = [copies[0], valid, *copies[1:], copies[5], valid, other_valid, b"not json", oversize]
    broker = Broker()
    for payload in sent:
        broker.receive(payload)
    half = len(sent) // 2
    put(root / "audit", MOMENT, sent[:half], name="aaaa")
    put(root / "audit", MOMENT.replace(minute=5), sent[half:], name="bbbb")
    by_channel: dict[str, list[bytes]] = {"invalid": [], "error": []}
    for payload, code, channel in broker.rejected:
        if len(payload) > 1_000_000:  # too large to travel decorated: a Claim Check
            digest = hashlib.sha256(payload).hexdigest()
            record = decoration.claim_check(
                code, "", location={"encoding": "s3", "bucket": "b", "key": digest}, size=len(payload), sha256=digest
            )
        else:
            record = decoration.decorate(payload, code, "")
        by_channel[channel].append(record)
    # a consumer that failed on a message the broker had routed: not the broker's rejection
    by_channel["error"].append(decoration.decorate(other_valid, ErrorCode.GENERR009, "handler failed 3 times"))
    for channel, records in by_channel.items():
        path = root / "errors" / archive.object_key(f"errors/{channel}/", MOMENT, f"rdss-test-{channel}")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(archives.framed(records, stream=f"rdss-test-{channel}"))
    return Scenario(broker, root / "audit", root / "errors", sent)


def test_the_scenario_is_the_one_the_acceptance_names(scenario: Scenario) -> None:
    codes = Counter(code for _, code, _ in scenario.broker.rejected)
    assert len(scenario.broker.rejected) >= 33
    assert {"GENERR001", "GENERR002", "GENERR004", "GENERR006", "GENERR007", "GENERR010"} <= set(codes)
    assert scenario.broker.duplicates == 1


def test_duplicates_are_what_the_broker_dropped_and_rejections_are_rejects(
    spark: SparkSession, scenario: Scenario, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--input", str(scenario.audit), "--output", str(tmp_path / "out"), "--errors", str(scenario.errors)]
    assert audit_compaction.main(argv, spark=spark) == 0
    counts = json.loads(capsys.readouterr().out)
    broker = scenario.broker
    assert counts == {
        "lines": len(scenario.sent),
        "messages": len(broker.accepted),
        "duplicates": broker.duplicates,
        "rejects": len(broker.rejected),
        "brokerRejections": len(broker.rejected),
        "unmatchedRejections": 0,
        "archivedAgain": 0,
    }
    rows = {row["messageId"]: row for row in read_rows(tmp_path / "out" / "messages")}
    assert set(rows) == set(broker.accepted)
    for message_id, payload in broker.accepted.items():  # the curated row is the accepted record
        body = orjson.loads(payload)["messageBody"]
        assert rows[message_id]["bodyBytes"] == len(orjson.dumps(body))
    resent = _message_id(scenario.sent[1])
    assert plain(tmp_path / "out" / "duplicates") == [{"messageId": resent, "discarded": 1}]
    rejects = plain(tmp_path / "out" / "rejects")
    expected = Counter((payload.decode(), code) for payload, code, _ in broker.rejected)
    assert Counter((row["line"], row["errorCode"]) for row in rejects) == expected
    reasons = Counter(row["reason"] for row in rejects)
    assert reasons == {schema.REJECT_BY_BROKER: len(broker.rejected) - 2, schema.REJECT_NOT_JSON: 2}


def test_without_the_errors_archive_broken_copies_count_as_duplicates(
    spark: SparkSession, scenario: Scenario, tmp_path: Path
) -> None:
    lines, objects = audit_compaction.read_archive(spark, str(scenario.audit))
    counts = audit_compaction.run(spark, lines, objects, str(tmp_path / "out"))
    # what the job said before it read the errors archive: every copy with a messageId a duplicate
    ids = [_message_id(payload) for payload in scenario.sent]
    assert counts["duplicates"] == sum(ids.count(i) - 1 for i in set(ids) if i is not None)
    assert counts["duplicates"] > scenario.broker.duplicates


def _message_id(payload: bytes) -> str | None:
    try:
        header = orjson.loads(payload)["messageHeader"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return None
    return header.get("messageId") if isinstance(header, dict) else None


def test_a_generated_archive_with_broken_copies_counts_as_the_broker_did(spark: SparkSession, tmp_path: Path) -> None:
    generated = write_archive(
        tmp_path / "archive",
        600,
        seed=4,
        per_object=60,
        duplicate_every=11,
        malformed_every=17,
        broken_every=7,
        errors_root=tmp_path / "errors",
    )
    assert generated.broken > 50
    assert generated.errors_records == generated.rejected
    context = runtime.Context(spark, {})
    lines, objects = audit_compaction.read_archive(spark, str(generated.root))
    rejected = audit_compaction.read_rejections(context, str(generated.errors_root))
    counts = audit_compaction.run(spark, lines, objects, str(tmp_path / "out"), rejected=rejected)
    assert counts == generated.expected_counts()
    # the single-process reference (rdss.model.decoration recovers the payloads) agrees, row for row
    assert compact_in_process(generated.root, tmp_path / "single", generated.errors_root) == counts

    def key(row: dict[str, Any]) -> str:
        return str(row["messageId"])

    spark_rows = sorted(read_rows(tmp_path / "out" / "messages"), key=key)
    assert spark_rows == sorted(read_rows(tmp_path / "single" / "messages"), key=key)

    def where(row: dict[str, Any]) -> tuple[str, str]:
        return row["source"], row["line"]

    rejects = sorted(plain(tmp_path / "out" / "rejects"), key=where)
    assert rejects == sorted(plain(tmp_path / "single" / "rejects"), key=where)
