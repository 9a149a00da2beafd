"""The Athena named queries: the questions operators and analysts ask most often, over the Glue
tables of the catalog (stacks/catalog.py). The CDK app declares each in the environment's Athena
workgroup (stacks/queries.py); they live in the package so that what analysts run on this machine
is the same SQL."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class NamedQuery:
    name: str
    description: str
    sql: str


def named_queries() -> tuple[NamedQuery, ...]:
    """The queries, over the tables of :class:`stacks.catalog.Catalog` (unqualified names: the
    named query's database is the environment's)."""
    return (
        NamedQuery(
            "volume-per-type-per-day",
            "Curated messages per day and messageType (the last 30 days)",
            """SELECT dt, messageType, count(*) AS messages
FROM messages
WHERE dt >= date_format(current_date - INTERVAL '30' DAY, '%Y-%m-%d')
GROUP BY dt, messageType
ORDER BY dt DESC, messages DESC""",
        ),
        NamedQuery(
            "error-rate-per-code",
            "Records sent to the invalid and error channels per day and errorCode, against all records published",
            """WITH audit AS (
  SELECT year, month, day, sequenceNumber,
         row_number() OVER (PARTITION BY stream, shard, sequenceNumber ORDER BY year, month, day) AS copy
  FROM audit_raw
), published AS (
  SELECT year, month, day, count(*) AS records
  FROM audit
  WHERE sequenceNumber IS NULL OR copy = 1
  GROUP BY year, month, day
), errors AS (
  SELECT year, month, day, channel, sequenceNumber,
         coalesce(json_extract_scalar(text, '$.messageHeader.errorCode'),
                  json_extract_scalar(messageHeader, '$.errorCode')) AS errorCode,
         row_number() OVER (PARTITION BY stream, shard, sequenceNumber ORDER BY year, month, day) AS copy
  FROM errors_raw
), failed AS (
  SELECT year, month, day, channel, errorCode, count(*) AS records
  FROM errors
  WHERE sequenceNumber IS NULL OR copy = 1
  GROUP BY year, month, day, channel, errorCode
)
SELECT f.year, f.month, f.day, f.channel, f.errorCode, f.records,
       p.records AS published,
       CAST(f.records AS double) / nullif(p.records, 0) AS rate
FROM failed f
LEFT JOIN published p ON p.year = f.year AND p.month = f.month AND p.day = f.day
ORDER BY f.year DESC, f.month DESC, f.day DESC, f.records DESC""",
        ),
        NamedQuery(
            "duplicates",
            "Messages the broker accepted more than once (resends; Kinesis is at-least-once) and the duplicate rate: "
            "duplicates among the records it accepted, as the report gives it",
            """SELECT count(*) AS duplicated_messages,
       sum(discarded) AS discarded_records,
       CAST(sum(discarded) AS double) / nullif((SELECT count(*) FROM messages) + sum(discarded), 0) AS duplicate_rate
FROM duplicates""",
        ),
        NamedQuery(
            "incomplete-sequences",
            "Multi-message sequences with parts missing from the curated archive",
            """SELECT sequence,
       max(total) AS total,
       count(DISTINCT position) AS parts_seen,
       min(publishedTimestamp) AS first_published,
       max(publishedTimestamp) AS last_published
FROM messages
WHERE sequence IS NOT NULL
GROUP BY sequence
HAVING count(DISTINCT position) < max(total)
ORDER BY first_published""",
        ),
        NamedQuery(
            "latency",
            "Time from publishedTimestamp to archiving, per day and messageType (percentiles, seconds)",
            """SELECT dt, messageType,
       count(*) AS messages,
       approx_percentile(date_diff('millisecond', publishedTimestamp, archivedAt), 0.5) / 1000.0 AS p50_seconds,
       approx_percentile(date_diff('millisecond', publishedTimestamp, archivedAt), 0.95) / 1000.0 AS p95_seconds,
       approx_percentile(date_diff('millisecond', publishedTimestamp, archivedAt), 0.99) / 1000.0 AS p99_seconds,
       max(date_diff('millisecond', publishedTimestamp, archivedAt)) / 1000.0 AS max_seconds
FROM messages
WHERE publishedTimestamp IS NOT NULL AND archivedAt IS NOT NULL
  AND dt >= date_format(current_date - INTERVAL '30' DAY, '%Y-%m-%d')
GROUP BY dt, messageType
ORDER BY dt DESC, messageType""",
        ),
    )
