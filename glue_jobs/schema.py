"""Tables the Glue jobs write and Athena reads: one definition for the jobs and the CDK app.

Pure Python on purpose: the CDK app imports it to declare the Glue tables, and Glue ships it
to the jobs (``--extra-py-files``); neither has to import Spark to read it.
"""

from __future__ import annotations

#: Message types a partition may name; anything else is filed under UNKNOWN_TYPE so that an
#: arbitrary string from a bad message never becomes an S3 path or breaks partition projection.
MESSAGE_TYPES = (
    "MetadataCreate",
    "MetadataUpdate",
    "MetadataDelete",
    "MetadataRead",
    "VocabularyRead",
    "VocabularyPatch",
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

#: Lines of the raw archive that are not JSON or carry no messageId (``<output>/rejects``).
REJECT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("line", "string"),
    ("reason", "string"),
    ("source", "string"),
    ("archivedAt", "timestamp"),
)

#: The raw audit archive as Firehose writes it: one JSON message per line (Athena reads the
#: header fields it needs; the body stays a string).
RAW_AUDIT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("messageHeader", "string"),
    ("messageBody", "string"),
)
RAW_AUDIT_PARTITIONS: tuple[tuple[str, str], ...] = (
    ("year", "string"),
    ("month", "string"),
    ("day", "string"),
    ("hour", "string"),
)
