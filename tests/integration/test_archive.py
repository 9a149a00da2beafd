"""The archive keeps records, not lines (issue 21 item 3), through the local runtime: the
archiver behind its event source mappings, the local Direct PUT delivery streams, S3 of the
endpoint (moto's, or LocalStack's).

Indented, multi-line-string, non-UTF-8, empty and compact records on ``input`` and (moved there
by a consumer) on ``invalid``; the processors killed midway and restarted without their
checkpoints, so the archiver archives again what it had archived. The raw archive holds those
records twice; every reader counts each record once, with its exact bytes: rdss.archive.entries, the
demo's accounting, the Glue compaction job and ``rdss trace``."""

from __future__ import annotations

import base64
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pyarrow.parquet as pq
import pytest

from glue_jobs import schema
from rdss.archive import entries as archive
from rdss.aws.putrecords import PutRecordsBatcher, Record
from rdss.cli import main
from rdss.local.accounting import Input, account
from rdss.local.emulator import Endpoint
from rdss.local.runtime import Runtime, Settings
from rdss.model import decoration
from rdss.model.validation import validate
from rdss.model.workload import Workload
from tests.support import archives

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def archived(runtime: Runtime, bucket: str, prefix: str) -> list[archive.Entry]:
    """Every entry under ``prefix``, as stored: copies of a record included."""
    s3, name = runtime.endpoint.client("s3"), runtime.deployment.bucket(bucket)
    entries: list[archive.Entry] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=name, Prefix=prefix):
        for item in page.get("Contents", []):
            entries.extend(archive.read(s3.get_object(Bucket=name, Key=item["Key"])["Body"].read()))
    return entries


def trace(url: str, argument: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["trace", argument, "--url", url, "--json"]) == 0, argument
    found: dict[str, Any] = orjson.loads(capsys.readouterr().out)
    return found


def test_every_record_once_with_its_exact_bytes_across_a_restart(
    endpoint: Endpoint,
    runtimes: Callable[..., Runtime],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name, value in endpoint.environment().items():
        if name != "AWS_ENDPOINT_URL":
            monkeypatch.setenv(name, value)
    settings = Settings(
        environment=f"ar{uuid.uuid4().hex[:8]}",
        shards=2,
        batch_size=10,
        archive_batch_size=7,
        firehose_buffer_seconds=30,
    )
    odd = archives.odd_records(seed=51)
    bulk = [orjson.dumps(m) for m in Workload(52).mix(60)]
    first_half, second_half = [*odd.values(), *bulk[:30]], bulk[30:]
    # what a consumer moves to invalid: the odd records decorated (in place, or wrapped when they
    # are not a JSON object with a header), under a code the broker never gives
    moves = [decoration.decorate(p, "GENERR009", "the handler failed 3 times") for p in odd.values()]

    first = Runtime(endpoint, settings)  # it dies below: never stopped, its checkpoints lost
    second = runtimes(settings)  # deletes the deployment at teardown, however far the test got
    first.provision()
    published = first.publish(first_half)
    invalid = first.deployment.stream("invalid")
    report = PutRecordsBatcher(endpoint.client("kinesis")).put(
        [Record(invalid, move, "moved:test-consumer") for move in moves]
    )
    assert report.ok
    first.step()  # the processors handle what is there: the archiver archives it (delivery streams buffer it)
    # accepted by the delivery stream, in its buffer (kept in the bucket), not delivered yet
    staged = archived(first, "audit", ".firehose/")
    assert sorted(e.payload for e in staged) == sorted(first_half)
    assert archived(first, "audit", "audit/") == []
    # ... and the process dies: no stop, no flush; its checkpoints (in memory) are lost

    second.provision()
    published += second.publish(second_half)
    second.drain()  # from the start of every shard again: the first half is archived a second time

    payloads = [*first_half, *second_half]
    assert all(p.refused is None for p in published)
    records = {p.record: p.payload for p in published}
    audit = archived(second, "audit", "audit/")
    # the raw archive holds the first half twice ...
    assert len(audit) == len(payloads) + len(first_half)
    assert all(not entry.legacy for entry in audit)
    # ... and rdss.archive.entries reads each record once, its identity and its bytes as published
    once = list(archive.unique(audit))
    assert {entry.record: entry.payload for entry in once} == records
    assert {entry.stream for entry in once} == {second.deployment.stream("input")}
    errors = archived(second, "errors", "errors/invalid/")
    moved_once = [e.payload for e in archive.unique(errors) if e.partition_key == "moved:test-consumer"]
    assert sorted(moved_once) == sorted(moves)
    assert len(errors) > len(list(archive.unique(errors)))  # the invalid archive was archived twice too

    # the demo's accounting: every published record once in the audit archive
    names = [f"odd-{name}" for name in odd] + [f"bulk-{i}" for i in range(len(bulk))]
    result = account(second, [Input(name, [p]) for name, p in zip(names, published, strict=True)])
    assert Counter(result.audit_records) == Counter(payloads)
    assert result.audit_repeats == len(first_half)
    outcomes = {a.name: a.outcome for a in result.inputs}
    for name, payload in odd.items():
        expected = "routed" if validate(payload).valid else "invalid"
        assert outcomes[f"odd-{name}"] == expected, name

    # rdss trace finds each record: by its messageId, or (the empty one) by its identity; the
    # input record's archive entry once, however often it was archived
    url = f"kinesis://{second.deployment.environment}?region={endpoint.region}"
    url += f"&endpoint={endpoint.url}" if endpoint.url else ""
    for name, payload in odd.items():
        [record] = [p.record for p in published if p.payload == payload]
        if payload:
            message_id = orjson.loads(payload.decode("utf-8", "replace").replace("\n", " "))["messageHeader"][
                "messageId"
            ]
            found = trace(url, message_id, capsys)
            assert [d["record"] for d in found["records"]] == [record], name
        else:
            found = trace(url, record, capsys)
            assert [d["record"] for d in found["records"]] == [record]
            assert found["records"][0]["errorCode"] == "GENERR007"
        in_audit = [a for a in found["archives"] if a["archive"] == "audit"]
        assert len(in_audit) == 1, (name, found["archives"])
        moved = 2 if not validate(payload).valid else 1  # the broker's refusal, and the consumer's move
        assert len([a for a in found["archives"] if a["archive"] == "errors"]) == moved, (name, found["archives"])

    if not endpoint.embedded:
        return  # the Glue job runs on local Spark over files, whatever the endpoint: run by the moto suite
    # the Glue compaction job over the archives as they are: each record once, exact bytes kept
    copies = tmp_path / "archives"
    s3 = endpoint.client("s3")
    for bucket in ("audit", "errors"):
        name = second.deployment.bucket(bucket)
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=name, Prefix=f"{bucket}/"):
            for item in page.get("Contents", []):
                target = copies / bucket / item["Key"]
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(s3.get_object(Bucket=name, Key=item["Key"])["Body"].read())
    output = tmp_path / "curated"
    job = [sys.executable, str(ROOT / "glue_jobs" / "audit_compaction.py"), "--input", str(copies / "audit")]
    job += ["--output", str(output), "--errors", str(copies / "errors" / "errors")]
    done = subprocess.run(job, capture_output=True, text=True, check=False, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    counts = orjson.loads(done.stdout.strip().splitlines()[-1])
    assert counts["lines"] == len(payloads)
    assert counts["archivedAgain"] == len(first_half)
    assert counts["unmatchedRejections"] == 0
    curated = Counter(row["messageId"] for row in pq.read_table(str(output / "messages")).to_pylist())
    rejects = Counter(
        base64.b64decode(row["line"]) if row["reason"] == schema.REJECT_NOT_UTF8 else row["line"].encode()
        for row in pq.read_table(str(output / "rejects")).to_pylist()
    )
    for name, payload in odd.items():
        if validate(payload).valid:
            assert curated[orjson.loads(payload)["messageHeader"]["messageId"]] == 1, name
        else:
            assert rejects[payload] == 1, name  # its exact bytes, once
