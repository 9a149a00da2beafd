"""The archive layout: what Firehose writes to S3 and the Glue jobs read back.

One object holds a batch of records, gzip-compressed, each record followed by a newline (the
delivery stream appends the delimiter: Firehose itself concatenates records with none). Keys
carry Hive-style hour partitions of the delivery time::

    audit/year=2026/month=11/day=21/hour=09/rdss-dev-input-1-2026-11-21-09-14-03-<uuid>.gz

The CDK app gives Firehose the same layout with its ``!{timestamp:...}`` expressions; the
local runtime's Firehose bridge writes it with :func:`object_key` and :func:`encode`.
"""

from __future__ import annotations

import gzip
import re
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime

#: Firehose's prefix expression for the hour partitions (appended to a channel's archive prefix).
FIREHOSE_HOUR_EXPRESSION = "year=!{timestamp:yyyy}/month=!{timestamp:MM}/day=!{timestamp:dd}/hour=!{timestamp:HH}/"
#: Where Firehose puts records it could not deliver, under the same bucket.
FIREHOSE_ERROR_EXPRESSION = "delivery-failures/!{firehose:error-output-type}/" + FIREHOSE_HOUR_EXPRESSION

_HOUR = re.compile(r"year=(\d{4})/month=(\d{2})/day=(\d{2})/hour=(\d{2})/")


def hour_prefix(base: str, moment: datetime) -> str:
    """``<base>year=YYYY/month=MM/day=DD/hour=HH/`` for the UTC hour of ``moment``."""
    utc = moment.astimezone(UTC)
    return f"{base}year={utc:%Y}/month={utc:%m}/day={utc:%d}/hour={utc:%H}/"


def object_key(base: str, moment: datetime, delivery_stream: str, version: int = 1) -> str:
    """A key the way Firehose names objects: ``<hour prefix><stream>-<version>-<time>-<uuid>.gz``."""
    utc = moment.astimezone(UTC)
    return f"{hour_prefix(base, utc)}{delivery_stream}-{version}-{utc:%Y-%m-%d-%H-%M-%S}-{uuid.uuid4()}.gz"


def archived_at(key: str) -> datetime | None:
    """The delivery hour a key's partitions name, or None when it has none."""
    match = _HOUR.search(key)
    if match is None:
        return None
    year, month, day, hour = (int(g) for g in match.groups())
    return datetime(year, month, day, hour, tzinfo=UTC)


def encode(records: Iterable[bytes]) -> bytes:
    """One archive object: the records, each followed by a newline, gzip-compressed."""
    return gzip.compress(b"".join(record + b"\n" for record in records))


def decode(data: bytes) -> list[bytes]:
    """The lines of one archive object (a record holding a raw newline reads back as two)."""
    text = gzip.decompress(data)
    lines = text.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return lines
