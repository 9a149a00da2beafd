"""Tables the Glue jobs write and Athena reads: one definition for the jobs and the CDK app.

Pure Python on purpose: the CDK app imports it to declare the Glue tables, and Glue ships it
to the jobs (``--extra-py-files``); neither has to import Spark to read it.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

#: Message types a partition may name; anything else is filed under UNKNOWN_TYPE so that an
#: arbitrary string from a bad message never becomes an S3 path or breaks partition projection.
#: Every version's types: the same list as rdss.model.schemas.SPOKEN_TYPES (this file cannot
#: import rdss in Glue), kept so by tests/unit/test_package.py. 4.0.0's PreservationEvent is
#: appended, so the partitions of the types before it keep their names.
MESSAGE_TYPES = (
    "MetadataCreate",
    "MetadataUpdate",
    "MetadataDelete",
    "MetadataRead",
    "VocabularyRead",
    "VocabularyPatch",
    "PreservationEvent",
)
UNKNOWN_TYPE = "Unknown"

#: Curated messages (``<output>/messages``): one row per unique messageId, in Hive types.
CURATED_COLUMNS: tuple[tuple[str, str], ...] = (
    ("messageId", "string"),
    ("messageClass", "string"),
    ("correlationId", "string"),
    ("sequence", "string"),
    ("position", "int"),
    ("total", "int"),
    ("publishedTimestamp", "timestamp"),
    ("expirationTimestamp", "timestamp"),
    ("generator", "string"),
    ("version", "string"),
    ("errorCode", "string"),
    ("bodyBytes", "bigint"),
    ("archivedAt", "timestamp"),
)
#: Partition columns of the curated table, in path order: dt=yyyy-MM-dd/messageType=...
CURATED_PARTITIONS: tuple[tuple[str, str], ...] = (("dt", "string"), ("messageType", "string"))

#: Lines of the raw archive that are not JSON or carry no messageId, and records the broker
#: moved to the invalid or error channel (``<output>/rejects``); errorCode is the broker's, when
#: the errors archive was given.
REJECT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("line", "string"),
    ("reason", "string"),
    ("source", "string"),
    ("archivedAt", "timestamp"),
    ("errorCode", "string"),
)

#: The raw archives as the archiver writes them: one archive entry per line (rdss/archive/entries.py) -
#: the record's identity and arrival, and its exact bytes as ``text`` (or ``base64`` when they
#: are not UTF-8; Athena reads a record's header with json_extract on ``text``). A line of an
#: archive written before entries is one raw message: its ``messageHeader`` and ``messageBody``
#: read as before, the entry's columns null. Count a record once per identity
#: (stream, shard, sequenceNumber): some are archived twice.
RAW_AUDIT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("rdssArchive", "int"),
    ("stream", "string"),
    ("shard", "string"),
    ("sequenceNumber", "string"),
    ("partitionKey", "string"),
    ("arrival", "string"),
    ("text", "string"),
    ("base64", "string"),
    ("messageHeader", "string"),
    ("messageBody", "string"),
)
RAW_AUDIT_PARTITIONS: tuple[tuple[str, str], ...] = (
    ("year", "string"),
    ("month", "string"),
    ("day", "string"),
    ("hour", "string"),
)

#: Where an archive object's key says when Firehose delivered it: the object's name ends
#: ``<stream>-<version>-<yyyy-MM-dd-HH-mm-ss>-<random>[.gz]``, to the second; failing that,
#: the Hive-style hour prefix (``year=/month=/day=/hour=``). Python and Java regular expressions.
OBJECT_TIME = r"-(\d{4})-(\d{2})-(\d{2})-(\d{2})-(\d{2})-(\d{2})-[0-9A-Za-z-]+(?:\.[0-9A-Za-z]+)?$"
HOUR_PREFIX = r"year=(\d{4})/month=(\d{2})/day=(\d{2})/hour=(\d{2})/"
_KEY_TIMES = (re.compile(OBJECT_TIME), re.compile(HOUR_PREFIX))


def archived_at(key: str) -> datetime | None:
    """When the object ``key`` names was delivered (the archivedAt column): the time in its
    name, else its hour prefix, else None. The hour prefix alone would make every
    publish-to-archive latency wrong by up to an hour."""
    for pattern in _KEY_TIMES:
        match = pattern.search(key)
        if match is not None:
            # the hour prefix has no minutes and seconds
            year, month, day, hour, minute, second = [*(int(group) for group in match.groups()), 0, 0][:6]
            try:
                return datetime(year, month, day, hour, minute, second, tzinfo=UTC)
            except ValueError:
                continue
    return None


#: The day, in reports, of an error record whose object key names no delivery time. (A curated
#: row's dt is never unknown: it falls back from publishedTimestamp to the archive time, and
#: then to the day the job ran, so that every row stays reachable through the table's date
#: partition projection; Firehose names every object after its delivery time, so only
#: hand-made archives ever need the last resort.)
UNKNOWN_DATE = "unknown"

#: Reasons a raw line is rejected (the ``reason`` column of ``<output>/rejects``).
REJECT_NOT_JSON = "not JSON"
REJECT_NOT_UTF8 = "not UTF-8"  # the line is kept base64-encoded
REJECT_NO_MESSAGE_ID = "no messageId"
REJECT_BY_BROKER = "rejected by the broker"  # a message its errors-archive record shows refused
REJECT_REASONS = (REJECT_NOT_JSON, REJECT_NOT_UTF8, REJECT_NO_MESSAGE_ID, REJECT_BY_BROKER)

#: The codes the broker's classifier gives (parse, envelope, header, type, size, expiry and body
#: stages): an errors-archive record with one of them may be the broker's refusal of an input
#: record. Any other code (GENERR005 give-ups, GENERR009 handler failures, application codes)
#: is a consumer's, about a message the broker had accepted.
BROKER_CODES = ("GENERR001", "GENERR002", "GENERR003", "GENERR004", "GENERR006", "GENERR007", "GENERR010")
#: The partition key of a consumer's move starts with this, then names its consumer group
#: (rdss.model.rejection.MOVED_PREFIX): consumers put their moves on invalid and error themselves, so
#: such a record is no verdict on an input record, whatever its code.
MOVED_PREFIX = "moved:"

#: Per messageId the broker accepted more than once, how many of its records it dropped as
#: duplicates (``<output>/duplicates``): the duplicate rate's numerator.
DUPLICATE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("messageId", "string"),
    ("discarded", "bigint"),
)

#: Report tables (``audit_report.py``, under its ``--output``): small aggregates, unpartitioned,
#: each written as Parquet (``<output>/<table>/``) and CSV (``<output>/csv/<table>/``).
#: Messages per day (of publication), type, class and generator.
VOLUME_COLUMNS: tuple[tuple[str, str], ...] = (
    ("dt", "string"),
    ("messageType", "string"),
    ("messageClass", "string"),
    ("generator", "string"),
    ("messages", "bigint"),
)
#: Records the errors archive holds per day (of archiving), channel (invalid | error) and
#: errorCode, against the records received that day (curated messages + rejected lines).
ERROR_RATE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("dt", "string"),
    ("channel", "string"),
    ("errorCode", "string"),
    ("records", "bigint"),
    ("received", "bigint"),
    ("rate", "double"),
)
#: Per day: records that carried a messageId, how many repeated an earlier one, and the rate.
DUPLICATE_RATE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("dt", "string"),
    ("records", "bigint"),
    ("duplicates", "bigint"),
    ("rate", "double"),
)
#: Sequences (total > 1) with fewer distinct positions archived than their total.
INCOMPLETE_SEQUENCE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("sequence", "string"),
    ("messageType", "string"),
    ("total", "int"),
    ("parts", "bigint"),
    ("firstPublished", "timestamp"),
    ("lastArchivedAt", "timestamp"),
)
#: Publish-to-archive latency (archivedAt - publishedTimestamp) per day and type, in seconds.
LATENCY_COLUMNS: tuple[tuple[str, str], ...] = (
    ("dt", "string"),
    ("messageType", "string"),
    ("messages", "bigint"),
    ("p50Seconds", "double"),
    ("p90Seconds", "double"),
    ("p99Seconds", "double"),
    ("maxSeconds", "double"),
)
REPORT_TABLES: dict[str, tuple[tuple[str, str], ...]] = {
    "volume": VOLUME_COLUMNS,
    "error_rates": ERROR_RATE_COLUMNS,
    "duplicate_rates": DUPLICATE_RATE_COLUMNS,
    "incomplete_sequences": INCOMPLETE_SEQUENCE_COLUMNS,
    "latency": LATENCY_COLUMNS,
}
#: The report's JSON summary of the whole period, beside the tables.
REPORT_SUMMARY = "summary.json"
