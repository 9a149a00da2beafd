"""Archive objects for tests: records framed as archive entries (:mod:`rdss.archive`), each
with an identity of its own, and read back."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from datetime import datetime

from rdss import archive

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
