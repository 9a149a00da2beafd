"""Archive objects that are damaged part way - truncated, bytes after the last gzip member that
are not gzip - or not gzip at all: every run reads each object up to the damage, names it in one
line, and goes on (Hadoop's gzip codec failed the whole run with a Spark stack trace)."""

from __future__ import annotations

import gzip
import io
import zlib
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from glue_jobs import audit_compaction, audit_report, runtime
from rdss.archive import entries as archive
from rdss.model.workload import Workload
from tests.support import archives

GZIP_MAGIC = b"\x1f\x8b"


# -- the codec, on any bytes -----------------------------------------------------------------------


def decoded(spark: Any, data: bytes, *, marker: str | None = runtime.DAMAGE_MARKER) -> bytes:
    """An object's content as the jobs' codec gives it to Spark's line reader."""
    jvm = spark.sparkContext._jvm
    conf = jvm.org.apache.hadoop.conf.Configuration(False)
    if marker is not None:
        conf.set(runtime.DAMAGE_KEY, marker)
    codec = jvm.rdss.glue.ArchiveCodec()
    codec.setConf(conf)
    stream = codec.createInputStream(jvm.java.io.ByteArrayInputStream(bytearray(data)))
    try:
        return bytes(stream.readAllBytes())
    finally:
        stream.close()


def readable_prefix(data: bytes) -> tuple[bytes, bool]:
    """What of an object can be read (every gzip member in turn; not gzip: as it is), and
    whether it is damaged after that - the reference, written with zlib."""
    if data[:2] != GZIP_MAGIC:
        return data, False
    content, rest = b"", data
    while rest:
        if rest[:2] != GZIP_MAGIC:
            return content, rest.strip(b"\0") != b""  # zero padding after the last member is allowed
        member = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            content += member.decompress(rest)
        except zlib.error:
            return content, True
        if not member.eof:
            return content, True
        rest = member.unused_data
    return content, False


def split_lines(content: bytes) -> list[bytes]:
    return archive.lines(content)


def member(lines: list[bytes], level: int, name: str | None) -> bytes:
    out = io.BytesIO()
    with gzip.GzipFile(filename=name or "", mode="wb", fileobj=out, compresslevel=level, mtime=0) as file:
        file.write(b"".join(line + b"\n" for line in lines))
    return out.getvalue()


_LINES = st.lists(st.binary(max_size=60).map(lambda b: b.replace(b"\n", b"")), max_size=12)
_OBJECTS = st.lists(st.tuples(_LINES, st.integers(0, 9), st.none() | st.text(max_size=5)), min_size=1, max_size=4)


@st.composite
def objects(draw: st.DrawFn) -> tuple[list[bytes], bytes, str]:
    """Gzip members of lines (any bytes but a newline, any level, with or without a file name),
    then perhaps cut anywhere or followed by any bytes."""
    members = draw(_OBJECTS)
    lines = [line for chunk, _, _ in members for line in chunk]
    data = b"".join(member(chunk, level, name) for chunk, level, name in members)
    damage = draw(st.sampled_from(["none", "cut", "garbage", "padding"]))
    if damage == "cut":
        data = data[: draw(st.integers(1, len(data) - 1))]
    elif damage == "garbage":
        data += draw(st.binary(min_size=1, max_size=40))
    elif damage == "padding":
        data += b"\0" * draw(st.integers(1, 10))
    return lines, data, damage


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=objects())
def test_any_object_is_read_up_to_its_damage_and_ends_with_one_line_saying_so(spark: Any, case: Any) -> None:
    lines, data, damage = case
    content, is_damaged = readable_prefix(data)
    got = split_lines(decoded(spark, data))
    marker = runtime.DAMAGE_MARKER.encode() + b" "
    markers = [line for line in got if line.startswith(marker)]
    records = [line for line in got if not line.startswith(marker)]
    if is_damaged:
        assert len(markers) == 1  # one line, the last, says what and where
        assert got[-1] == markers[0]
        whole = content[: content.rfind(b"\n") + 1]  # the line the damage cut is not a line
        assert records == split_lines(whole)
        assert records == lines[: len(records)]
    else:
        assert markers == []
        assert records == split_lines(content)
        if damage in ("none", "padding"):  # (cut between members, an object looks whole)
            assert records == lines


@given(data=st.binary(max_size=200).filter(lambda b: b[:2] != GZIP_MAGIC))
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_an_object_that_is_not_gzip_is_read_as_it_is(spark: Any, data: bytes) -> None:
    """As rdss/archive/entries.py reads it: an empty object has no lines, any other its bytes."""
    assert decoded(spark, data) == data


def test_without_the_jobs_marker_damage_fails_the_read_as_hadoops_codec_does(spark: Any) -> None:
    truncated = gzip.compress(b"a line\n" * 100)[:-5]
    with pytest.raises(Exception, match="ends inside a gzip"):
        decoded(spark, truncated, marker=None)


# -- the jobs, on an archive with damaged objects ---------------------------------------------------


def put(root: Path, name: str, data: bytes) -> Path:
    path = root / "year=2026" / "month=11" / "day=21" / "hour=09" / f"rdss-test-input-1-2026-11-21-09-14-03-{name}.gz"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def payloads(seed: int, count: int) -> list[bytes]:
    workload = Workload(seed)
    return [orjson.dumps(workload.message("MetadataCreate", "Event")) for _ in range(count)]


def test_the_compaction_counts_every_readable_record_and_names_each_damaged_object(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A good object, one cut inside a member, one with bytes after its last member, one that
    is not gzip, one empty: every record that can be read is counted once, the two damaged
    objects are named in one line each, and the run ends with its counts."""
    root = tmp_path / "audit"
    good, cut, followed, plain = payloads(1, 5), payloads(2, 60), payloads(3, 4), payloads(4, 3)
    put(root, "good", archives.framed(good))
    whole = archives.framed(cut)
    truncated = whole[: len(whole) * 2 // 3]
    put(root, "cut", truncated)
    put(root, "followed", archives.framed(followed) + b"not gzip\x00\xff" * 3)
    put(root, "plain", b"".join(line + b"\n" for line in archives.entries(plain)))
    put(root, "empty", b"")
    readable, _ = readable_prefix(truncated)
    survivors = len(archive.lines(readable[: readable.rfind(b"\n") + 1]))
    assert 0 < survivors < len(cut)

    assert audit_compaction.main(["--input", str(root), "--output", str(tmp_path / "curated")], spark=spark) == 0
    out, err = capsys.readouterr()
    counts = orjson.loads(out.splitlines()[-1])
    expected = len(good) + survivors + len(followed) + len(plain)
    assert counts == {
        "lines": expected,
        "messages": expected,
        "rejects": 0,
        "duplicates": 0,
        "archivedAgain": 0,
        "damagedObjects": 2,
    }
    named = [line for line in err.splitlines() if "is damaged" in line]
    assert len(named) == 2
    assert any("-cut.gz is damaged, read up to there: the object ends inside a gzip member" in line for line in named)
    assert any("-followed.gz is damaged, read up to there: bytes after the last gzip member" in line for line in named)


def test_a_damaged_errors_archive_object_is_named_and_counts_no_phantom_record(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The report reads the errors archive with the same codec: the line a damaged object ends
    with is no error record (it had been counted under errorCode "none")."""
    errors = tmp_path / "errors" / "invalid"
    refused = [b'{"messageHeader":{"errorCode":"GENERR007","errorDescription":"%d"}}' % i for i in range(40)]
    data = archives.framed(refused)
    truncated = data[: len(data) // 2]
    put(errors, "cut", truncated)
    readable, _ = readable_prefix(truncated)
    survivors = readable.count(b"\n")
    assert 0 < survivors < len(refused)
    records = audit_report.read_errors(spark, str(tmp_path / "errors")).collect()
    _, err = capsys.readouterr()
    assert [row["errorCode"] for row in records] == ["GENERR007"] * survivors
    assert "audit-report: archive object" in err
    assert "-cut.gz is damaged" in err
