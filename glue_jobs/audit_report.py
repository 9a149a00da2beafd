"""Audit report: what went through the system, what failed and why, how fast.

Input (``--input``): what ``audit_compaction.py`` wrote (``messages/``, ``rejects/``,
``duplicates/``). Optionally (``--errors``) the errors archive: objects of archive entries
(rdss/archive/entries.py, read by the jobs' Java half, each record once) under
``.../invalid/year=/.../`` and ``.../error/year=/.../`` whose records carry ``errorCode`` in
their messageHeader (decorated in place, or wrapped with the original payload).

Output (``--output``): the tables of :data:`schema.REPORT_TABLES`, each as Parquet
(``<output>/<table>/``) and CSV (``<output>/csv/<table>/``, as spreadsheets read it, a text
that would run as a formula led by an apostrophe: :func:`write_csv`), and ``summary.json``, the
whole period in one document.

Locally: ``python glue_jobs/audit_report.py --input PATH --output PATH [--errors PATH]``.
On AWS Glue the same file takes ``--JOB_NAME``, ``--input``, ``--output`` and optionally
``--errors`` (s3:// paths). The report is recomputed over the whole curated table on every
run: its aggregates cover the period, not a run's increment.

Only pyspark, the standard library, ``schema.py`` and ``runtime.py`` are imported: Glue runs
this file without the ``rdss`` package.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

try:
    from glue_jobs import runtime, schema
except ModuleNotFoundError:  # on Glue (--extra-py-files) and when run as glue_jobs/<job>.py
    import runtime  # type: ignore[no-redef,import-not-found]
    import schema  # type: ignore[no-redef,import-not-found]

#: The header members of an errors-archive record the report reads.
ERROR_RECORD_SCHEMA = T.StructType(
    [
        T.StructField(
            "messageHeader",
            T.StructType([T.StructField("errorCode", T.StringType()), T.StructField("messageId", T.StringType())]),
        )
    ]
)
#: Which channel an errors-archive object belongs to, from its key.
_CHANNEL = r"/(invalid|error)/year=\d{4}/"
#: errorCode of an errors-archive record that names none (or does not parse).
NO_CODE = "none"
#: Latency percentiles reported, and how precisely percentile_approx estimates them.
PERCENTILES = (0.5, 0.9, 0.99)
ACCURACY = 10_000


# -- transforms ------------------------------------------------------------------------------------


def volume(messages: DataFrame) -> DataFrame:
    """Messages per day, type, class and generator (:data:`schema.VOLUME_COLUMNS`)."""
    keys = ["dt", "messageType", "messageClass", "generator"]
    return messages.groupBy(*keys).agg(F.count(F.lit(1)).alias("messages")).orderBy(*keys)


def received(messages: DataFrame, rejects: DataFrame) -> DataFrame:
    """Records received per day of archiving: curated messages and rejected lines."""
    kept = messages.select(_day(F.col("archivedAt")).alias("dt"))
    refused = rejects.select(_day(F.col("archivedAt")).alias("dt"))
    return kept.unionByName(refused).groupBy("dt").agg(F.count(F.lit(1)).alias("received"))


def error_records(lines: DataFrame) -> DataFrame:
    """Errors-archive lines (``line, source``) as ``dt, channel, errorCode``.

    The channel is the archive prefix the record is under; dt the day it was archived.
    """
    header = F.from_json(F.col("line"), ERROR_RECORD_SCHEMA).getField("messageHeader")
    code = F.coalesce(header.getField("errorCode"), F.lit(NO_CODE))
    return lines.select(
        _day(_hour_of(F.col("source"))).alias("dt"),
        F.regexp_extract(F.col("source"), _CHANNEL, 1).alias("channel"),
        code.alias("errorCode"),
    )


def error_rates(errors: DataFrame, received_per_day: DataFrame) -> DataFrame:
    """Errors-archive records per day, channel and code, as a share of that day's records
    (:data:`schema.ERROR_RATE_COLUMNS`)."""
    counted = errors.groupBy("dt", "channel", "errorCode").agg(F.count(F.lit(1)).alias("records"))
    joined = counted.join(received_per_day, "dt", "left").fillna(0, subset=["received"])
    rate = F.when(F.col("received") > 0, F.col("records") / F.col("received"))
    return joined.select(
        "dt", "channel", "errorCode", "records", F.col("received").cast("bigint"), rate.cast("double").alias("rate")
    ).orderBy("dt", "channel", "errorCode")


def duplicate_rates(messages: DataFrame, duplicates: DataFrame) -> DataFrame:
    """Per day of publication: records with a messageId, how many repeated one already seen
    (:data:`schema.DUPLICATE_RATE_COLUMNS`)."""
    counted = messages.select("messageId", "dt").join(duplicates, "messageId", "left")
    per_day = counted.groupBy("dt").agg(
        F.count(F.lit(1)).alias("messages"), F.coalesce(F.sum("discarded"), F.lit(0)).alias("duplicates")
    )
    records = F.col("messages") + F.col("duplicates")
    return per_day.select(
        "dt",
        records.cast("bigint").alias("records"),
        F.col("duplicates").cast("bigint").alias("duplicates"),
        (F.col("duplicates") / records).cast("double").alias("rate"),
    ).orderBy("dt")


def incomplete_sequences(messages: DataFrame) -> DataFrame:
    """Sequences with fewer distinct positions in 1..total than total
    (:data:`schema.INCOMPLETE_SEQUENCE_COLUMNS`)."""
    parts = messages.where(F.col("sequence").isNotNull() & (F.col("total") > 1))
    valid_position = F.when((F.col("position") >= 1) & (F.col("position") <= F.col("total")), F.col("position"))
    grouped = parts.groupBy("sequence").agg(
        F.first("messageType").alias("messageType"),
        F.max("total").alias("total"),
        F.countDistinct(valid_position).alias("parts"),
        F.min("publishedTimestamp").alias("firstPublished"),
        F.max("archivedAt").alias("lastArchivedAt"),
    )
    return grouped.where(F.col("parts") < F.col("total")).select(
        "sequence", "messageType", "total", "parts", "firstPublished", "lastArchivedAt"
    )


def latency_seconds() -> Column:
    """archivedAt - publishedTimestamp, in seconds (to the microsecond)."""
    return (F.unix_micros(F.col("archivedAt")) - F.unix_micros(F.col("publishedTimestamp"))).cast("double") / 1e6


def latency(messages: DataFrame) -> DataFrame:
    """Publish-to-archive latency percentiles per day and type (:data:`schema.LATENCY_COLUMNS`)."""
    timed = messages.where(F.col("archivedAt").isNotNull() & F.col("publishedTimestamp").isNotNull())
    timed = timed.withColumn("latency", latency_seconds())
    quantiles = F.percentile_approx("latency", list(PERCENTILES), ACCURACY)
    grouped = timed.groupBy("dt", "messageType").agg(
        F.count(F.lit(1)).alias("messages"), quantiles.alias("q"), F.max("latency").alias("maxSeconds")
    )
    return grouped.select(
        "dt",
        "messageType",
        "messages",
        *(F.col("q")[i].alias(name) for i, name in enumerate(("p50Seconds", "p90Seconds", "p99Seconds"))),
        "maxSeconds",
    ).orderBy("dt", "messageType")


def summary(messages: DataFrame, rejects: DataFrame, duplicates: DataFrame, errors: DataFrame | None) -> dict[str, Any]:
    """The whole period in one document: totals, rates per code, duplicates, latency."""
    totals = messages.agg(
        F.count(F.lit(1)).alias("messages"),
        F.min("dt").alias("first"),
        F.max("dt").alias("last"),
    ).first()
    assert totals is not None
    unique = int(totals["messages"])
    refused = {row["reason"]: int(row["count"]) for row in rejects.groupBy("reason").count().collect()}
    discarded_row = duplicates.agg(F.sum("discarded")).first()
    discarded = int(discarded_row[0] or 0) if discarded_row is not None else 0
    received_total = unique + sum(refused.values())
    by = {
        key: {_label(row[key]): int(row["count"]) for row in messages.groupBy(key).count().collect()}
        for key in ("messageType", "messageClass", "generator")
    }
    codes: dict[str, dict[str, Any]] = {}
    if errors is not None:
        for row in errors.groupBy("channel", "errorCode").count().collect():
            entry = codes.setdefault(_label(row["channel"]), {})
            entry[_label(row["errorCode"])] = {
                "records": int(row["count"]),
                "rate": int(row["count"]) / received_total if received_total else None,
            }
    timed = messages.where(F.col("archivedAt").isNotNull() & F.col("publishedTimestamp").isNotNull())
    quantiles = timed.agg(
        F.percentile_approx(latency_seconds(), list(PERCENTILES), ACCURACY).alias("q"),
        F.max(latency_seconds()).alias("max"),
    ).first()
    latency_summary: dict[str, float | None] = {"p50": None, "p90": None, "p99": None, "max": None}
    if quantiles is not None and quantiles["q"] is not None:
        latency_summary = {**dict(zip(("p50", "p90", "p99"), quantiles["q"], strict=True)), "max": quantiles["max"]}
    return {
        "period": {"first": totals["first"], "last": totals["last"]},
        "received": received_total,
        "messages": unique,
        "rejects": {"total": sum(refused.values()), "byReason": refused},
        "duplicates": {
            "records": discarded,
            "rate": discarded / (unique + discarded) if unique + discarded else None,
        },
        "volume": by,
        "errors": codes,
        "incompleteSequences": incomplete_sequences(messages).count(),
        "latencySeconds": latency_summary,
    }


def _label(value: Any) -> str:
    """A summary key: curated rows of invalid messages may lack a class or a generator."""
    return NO_VALUE if value is None else str(value)


#: The key the summary counts missing values under (JSON object keys must be strings).
NO_VALUE = "(none)"


def _day(moment: Column) -> Column:
    return F.coalesce(F.date_format(moment, "yyyy-MM-dd"), F.lit(schema.UNKNOWN_DATE))


def _hour_of(source: Column) -> Column:
    def part(group: int) -> Column:
        return F.regexp_extract(source, schema.HOUR_PREFIX, group).cast("int")

    return F.make_timestamp(part(1), part(2), part(3), part(4), F.lit(0), F.lit(0), timezone=F.lit("UTC"))


#: What makes a spreadsheet read a cell as a formula (or, for tab and carriage return, hides one
#: after them): a text cell starting so gets :data:`FORMULA_GUARD` before it in the CSV copies.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
FORMULA_GUARD = "'"


def spreadsheet_safe(table: DataFrame) -> DataFrame:
    """``table`` with every text value a spreadsheet would run as a formula (a producer's
    generator ``=HYPERLINK(...)``, a consumer's errorCode ``@SUM(...)``) led by an apostrophe,
    which shows it as text. Only for the CSV copies: the Parquet tables keep values as sent."""
    columns = []
    for field in table.schema.fields:
        column = F.col(field.name)
        if isinstance(field.dataType, T.StringType):
            starts = F.substring(column, 1, 1).isin(*FORMULA_STARTS)
            column = F.when(starts, F.concat(F.lit(FORMULA_GUARD), column)).otherwise(column)
        columns.append(column.alias(field.name))
    return table.select(*columns)


def write_csv(table: DataFrame, path: str) -> None:
    """One CSV file of ``table`` as spreadsheets read it (RFC 4180): a header, every value
    quoted, a quote written twice, values kept whole (Spark's writer trims spaces and tabs at
    either end by default, and escapes quotes with a backslash), formulas disarmed
    (:func:`spreadsheet_safe`)."""
    writer = spreadsheet_safe(table).coalesce(1).write.mode("overwrite")
    options = {
        "header": "true",
        "quoteAll": "true",
        "quote": '"',
        "escape": '"',
        "ignoreLeadingWhiteSpace": "false",
        "ignoreTrailingWhiteSpace": "false",
    }
    writer.options(**options).csv(path)


# -- I/O --------------------------------------------------------------------------------------------


def read_curated(spark: SparkSession, path: str) -> tuple[DataFrame, DataFrame, DataFrame]:
    """messages, rejects and duplicates as audit_compaction.py wrote them under ``path``."""
    base = path.rstrip("/")
    messages = spark.read.schema(_struct(schema.CURATED_COLUMNS + schema.CURATED_PARTITIONS)).parquet(
        f"{base}/messages"
    )
    rejects = spark.read.schema(_struct(schema.REJECT_COLUMNS)).parquet(f"{base}/rejects")
    duplicates = spark.read.schema(_struct(schema.DUPLICATE_COLUMNS)).parquet(f"{base}/duplicates")
    return messages, rejects, duplicates


def read_errors(spark: SparkSession, path: str) -> DataFrame:
    """Every record of the errors archive under ``path`` once, as :func:`error_records`. An
    object damaged part way is read up to the damage and named in one line on standard error
    (a second pass over the errors archive, a small share of the traffic, finds them)."""
    runtime.register_entries(spark)
    lines, _ = runtime.Context(spark, {}).archive_lines(path)
    runtime.report_damaged(JOB.name, runtime.damaged(lines))
    return error_records(runtime.unique_entries(runtime.entries(runtime.intact(lines))))


def tables(messages: DataFrame, rejects: DataFrame, duplicates: DataFrame, errors: DataFrame) -> dict[str, DataFrame]:
    """Every report table (:data:`schema.REPORT_TABLES`), in its declared columns and types."""
    built = {
        "volume": volume(messages),
        "error_rates": error_rates(errors, received(messages, rejects)),
        "duplicate_rates": duplicate_rates(messages, duplicates),
        "incomplete_sequences": incomplete_sequences(messages),
        "latency": latency(messages),
    }
    return {
        name: table.select(*(F.col(column).cast(kind).alias(column) for column, kind in schema.REPORT_TABLES[name]))
        for name, table in built.items()
    }


def run(
    spark: SparkSession,
    messages: DataFrame,
    rejects: DataFrame,
    duplicates: DataFrame,
    errors: DataFrame | None,
    output: str,
) -> dict[str, Any]:
    """Write every report table and the summary under ``output``; return the summary."""
    runtime.apply_settings(spark, JOB)
    base = output.rstrip("/")
    messages = messages.cache()
    empty_errors = spark.createDataFrame([], "dt string, channel string, errorCode string")
    try:
        for name, table in tables(
            messages, rejects, duplicates, errors if errors is not None else empty_errors
        ).items():
            shaped = table.cache()
            shaped.coalesce(1).write.mode("overwrite").parquet(f"{base}/{name}")
            write_csv(shaped, f"{base}/csv/{name}")
        document = summary(messages, rejects, duplicates, errors)
        runtime.write_text(
            spark, f"{base}/{schema.REPORT_SUMMARY}", json.dumps(document, indent=2, sort_keys=True) + "\n"
        )
    finally:
        spark.catalog.clearCache()
    return document


_SPARK_TYPES: dict[str, T.DataType] = {
    "string": T.StringType(),
    "int": T.IntegerType(),
    "bigint": T.LongType(),
    "double": T.DoubleType(),
    "timestamp": T.TimestampType(),
}


def _struct(columns: tuple[tuple[str, str], ...]) -> T.StructType:
    return T.StructType([T.StructField(name, _SPARK_TYPES[kind]) for name, kind in columns])


def execute(context: runtime.Context) -> Mapping[str, Any]:
    """The job where it runs: the curated tables and the errors archive in, the report out."""
    spark = context.spark
    messages, rejects, duplicates = read_curated(spark, context.argument("input"))
    errors_path = context.arguments["errors"]
    errors = read_errors(spark, errors_path) if errors_path else None
    return run(spark, messages, rejects, duplicates, errors, context.argument("output"))


JOB = runtime.Job(
    name="audit-report",
    description="Report on the curated audit data and the errors archive.",
    arguments=(
        runtime.Argument(
            "input",
            "audit_compaction.py's output (messages/, rejects/, ...)",
            use=runtime.TABLES,
            holds=("messages", "rejects", "duplicates"),
        ),
        runtime.Argument("output", "where the report tables and summary.json go", use=runtime.OUTPUT),
        runtime.Argument(
            "errors", "the errors archive (invalid/ and error/ under it), read recursively", required=False
        ),
    ),
    run=execute,
    jars=(runtime.JAR,),
)


def local_session(app: str | None = None) -> SparkSession:
    """A local SparkSession for this job (:func:`runtime.local_session`)."""
    return runtime.local_session(JOB, app=app)


def main(argv: Sequence[str] | None = None, *, spark: SparkSession | None = None) -> int:
    """The entry point, local or on AWS Glue (:func:`runtime.main`); prints the summary as JSON."""
    return runtime.main(JOB, argv, spark=spark)


if __name__ == "__main__":
    sys.exit(main())
