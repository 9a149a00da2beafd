"""Fixtures for the Glue job tests: one local SparkSession for the whole run (starting one
takes seconds), and a generated archive compacted once and shared by the tests that read it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from glue_jobs import audit_compaction
from rdss.bench.glue_archive import Archive, write_archive


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = audit_compaction.local_session("rdss-glue-tests")
    session.conf.set("spark.sql.shuffle.partitions", "2")
    yield session
    session.stop()


def compact(spark: SparkSession, source: Path, output: Path, *, incremental: bool = False) -> dict[str, int]:
    """The compaction job over a local archive, as its entry point runs it."""
    lines, objects = audit_compaction.read_archive(spark, str(source))
    return audit_compaction.run(spark, lines, objects, str(output), incremental=incremental)


@dataclass(frozen=True)
class Compacted:
    archive: Archive
    output: Path
    counts: dict[str, int]


@pytest.fixture(scope="session")
def compacted(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Compacted:
    """A generated archive with duplicates, malformed lines, sequences and entries archived
    twice, compacted."""
    root = tmp_path_factory.mktemp("generated")
    archive = write_archive(
        root / "archive",
        400,
        seed=3,
        small=False,
        per_object=40,
        days=2,
        duplicate_every=9,
        malformed_every=13,
        sequence_every=40,
        repeat_every=17,
        ledger=True,
    )
    counts = compact(spark, archive.root, root / "curated")
    return Compacted(archive=archive, output=root / "curated", counts=counts)
