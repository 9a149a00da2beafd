"""The Glue jobs on a deployment's archives, locally: the archives copied out of the buckets,
then ``audit_compaction.py`` and ``audit_report.py`` run on local Spark, as a user runs them.

A working directory mirrors the deployment's buckets, each a directory holding the bucket's
keys, so the Glue tables' locations (``s3://<bucket>/<prefix>``) are paths under it:

* ``audit/audit/year=/month=/day=/hour=/...`` - the audit archive, as Firehose wrote it;
* ``errors/errors/<channel>/year=/.../`` - the errors archive (``invalid``, ``error``);
* ``curated/curated/`` - what the compaction writes (``messages``, ``rejects``, ``duplicates``);
* ``curated/reports/`` - what the report writes (one table each, and ``summary.json``).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from rdss.host.resources import glue_jobs_dir

#: The archives the jobs read, by bucket.
ARCHIVES = ("audit", "errors")
#: Under the curated bucket: the compaction's tables and the report's (stacks/analytics.py).
CURATED_PREFIX = "curated"
REPORTS_PREFIX = "reports"
#: The report's figures, beside its tables.
SUMMARY = "summary.json"


@dataclass(frozen=True)
class Layout:
    """Where each bucket's keys are under a working directory."""

    root: Path

    def bucket(self, name: str) -> Path:
        return self.root / name

    @property
    def audit(self) -> Path:
        return self.root / "audit" / "audit"

    @property
    def errors(self) -> Path:
        return self.root / "errors" / "errors"

    @property
    def curated(self) -> Path:
        return self.root / "curated" / CURATED_PREFIX

    @property
    def reports(self) -> Path:
        return self.root / "curated" / REPORTS_PREFIX


def export_archives(s3: Any, buckets: dict[str, str], layout: Layout) -> dict[str, int]:
    """Copy every object of the ``audit`` and ``errors`` buckets (bucket -> its name) under
    ``layout``, replacing what an earlier export left; the objects copied, per bucket."""
    copied = {}
    for name in ARCHIVES:
        target = layout.bucket(name)
        shutil.rmtree(target, ignore_errors=True)
        copied[name] = 0
        # the archive's prefix only: not a delivery stream's staging (.firehose/) nor anything else kept there
        for key in _keys(s3, buckets[name], f"{name}/"):
            path = target / key
            if not path.resolve().is_relative_to(target.resolve()):  # a key like ../x stays in its bucket
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(s3.get_object(Bucket=buckets[name], Key=key)["Body"].read())
            copied[name] += 1
    return copied


def _keys(s3: Any, bucket: str, prefix: str) -> Iterator[str]:
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for entry in page.get("Contents", []):
            if not entry["Key"].endswith("/"):
                yield entry["Key"]


def run_jobs(layout: Layout) -> dict[str, Any]:
    """The compaction, then the report, on the archives under ``layout``; the report's summary,
    with ``sparkSeconds``.

    Raises:
        rdss.host.resources.GlueUnavailable: no pyspark or no JDK here.
        RuntimeError: a job failed (its error output's end).
    """
    jobs = glue_jobs_dir()
    shutil.rmtree(layout.bucket("curated"), ignore_errors=True)
    # the errors archive tells the compaction which records the broker refused (not duplicates)
    errors = ["--errors", str(layout.errors)] if layout.errors.is_dir() else []
    started = time.monotonic()
    _job(jobs / "audit_compaction.py", "--input", str(layout.audit), "--output", str(layout.curated), *errors)
    _job(jobs / "audit_report.py", "--input", str(layout.curated), "--output", str(layout.reports), *errors)
    summary: dict[str, Any] = orjson.loads((layout.reports / SUMMARY).read_bytes())
    summary["sparkSeconds"] = round(time.monotonic() - started, 1)
    return summary


def _job(script: Path, *arguments: str) -> None:
    """A job as a user runs it: a fresh Python process on local Spark."""
    result = subprocess.run([sys.executable, str(script), *arguments], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{script.name} failed ({result.returncode}): {result.stderr.strip()[-2000:]}")
