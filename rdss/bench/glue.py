"""``rdss bench glue``: the audit compaction job on local Spark beside the same work in one process.

:func:`write_archive` writes an audit archive the way the archiver and Firehose do (objects of
gzip members of archive entries under hour prefixes), from :class:`rdss.model.workload.Workload`
traffic with duplicates, malformed lines, multi-part sequences and entries archived twice mixed
in. :func:`run` times
``glue_jobs/audit_compaction.py`` on it as a user runs it (a fresh process: Python, the JVM and
Spark start-up included), on a quarter of the records to show how cost grows, and
:func:`compact_in_process` doing the same work (parse, first-seen de-duplication, rejects,
partitioned Parquet) in a single Python process with orjson and pyarrow.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import orjson

from rdss.bench.figures import Measured
from rdss.bench.glue_archive import Archive, write_archive
from rdss.bench.glue_inprocess import compact_in_process
from rdss.host.resources import glue_jobs_dir

# -- the benchmark -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Figures(Measured):
    records: int
    gzip_bytes: int
    objects: int
    spark_seconds: float
    quarter_records: int
    quarter_seconds: float
    single_process_seconds: float
    counts: dict[str, int]
    #: the machine: CPUs, and how busy other work kept them just before the timed runs
    cores: int
    busy_before: float | None
    #: records in the errors archive the job read beside the audit archive (0: none given)
    errors_records: int = 0

    @property
    def spark_per_s(self) -> float:
        return self.records / self.spark_seconds

    @property
    def scaling_ratio(self) -> float:
        """time(N) / time(N/4): 4.0 is linear; start-up cost pulls it below."""
        return self.spark_seconds / self.quarter_seconds

    @property
    def single_process_per_s(self) -> float:
        return self.records / self.single_process_seconds


def run_job(
    archive_root: Path, output: Path, *, errors: Path | None = None, script: Path | None = None
) -> tuple[float, dict[str, int]]:
    """Run a job script (default: the compaction) as a user would, in a fresh process; its
    wall-clock seconds and counts."""
    script = script or glue_jobs_dir() / "audit_compaction.py"
    arguments = ["--input", str(archive_root), "--output", str(output)]
    if errors is not None:
        arguments += ["--errors", str(errors)]
    started = time.perf_counter()
    done = subprocess.run([sys.executable, str(script), *arguments], capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{script.name} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    counts = orjson.loads(done.stdout.strip().splitlines()[-1])
    return elapsed, counts


#: One broken copy (a refused message under a valid one's messageId) per this many records.
BROKEN_EVERY = 100
#: One entry in this many archived a second time (a restarted archiver), by default.
REPEAT_EVERY = 1000


def run(
    records: int,
    *,
    seed: int = 11,
    workdir: Path | None = None,
    keep: bool = False,
    broken_every: int = BROKEN_EVERY,
    repeat_every: int = REPEAT_EVERY,
) -> Figures:
    """Generate archives of ``records`` and ``records // 4``, time the job on both and the
    single-process version on the larger; check every run counted what was generated.

    With ``broken_every`` (0: none), broken copies are mixed in and the errors archive the
    broker would write goes beside the audit archive: the job reads it (``--errors``), as on AWS.
    """
    if workdir is not None:
        workdir.mkdir(parents=True, exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix="rdss-bench-glue-", dir=workdir))
    try:

        def generate(name: str, count: int, seed: int) -> Archive:
            errors = base / f"errors-{name}" if broken_every else None
            return write_archive(
                base / f"archive-{name}",
                count,
                seed=seed,
                broken_every=broken_every,
                repeat_every=repeat_every,
                errors_root=errors,
            )

        full = generate("n", records, seed)
        quarter = generate("q", max(records // 4, 1), seed + 1)
        busy = busy_fraction()
        quarter_seconds, quarter_counts = run_job(quarter.root, base / "out-q", errors=quarter.errors_root)
        _check(quarter, quarter_counts)
        spark_seconds, counts = run_job(full.root, base / "out-n", errors=full.errors_root)
        _check(full, counts)
        started = time.perf_counter()
        single_counts = compact_in_process(full.root, base / "out-single", full.errors_root)
        single_seconds = time.perf_counter() - started
        _check(full, single_counts)
        return Figures(
            records=full.records,
            gzip_bytes=full.gzip_bytes,
            objects=full.objects,
            spark_seconds=spark_seconds,
            quarter_records=quarter.records,
            quarter_seconds=quarter_seconds,
            single_process_seconds=single_seconds,
            counts=counts,
            cores=os.cpu_count() or 1,
            busy_before=busy,
            errors_records=full.errors_records,
        )
    finally:
        if not keep:
            shutil.rmtree(base, ignore_errors=True)


def busy_fraction(seconds: float = 3.0) -> float | None:
    """The share of all CPUs busy over ``seconds`` while this process waits (Linux only): other
    work on the machine takes cores from the job, and the figures should say so."""

    def sample() -> tuple[int, int] | None:
        try:
            with open("/proc/stat") as handle:
                fields = [int(value) for value in handle.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
        return sum(fields), idle

    first = sample()
    time.sleep(seconds)
    second = sample()
    if first is None or second is None or second[0] == first[0]:
        return None
    total, idle = second[0] - first[0], second[1] - first[1]
    return 1 - idle / total


def _check(written: Archive, counts: dict[str, int]) -> None:
    expected = written.expected_counts()
    if counts != expected:  # a benchmark of a wrong answer is worthless
        raise AssertionError(f"compaction counted {counts}, the archive holds {expected}")
