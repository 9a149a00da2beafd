"""Athena: the analysts' workgroup and the named queries operators ask most often.

The workgroup enforces its configuration (results encrypted with the analytics key, in the
results bucket; a scan limit per query), so a client cannot send results elsewhere or
unencrypted.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import aws_athena as athena
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct


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


class AthenaWorkgroup(Construct):
    """Workgroup ``rdss-<env>`` with enforced, encrypted results and the named queries."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        database_name: str,
        results: s3.IBucket,
        key: kms.IKey,
        bytes_scanned_cutoff: int,
        recursive_delete: bool,
    ) -> None:
        super().__init__(scope, construct_id)
        self.workgroup = athena.CfnWorkGroup(
            self,
            "WorkGroup",
            name=name,
            description="RDSS analytics: the message archives and curated tables",
            state="ENABLED",
            # dev: the workgroup goes with the stack even though queries ran in it.
            recursive_delete_option=recursive_delete,
            work_group_configuration=athena.CfnWorkGroup.WorkGroupConfigurationProperty(
                enforce_work_group_configuration=True,
                publish_cloud_watch_metrics_enabled=True,
                bytes_scanned_cutoff_per_query=bytes_scanned_cutoff,
                result_configuration=athena.CfnWorkGroup.ResultConfigurationProperty(
                    output_location=f"s3://{results.bucket_name}/results/",
                    expected_bucket_owner=results.stack.account,
                    encryption_configuration=athena.CfnWorkGroup.EncryptionConfigurationProperty(
                        encryption_option="SSE_KMS", kms_key=key.key_arn
                    ),
                ),
            ),
        )
        self.queries: list[athena.CfnNamedQuery] = []
        for query in named_queries():
            named = athena.CfnNamedQuery(
                self,
                query.name,
                name=query.name,
                description=query.description,
                database=database_name,
                work_group=self.workgroup.ref,
                query_string=query.sql,
            )
            self.queries.append(named)
