"""Record a class-data-sharing archive for the local Spark runs of the Glue jobs.

``python -m tools.sparkcds PATH`` runs the audit compaction once over a small generated archive
in a JVM started with ``-XX:ArchiveClassesAtExit=PATH``: when that JVM exits, it writes every
class it loaded (Spark's, Hadoop's, Parquet's, the job's jar) to PATH. Local sessions started
by ``glue_jobs/audit_compaction.local_session`` then map those classes instead of reading,
parsing and verifying thousands of them from jars, which on a two-core machine is seconds of
every run. A JVM or classpath that no longer matches the archive just ignores it
(``-Xshare:auto``); ``make setup`` records it again whenever the jar or the environment changes.

AWS Glue starts its own JVMs: this is for local runs only.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from rdss.bench.glue_archive import write_archive

#: Enough records that every operator of the job runs and is loaded, few enough to take seconds.
TRAINING_RECORDS = 4_000


def record(target: Path, *, records: int = TRAINING_RECORDS, timeout: float = 300.0) -> Path:
    """Run the compaction once with class recording on; return ``target`` once the JVM wrote it."""
    from pyspark import SparkContext

    from glue_jobs import audit_compaction

    target = target.resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    partial.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="rdss-sparkcds-") as work:
        archive = write_archive(Path(work) / "archive", records, seed=5, per_object=500, days=2)
        spark = audit_compaction.local_session("rdss-sparkcds", record_classes=partial)
        try:
            lines, objects = audit_compaction.read_archive(spark, str(archive.root))
            audit_compaction.run(spark, lines, objects, str(Path(work) / "curated"))
        finally:
            spark.stop()
            # The archive is written as the JVM exits: end it (closing its stdin is PySpark's
            # signal to exit) and wait, rather than leave a half-written file behind.
            gateway = SparkContext._gateway
            if gateway is not None:
                process = gateway.proc
                gateway.shutdown()
                if process is not None:
                    if process.stdin is not None:
                        process.stdin.close()
                    process.wait(timeout=timeout)
                SparkContext._gateway = None
                SparkContext._jvm = None
    deadline = time.monotonic() + timeout
    while not partial.is_file() and time.monotonic() < deadline:
        time.sleep(0.1)
    if not partial.is_file():
        raise RuntimeError(f"the JVM exited without writing {partial}")
    partial.replace(target)
    return target


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m tools.sparkcds ARCHIVE.jsa", file=sys.stderr)
        return 2
    started = time.perf_counter()
    path = record(Path(args[0]))
    size = path.stat().st_size / 1e6
    print(f"{path}: {size:.0f} MB of Spark classes recorded in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
