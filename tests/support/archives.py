"""Archive objects for tests: records framed as archive entries (:mod:`rdss.archive.entries`), each
with an identity of its own, and read back."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from datetime import datetime
from typing import Any

import orjson

from rdss.archive import entries as archive
from rdss.model.workload import Workload

# one counter for the whole test run: no two records framed here share an identity
_SEQUENCE = itertools.count(1)


def entries(
    payloads: Iterable[bytes],
    *,
    stream: str = "rdss-test-input",
    shard: str = "shardId-000000000000",
    arrival: datetime | float | None = None,
) -> list[bytes]:
    """Each payload as an entry line, each with the next sequence number of the run."""
    return [
        archive.frame(
            payload,
            stream=stream,
            shard=shard,
            sequence_number=f"{next(_SEQUENCE):056d}",
            partition_key=f"key-{index}",
            arrival=arrival,
        )
        for index, payload in enumerate(payloads)
    ]


def encode(lines: Iterable[bytes], *, per_member: int = 100) -> bytes:
    """Entry lines as one object the way Firehose delivers the archiver's records: a gzip
    member per ``per_member`` entries (one archiver batch each), concatenated."""
    listed = list(lines)
    batches = [listed[start : start + per_member] for start in range(0, len(listed), per_member)] or [[]]
    return b"".join(member.data for batch in batches for member in archive.pack(batch))


def framed(payloads: Iterable[bytes], **identity: str) -> bytes:
    """One object of ``payloads``, each a new record (:func:`entries`, :func:`encode`)."""
    return encode(entries(payloads, **identity))


def payloads(data: bytes) -> list[bytes]:
    """The records of one object, each identity once."""
    return [entry.payload for entry in archive.unique(archive.read(data))]


def odd_records(seed: int = 41) -> dict[str, bytes]:
    """The records of every shape a line-based archive broke: indented JSON, a string holding a
    newline (escaped: valid; raw: not JSON), bytes that are not UTF-8, nothing at all, compact JSON."""
    workload = Workload(seed)

    def built(**body: Any) -> dict[str, Any]:
        message = workload.message("MetadataCreate", "Event")
        message["messageBody"].update(body)
        return message

    indented = orjson.dumps(built(), option=orjson.OPT_INDENT_2)
    multi_line = orjson.dumps(
        built(objectTitle="line one\nline two\r\nline three"),
        option=orjson.OPT_INDENT_2,
    )
    raw_newline = orjson.dumps(built()).replace(b'"objectTitle":"', b'"objectTitle":"line one\nline two ', 1)
    latin1 = orjson.dumps(built())
    latin1 = latin1.replace(b'"objectTitle":"', b'"objectTitle":"caf\xe9 ', 1)
    compact_ = orjson.dumps(built())
    return {
        "indented": indented,
        "multi-line string": multi_line,
        "raw newline in a string": raw_newline,
        "not UTF-8": latin1,
        "empty": b"",
        "compact": compact_,
    }
