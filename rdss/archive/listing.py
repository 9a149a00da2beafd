"""The archive in S3 by hour: the objects under each hour prefix of a time window, and their
entries (read by :func:`rdss.archive.entries.read`). ``rdss trace`` and ``rdss replay`` both read
the archive through here: one listing, one reader."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from rdss.archive import entries as archive_entries

if TYPE_CHECKING:
    from rdss.deployment.topology import Deployment

#: The archives and the prefix each is written under.
ARCHIVES = (("audit", "audit/"), ("errors", "errors/"))


@dataclass(frozen=True)
class Archived:
    """One archive entry, and where it lies."""

    #: ``audit`` or ``errors``
    archive: str
    bucket: str
    key: str
    #: When its object was written.
    written: datetime | None
    #: Its place in the object (1: the first entry).
    line: int
    entry: archive_entries.Entry


class ArchiveListing:
    """A deployment's archives (``audit`` and ``errors``: their bucket names) read by hour."""

    def __init__(self, s3: Any, buckets: Mapping[str, str]) -> None:
        self.s3 = s3
        self.buckets = dict(buckets)

    @classmethod
    def of(cls, deployment: Deployment, s3: Any) -> ArchiveListing:
        """``deployment``'s archives, in the buckets it names (``Deployment.bucket``: the names
        CloudFormation gave them where the caller read those, else ``rdss-<env>-audit``...)."""
        return cls(s3, {kind: deployment.bucket(kind) for kind, _ in ARCHIVES})

    def keys(self, bucket: str, prefix: str) -> list[tuple[str, datetime | None]]:
        """The objects under one hour prefix, in key order, and when each was written."""
        keys: list[tuple[str, datetime | None]] = []
        try:
            for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
                for entry in page.get("Contents", []):
                    written = entry.get("LastModified")
                    keys.append((entry["Key"], written.astimezone(UTC) if isinstance(written, datetime) else None))
        except ClientError:
            return []
        return keys

    def objects(
        self, window: tuple[datetime, datetime], archives: Sequence[str] = ("audit", "errors")
    ) -> Iterator[tuple[str, str, str, datetime | None]]:
        """(archive, bucket, key, written) of every object under the hour prefixes of ``window``."""
        for kind, base in ARCHIVES:
            if kind not in archives:
                continue
            bucket = self.buckets[kind]
            for prefix in hour_prefixes(base, *window, errors=kind == "errors"):
                for key, written in self.keys(bucket, prefix):
                    yield kind, bucket, key, written

    def read(self, bucket: str, key: str) -> list[archive_entries.Entry]:
        """One object's entries.

        Raises:
            ClientError, OSError, EOFError: it cannot be read.
        """
        return archive_entries.read(self.s3.get_object(Bucket=bucket, Key=key)["Body"].read())

    def entries(
        self, window: tuple[datetime, datetime], archives: Sequence[str] = ("audit", "errors")
    ) -> Iterator[Archived]:
        """Every entry of the archives under the hour prefixes of ``window``; an object that
        cannot be read is passed over (a reader shows what can be read)."""
        for kind, bucket, key, written in self.objects(window, archives):
            try:
                entries = self.read(bucket, key)
            except (ClientError, OSError, EOFError):
                continue
            for number, entry in enumerate(entries, 1):
                yield Archived(kind, bucket, key, written, number, entry)


def hour_prefixes(base: str, start: datetime, end: datetime, *, errors: bool) -> list[str]:
    """The hour prefixes from ``start`` to ``end`` (for errors: under invalid/ and error/)."""
    bases = [f"{base}invalid/", f"{base}error/"] if errors else [base]
    hour = start.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    prefixes: list[str] = []
    while hour <= end:
        prefixes.extend(archive_entries.hour_prefix(b, hour) for b in bases)
        hour += timedelta(hours=1)
    return prefixes
