"""Audit compaction: the raw audit archive becomes curated Parquet.

Input (``--input``): the archive's objects under Hive-style hour prefixes
(``audit/year=/month=/day=/hour=/<stream>-<version>-<yyyy-MM-dd-HH-mm-ss>-<uuid>.gz``), read
recursively: gzip members of archive entries (rdss/archive/entries.py), one line each, holding the exact
bytes a producer published - so a record may be anything - with its stream, shard and sequence
number. A record archived twice (Firehose, and an archiver restarted mid-stream, are at least
once) is read once: of the entries sharing an identity only the first seen counts
(:func:`archived_again`). A line of an archive written before entries is one record with no
identity, as it always was.

Optionally (``--errors``) the errors archive: the records the broker moved to the invalid and
error channels, decorated (rdss/model/decoration.py). With it, records are accounted as the broker
decided, record by record (:func:`matched`): a line whose bytes are those of a rejection the
broker made is a rejection, never a duplicate nor a messageId's curated row, so that producers'
broken copies of a message (resent under its messageId) no longer count as duplicates of it.

Every audit line is a producer's record, judged as the broker judged it: a header's
``errorCode`` and ``errorDescription`` are optional fields of a message, never a verdict (a
valid message carrying them is curated like any other). Consumers' moves never enter ``input``:
they are put on ``invalid`` and ``error`` by the consumers themselves, keyed ``moved:<group>``,
and are no verdict on an input record (:func:`by_broker`).

Output, under ``--output`` (and, printed, the counts: ``lines`` - the records, each once -
``messages``, ``rejects``, ``duplicates``, ``archivedAgain``, the entries left out as copies
of a record already read, and ``damagedObjects`` when an object is truncated or has bytes after
its last gzip member that are not gzip: it is read up to there, named in one line on standard
error, and the run goes on):

* ``messages/dt=<yyyy-MM-dd>/messageType=<type>/``: one row per messageId the broker accepted
  (:data:`schema.CURATED_COLUMNS`). The first-seen record wins: earliest archivedAt, then
  object key, then line within the object, so a re-run over the same archive gives the same rows.
* ``rejects/``: every line that is not JSON or carries no messageId, and every record the broker
  rejected, with the raw line, the reason and the broker's errorCode
  (:data:`schema.REJECT_COLUMNS`); nothing is dropped.
* ``duplicates/``: per messageId the broker accepted more than one record of, how many it
  dropped as duplicates (:data:`schema.DUPLICATE_COLUMNS`), so the report can give a duplicate rate.

Locally: ``python glue_jobs/audit_compaction.py --input PATH --output PATH [--errors PATH]`` on
``local[*]``. On AWS Glue (``s3://`` paths, ``--JOB_NAME``) the same file reads the audit
archive through a bookmarked source, so each run takes only objects it has not seen, and drops
records whose messageId an earlier run already curated; the errors archive is read whole on
every run (it holds a small share of the traffic; the report reads it whole too). A rejection
archived after the run that read its record (Firehose buffers both archives) is not matched by
a later run: that record is counted as the broker accepted it.

Only pyspark, the standard library, ``schema.py`` and ``runtime.py`` are imported: Glue runs
this file without the ``rdss`` package.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, Observation, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.storagelevel import StorageLevel

try:
    from glue_jobs import runtime, schema
except ModuleNotFoundError:  # on Glue (--extra-py-files) and when run as glue_jobs/<job>.py
    import runtime  # type: ignore[no-redef,import-not-found]
    import schema  # type: ignore[no-redef,import-not-found]

#: The lines the transforms take: the raw line (an archive entry), the object it is in, and a
#: number that increases down each object (:func:`with_line_numbers`).
LINE_COLUMNS = ("line", "source", "lineNumber")
#: The objects the lines come from: when each was archived, and its place in archive order.
OBJECT_COLUMNS = ("source", "archivedAt", "archivedDay", "objectRank")

#: Where the job's Java half is built (``make setup``): the line parsers Spark calls. On Glue
#: the same jar is passed with ``--extra-jars``.
LIB = Path(__file__).resolve().parent / "lib"
JAR = runtime.JAR
#: A class-data-sharing archive of the classes a run loads (``make setup`` records it): the
#: JVM maps them instead of loading and verifying them one by one. Used when present.
CDS_ARCHIVE = LIB / "spark-classes.jsa"
#: The SQL function that parses an audit line (glue_jobs/java/rdss/glue/AuditHeader.java).
HEADER_FUNCTION = "rdss_audit_header"
HEADER_CLASS = "rdss.glue.AuditHeader"
#: The struct it returns: the header members the curated table needs, the two timestamps
#: already read to microseconds (UTC), the UTC day of publication, the body's size, and
#: whether the line is one JSON value. messageId is null unless it is.
HEADER_FIELDS = T.StructType(
    [
        T.StructField("messageId", T.StringType()),
        T.StructField("correlationId", T.StringType()),
        T.StructField("messageClass", T.StringType()),
        T.StructField("messageType", T.StringType()),
        T.StructField("sequence", T.StringType()),
        T.StructField("position", T.IntegerType()),
        T.StructField("total", T.IntegerType()),
        T.StructField("publishedTimestamp", T.LongType()),
        T.StructField("expirationTimestamp", T.LongType()),
        T.StructField("publishedDay", T.StringType()),
        T.StructField("generator", T.StringType()),
        T.StructField("version", T.StringType()),
        T.StructField("errorCode", T.StringType()),
        T.StructField("bodyBytes", T.LongType()),
        T.StructField("json", T.BooleanType()),
    ]
)
#: The SQL function that reads an errors-archive record (glue_jobs/java/rdss/glue/ErrorRecord.java):
#: its errorCode, and the SHA-256, length and CRC-32 of the payload as it was before decoration
#: (rdss/model/decoration.py ``original``); for a Claim Check, the SHA-256 and length it carries.
ERROR_FUNCTION = "rdss_error_record"
ERROR_CLASS = "rdss.glue.ErrorRecord"
ERROR_RECORD_FIELDS = T.StructType(
    [
        T.StructField("errorCode", T.StringType()),
        T.StructField("sha256", T.StringType()),
        T.StructField("bytes", T.LongType()),
        T.StructField("crc32", T.LongType()),
    ]
)
#: Which channel an errors-archive object belongs to, from its key.
ERROR_CHANNEL = r"/(invalid|error)/year=\d{4}/"

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# separators of the object list handed to Spark: no object key holds either
_ROW, _CELL = "\u0000", "\u0001"
#: Curated columns whose values are (nearly) all distinct: Parquet dictionary encoding skipped.
UNIQUE_COLUMNS = ("messageId", "correlationId", "sequence", "publishedTimestamp", "expirationTimestamp", "archivedAt")
# monotonically_increasing_id keeps a row's place within its task in the low 33 bits
_LINE_BITS = 33

#: Start-up settings of a local run on a small machine (measured on 2 cores: see docs/contributors.md), on
#: top of the shared ones (runtime.LOCAL_SETTINGS).
LOCAL_SETTINGS = {
    "spark.sql.files.openCostInBytes": str(1 << 20),
    "spark.sql.files.maxPartitionBytes": str(64 << 20),
    # On 2 cores the JIT compilers compete with the tasks for the whole run (a cold run spends
    # about as long compiling as a warm one takes): less inlining makes C2 compile far faster
    # for little loss, and C2 only for code that runs 10x more often than HotSpot's default
    # halves its compile time while the per-record code still gets it. The parallel
    # collector keeps no concurrent threads busy.
    "spark.driver.extraJavaOptions": "-XX:+UseParallelGC -XX:FreqInlineSize=100 -XX:InlineSmallCode=1000"
    " -XX:MaxInlineLevel=6 -XX:Tier4InvocationThreshold=50000 -XX:Tier4MinInvocationThreshold=10000"
    " -XX:Tier4CompileThreshold=100000 -XX:Tier4BackEdgeThreshold=400000",
    # Adaptive execution plans each stage after the one before: it would keep the parsed
    # records (kept_once) in a job of their own and read them back for the duplicate count,
    # where the static plan does both in one pass. (A run's plan is small and fixed; on Glue
    # it stays on.)
    "spark.sql.adaptive.enabled": "false",
}


@dataclass(frozen=True)
class Rejections:
    """The records the broker moved to the invalid and error channels, as :func:`rejections`
    gives them (``digest, errorCode``, one row per record), and the payload lengths of those
    that are Claim Checks (their bytes are in S3, so only length and digest are known)."""

    records: DataFrame
    claim_check_sizes: tuple[int, ...] = ()
    #: errors-archive objects read only up to where they are damaged
    damaged: tuple[runtime.Damaged, ...] = ()


@dataclass(frozen=True)
class Outputs:
    """What the job writes: the curated rows, the rejects and the duplicates per messageId."""

    messages: DataFrame
    rejects: DataFrame
    duplicates: DataFrame


# -- transforms ------------------------------------------------------------------------------------


def objects(spark: SparkSession, sources: Sequence[str]) -> DataFrame:
    """The objects ``sources`` name, with :data:`OBJECT_COLUMNS`.

    objectRank numbers them in archive order (archivedAt, then key): with a line's place in its
    object it gives every record one number, and the smallest is the first seen. Worked out
    here, on the driver, and handed to Spark as one literal: a handful of objects should not
    cost a Spark stage, nor a Python worker.
    """
    timed = [(source, schema.archived_at(source)) for source in sorted(set(sources))]
    timed.sort(key=lambda item: (item[1] is None, item[1] or _EPOCH, item[0]))

    def row(source: str, moment: datetime | None, rank: int) -> str:
        when = ("", "") if moment is None else (str(_micros(moment)), f"{moment:%Y-%m-%d}")
        return _CELL.join((source, *when, str(rank)))

    text = _ROW.join(row(source, moment, rank) for rank, (source, moment) in enumerate(timed, start=1))
    cells = F.split(F.col("object"), _CELL)
    rows = spark.range(1).select(F.explode(F.split(F.lit(text), _ROW)).alias("object"))
    return rows.where(F.col("object") != "").select(
        cells[0].alias("source"),
        F.timestamp_micros(cells[1].cast("long")).alias("archivedAt"),
        F.when(cells[2] != "", cells[2]).alias("archivedDay"),
        cells[3].cast("int").alias("objectRank"),
    )


def _micros(moment: datetime) -> int:
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def normalised_type(message_type: Column) -> Column:
    """The messageType as a partition value: a known type, else :data:`schema.UNKNOWN_TYPE`."""
    return F.when(message_type.isin(*schema.MESSAGE_TYPES), message_type).otherwise(F.lit(schema.UNKNOWN_TYPE))


def register(spark: SparkSession) -> None:
    """Make :data:`HEADER_FUNCTION`, :data:`ERROR_FUNCTION` and the archive entry reader
    (:func:`runtime.entries`) callable in ``spark``: the jar must be on its classpath."""
    runtime.register_entries(spark)
    try:
        spark.udf.registerJavaFunction(HEADER_FUNCTION, HEADER_CLASS, HEADER_FIELDS)
        spark.udf.registerJavaFunction(ERROR_FUNCTION, ERROR_CLASS, ERROR_RECORD_FIELDS)
    except Exception as error:
        if "rdss.glue." not in str(error) and "ClassNotFound" not in str(error):
            raise
        raise RuntimeError(
            f"{HEADER_CLASS} is not on Spark's classpath: build {JAR} (make setup) and start Spark with it "
            "(local_session does), or on AWS Glue pass it with --extra-jars"
        ) from error


def rejections(lines: DataFrame) -> DataFrame:
    """Errors-archive lines (``line, source``) as ``digest, errorCode, channel, bytes, crc32``:
    one row per record the broker itself moved there (each archived record once).

    Which records are the broker's: :func:`by_broker`; a record that is not a decorated record
    (its payload cannot be recovered) cannot be matched and is left out.
    """
    records = runtime.unique_entries(runtime.entries(lines.select("line", "source")))
    record = F.call_udf(ERROR_FUNCTION, F.col("line").cast("binary"))
    read = records.select(record.alias("record"), F.regexp_extract("source", ERROR_CHANNEL, 1).alias("channel"))
    field = F.col("record").getField
    broker = by_broker(field("errorCode")) & field("sha256").isNotNull()
    return read.where(broker).select(
        field("sha256").alias("digest"),
        field("errorCode").alias("errorCode"),
        F.col("channel"),
        field("bytes").alias("bytes"),
        field("crc32").alias("crc32"),
    )


def by_broker(error_code: Column, partition_key: Column | None = None) -> Column:
    """Whether an errors-archive record is the broker's verdict on an input record (the rule,
    in one place): not a consumer's move - consumers put theirs on invalid and error themselves,
    keyed ``moved:<group>`` (:data:`schema.MOVED_PREFIX`) - and a code the broker's classifier
    gives (:data:`schema.BROKER_CODES`; GENERR005, GENERR009 and application codes are only ever
    consumers'). ``partition_key``: the record's, where the archive keeps it."""
    broker = error_code.isin(*schema.BROKER_CODES)
    if partition_key is None:
        return broker
    return broker & ~F.coalesce(partition_key.startswith(schema.MOVED_PREFIX), F.lit(False))


def _payload_key(size: Column, crc: Column) -> Column:
    """One long per (length, CRC-32): the cheap test that a line may be a rejected payload."""
    return size * F.lit(1 << 32) + crc


def parse(lines: DataFrame, rejected: Rejections | None = None) -> DataFrame:
    """Each record's header fields, read by :data:`HEADER_FUNCTION` (an explicit schema, no inference).

    ``lines`` has :data:`LINE_COLUMNS`: each archive line is read as the record it holds
    (:func:`runtime.entries`), whose identity the result keeps. The result has the curated columns but archivedAt and
    dt, the messageType partition value, the UTC day of publication, ``source`` and
    ``lineNumber``; for a line with no messageId (a reject) the raw line and whether it is
    JSON at all; ``digest``, the SHA-256 of a line that may be one of the ``rejected``
    payloads (its length and CRC-32 are one's), which keeps its raw line too; and ``damage``,
    set only on the line that ends a damaged object (:func:`runtime.damage`: no record, see
    :func:`intact`). A field of the wrong type becomes null, never an error.
    """
    header = F.call_udf(HEADER_FUNCTION, F.col("line").cast("binary"))
    records = runtime.entries(lines.select(*LINE_COLUMNS))
    parsed = records.select("line", "source", "lineNumber", *runtime.IDENTITY, header.alias("header"))
    candidate: Column = F.lit(False)
    if rejected is not None:
        # Hashing every line would cost more than parsing it: only lines of a rejected
        # payload's length and CRC-32 are hashed (or of a Claim Check's length, the only thing
        # known of it besides its digest).
        size = F.octet_length(F.col("line"))
        known = rejected.records.where(F.col("crc32").isNotNull())
        keys = known.select(_payload_key(F.col("bytes"), F.col("crc32")).alias("_key")).distinct()
        line_key = _payload_key(size, F.crc32(F.col("line").cast("binary")))
        parsed = parsed.withColumn("_key", line_key).join(
            F.broadcast(keys.withColumn("_candidate", F.lit(True))), "_key", "left"
        )
        candidate = F.coalesce(F.col("_candidate"), F.lit(False))
        if rejected.claim_check_sizes:
            candidate = candidate | size.isin(*rejected.claim_check_sizes)
    digest = F.when(candidate, F.sha2(F.col("line").cast("binary"), 256))
    field = F.col("header").getField
    message_id = field("messageId")
    no_message_id = message_id.isNull() | (message_id == "")
    return parsed.select(
        F.when(~no_message_id, message_id).alias("messageId"),
        field("messageClass").alias("messageClass"),
        field("correlationId").alias("correlationId"),
        field("sequence").alias("sequence"),
        field("position").alias("position"),
        field("total").alias("total"),
        F.timestamp_micros(field("publishedTimestamp")).alias("publishedTimestamp"),
        F.timestamp_micros(field("expirationTimestamp")).alias("expirationTimestamp"),
        field("generator").alias("generator"),
        field("version").alias("version"),
        field("errorCode").alias("errorCode"),
        field("bodyBytes").alias("bodyBytes"),
        normalised_type(field("messageType")).alias("messageType"),
        field("publishedDay").alias("publishedDay"),
        F.col("source"),
        F.col("lineNumber"),
        F.when(no_message_id | candidate, F.col("line")).alias("rejectedLine"),
        F.when(no_message_id, field("json")).alias("rejectedJson"),
        digest.alias("digest"),
        runtime.damage(F.col("line")).alias("damage"),
        *runtime.IDENTITY,
    )


def locate(parsed: DataFrame, archive_objects: DataFrame) -> DataFrame:
    """Parsed lines with when their object was archived, dt, and ``orderKey``: one number
    per record that orders records as first seen (archivedAt, object key, line).

    Joined after parsing, when the rows no longer carry the line, so the join moves little.
    dt is the UTC day of publication, else of archiving, else (no date anywhere) today.
    """
    # joined on a 64-bit hash of the key: a long key looks up far faster than a string one
    keyed = archive_objects.select(F.xxhash64("source").alias("_object"), "archivedAt", "archivedDay", "objectRank")
    located = parsed.withColumn("_object", F.xxhash64("source")).join(F.broadcast(keyed), "_object")
    line = F.col("lineNumber").bitwiseAND(F.lit((1 << _LINE_BITS) - 1))
    order_key = F.col("objectRank").cast("long") * F.lit(1 << _LINE_BITS) + line
    today = F.date_format(F.current_date(), "yyyy-MM-dd")
    internal = ("source", "lineNumber", "messageType", "publishedDay")
    return located.select(
        *(F.col(name) for name in parsed.columns if name not in internal),
        F.coalesce(F.col("publishedDay"), F.col("archivedDay"), today).alias("dt"),
        F.col("messageType"),
        F.col("archivedAt"),
        order_key.alias("orderKey"),
        F.when(F.col("rejectedLine").isNotNull(), F.col("source")).alias("rejectedFrom"),
    )


def intact(located: DataFrame) -> DataFrame:
    """:func:`locate`'s records without the lines that end damaged objects (which hold no record)."""
    return located.where(F.col("damage").isNull()).drop("damage")


def damaged(located: DataFrame) -> list[runtime.Damaged]:
    """The damaged objects among :func:`locate`'s (read up to the damage; :func:`runtime.damage`)."""
    return runtime.damaged(located.select(F.col("rejectedFrom").alias("source"), F.col("rejectedLine").alias("line")))


def archived_again(records: DataFrame) -> DataFrame:
    """The ``orderKey`` of every entry whose identity an earlier entry (in archive order) had:
    copies of a record already read, to be left out (:func:`once`).

    Repeats are few: an aggregate on a 64-bit hash of the identity finds the identities that
    may repeat, and only their entries are compared whole, so that no string crosses a shuffle
    for the rest and a hash collision costs a comparison, never a record.
    """
    identified = records.where(F.col("sequenceNumber").isNotNull()).select(
        *runtime.IDENTITY, "orderKey", F.xxhash64(*runtime.IDENTITY).alias("_identity")
    )
    shared = identified.groupBy("_identity").count().where(F.col("count") > 1).select("_identity")
    suspects = identified.join(F.broadcast(shared), "_identity", "left_semi")
    first_seen = Window.partitionBy(*runtime.IDENTITY).orderBy("orderKey")
    return suspects.withColumn("_copy", F.row_number().over(first_seen)).where(F.col("_copy") > 1).select("orderKey")


def once(records: DataFrame, again: DataFrame) -> DataFrame:
    """``records`` without the copies :func:`archived_again` names, and without the identity
    columns (nothing after this needs them)."""
    kept = records.join(F.broadcast(again), "orderKey", "left_anti")
    return kept.drop(*runtime.IDENTITY)


def matched(records: DataFrame, rejected: DataFrame) -> DataFrame:
    """Which records the broker rejected: ``orderKey, rejectedCode`` (from :func:`locate`'s
    records and :func:`rejections`' rows).

    A multiset match on the payload's SHA-256: a digest the errors archive holds k times marks
    k records with it, and no more. Among byte-identical records, the latest k in archive order:
    the broker's verdict on the same bytes changes only with time (an expiry passes), so if
    copies were treated differently, the later ones were refused.
    """
    lines = records.where(F.col("digest").isNotNull()).select("digest", "orderKey")
    latest_first = Window.partitionBy("digest").orderBy(F.col("orderKey").desc())
    ranked = lines.withColumn("copy", F.row_number().over(latest_first))
    numbered = rejected.withColumn("copy", F.row_number().over(Window.partitionBy("digest").orderBy("errorCode")))
    return ranked.join(numbered, ["digest", "copy"]).select("orderKey", F.col("errorCode").alias("rejectedCode"))


def judged(records: DataFrame, matches: DataFrame | None) -> DataFrame:
    """``records`` with ``rejectedCode``: the broker's errorCode for those :func:`matched` found
    rejected, else null (and null for all when there is no errors archive to go by)."""
    if matches is None:
        return records.withColumn("rejectedCode", F.lit(None).cast("string"))
    return records.join(F.broadcast(matches), "orderKey", "left")


def accepted(records: DataFrame) -> DataFrame:
    """The records the broker accepted: a messageId, and no rejection of theirs in the errors archive."""
    return records.where(F.col("messageId").isNotNull() & F.col("rejectedCode").isNull())


def repeated(records: DataFrame) -> DataFrame:
    """The messageIds that more than one record carries: ``messageId, firstKey, copies``.

    An aggregate on (messageId, orderKey) alone: duplicates are few, so finding them never
    moves whole records, and what it finds is small enough to broadcast.
    """
    counted = records.where(F.col("messageId").isNotNull()).groupBy("messageId")
    found = counted.agg(F.min("orderKey").alias("firstKey"), F.count(F.lit(1)).alias("copies"))
    return found.where(F.col("copies") > 1)


def winners(records: DataFrame, repeats: DataFrame) -> DataFrame:
    """The first-seen record of every messageId, with ``copies`` (how many records carry it)."""
    candidates = records.where(F.col("messageId").isNotNull()).join(repeats, "messageId", "left")
    first = F.col("firstKey").isNull() | (F.col("orderKey") == F.col("firstKey"))
    return candidates.where(first).withColumn("copies", F.coalesce(F.col("copies"), F.lit(1)))


def curated(rows: DataFrame) -> DataFrame:
    """The curated columns then the partition columns, in schema.py's order."""
    columns = [name for name, _ in schema.CURATED_COLUMNS] + [name for name, _ in schema.CURATED_PARTITIONS]
    return rows.select(*columns)


def duplicates(repeats: DataFrame) -> DataFrame:
    """Per messageId archived more than once, how many of its records were not kept."""
    return repeats.select("messageId", (F.col("copies") - 1).cast("bigint").alias("discarded"))


def rejects(records: DataFrame) -> DataFrame:
    """Every line without a messageId and every record the broker rejected, raw, with the reason
    and the broker's errorCode (:data:`schema.REJECT_COLUMNS`); ``records`` as :func:`judged` gives them.

    A line that is not valid UTF-8 is kept base64-encoded (reason ``not UTF-8``) so the table
    holds only valid strings and the bytes can still be recovered exactly.
    """
    missing = F.col("messageId").isNull()
    refused = records.where(missing | F.col("rejectedCode").isNotNull())
    text = F.col("rejectedLine")
    raw = text.cast("binary")
    valid_utf8 = F.encode(F.decode(raw, "UTF-8"), "UTF-8") == raw
    reason = (
        F.when(~valid_utf8, F.lit(schema.REJECT_NOT_UTF8))
        .when(missing & ~F.col("rejectedJson"), F.lit(schema.REJECT_NOT_JSON))
        .when(missing, F.lit(schema.REJECT_NO_MESSAGE_ID))
        .otherwise(F.lit(schema.REJECT_BY_BROKER))
    )
    line = F.when(valid_utf8, text).otherwise(F.base64(raw))
    return refused.select(
        line.alias("line"),
        reason.alias("reason"),
        F.col("rejectedFrom").alias("source"),
        F.col("archivedAt"),
        F.col("rejectedCode").alias("errorCode"),
    )


def compact(records: DataFrame, matches: DataFrame | None = None, *, repeats: DataFrame | None = None) -> Outputs:
    """The three tables from :func:`locate`'s records and :func:`matched`'s verdicts.

    ``repeats``: :func:`repeated` of the accepted records, when the caller has it already.
    """
    records = judged(records, matches)
    valid = accepted(records)
    if repeats is None:
        repeats = repeated(valid)
    return Outputs(curated(winners(valid, repeats)), rejects(records), duplicates(repeats))


def transform(lines: DataFrame, archive_objects: DataFrame, rejected: Rejections | None = None) -> Outputs:
    """The whole compaction as one function of DataFrames (what :func:`run` does, without
    keeping intermediate results or writing): lines with :data:`LINE_COLUMNS`, the objects
    they are in (:func:`objects`) and the broker's rejections, if known."""
    located = intact(locate(parse(lines, rejected), archive_objects))
    records = once(located, archived_again(located))
    matches = None if rejected is None else matched(records, rejected.records)
    return compact(records, matches)


def split_seen(rows: DataFrame, existing: DataFrame) -> tuple[DataFrame, DataFrame]:
    """Winners whose messageId no earlier run curated, and those an earlier run did.

    Only the dt partitions the new rows fall in are compared: a re-sent message keeps its
    publishedTimestamp, so its copies share a dt.
    """
    seen = existing.select("messageId", "dt").join(rows.select("dt").distinct(), "dt", "left_semi")
    return rows.join(seen, ["messageId", "dt"], "left_anti"), rows.join(seen, ["messageId", "dt"], "left_semi")


# -- I/O --------------------------------------------------------------------------------------------


def read_archive(spark: SparkSession, path: str) -> tuple[DataFrame, DataFrame]:
    """Every line of every object under ``path`` (recursively), numbered, and the objects."""
    lines, sources = runtime.Context(spark, {}).archive_lines(path)
    return with_line_numbers(lines), objects(spark, sources)


def read_rejections(context: runtime.Context, path: str) -> Rejections:
    """The broker's rejections in the errors archive under ``path`` (read whole, no bookmark),
    kept for the run (they are read twice: to pick candidate lines, and to match them)."""
    register(context.spark)
    lines, _ = context.archive_lines(path)
    rows = rejections(runtime.intact(lines)).persist(StorageLevel.MEMORY_AND_DISK)
    claim_checks = rows.where(F.col("crc32").isNull()).select("bytes").distinct().collect()
    # another pass over the errors archive (a small share of the traffic) for the damaged objects
    return Rejections(rows, tuple(sorted(int(row["bytes"]) for row in claim_checks)), tuple(runtime.damaged(lines)))


def with_line_numbers(lines: DataFrame) -> DataFrame:
    """``line, source`` -> :data:`LINE_COLUMNS`; must come straight after the scan.

    Gzip is not splittable, so one task reads each object from start to end, and the id Spark
    gives rows inside a task increases down the object: it orders the lines of an object.
    """
    return lines.select("line", "source", F.monotonically_increasing_id().alias("lineNumber"))


def run(
    spark: SparkSession,
    lines: DataFrame,
    archive_objects: DataFrame,
    output: str,
    *,
    incremental: bool = False,
    rejected: Rejections | None = None,
) -> dict[str, int]:
    """The whole job: parse once, write messages, rejects and duplicates; the counts of this run.

    ``incremental`` (Glue, with bookmarks): append, leaving out messageIds earlier runs curated.
    ``rejected``: the broker's rejections (:func:`read_rejections`); with them the counts also
    say how many lines were matched to one (``brokerRejections``) and how many rejections no
    line of this run was (``unmatchedRejections``: on Glue, also those of earlier runs' lines).
    An object of either archive damaged part way (truncated, or bytes after its last gzip
    member that are not gzip) is read up to the damage, said in one line on standard error, and
    counted in ``damagedObjects`` (present when there is one); the run goes on.
    """
    runtime.apply_settings(spark, JOB)
    register(spark)
    base = output.rstrip("/")
    mode = "append" if incremental else "overwrite"
    checkpointed = kept_once(spark, locate(parse(lines, rejected), archive_objects))
    located = intact(checkpointed)
    extra: dict[str, int] = {}
    try:
        again = archived_again(located).persist(StorageLevel.MEMORY_AND_DISK)
        extra["archivedAgain"] = again.count()  # materialised (with the records): small, broadcast
        broken = [*damaged(checkpointed), *(rejected.damaged if rejected is not None else ())]
        runtime.report_damaged(JOB.name, broken)
        if broken:
            extra["damagedObjects"] = len(broken)
        records = once(located, again)
        matches = None
        if rejected is not None:
            matches = matched(records, rejected.records).persist(StorageLevel.MEMORY_AND_DISK)
            extra["brokerRejections"] = matches.count()
            extra["unmatchedRejections"] = rejected.records.count() - extra["brokerRejections"]
        valid = accepted(judged(records, matches))
        repeats = repeated(valid).persist(StorageLevel.MEMORY_AND_DISK)
        repeats.count()  # materialised, so the planner knows how small it is and broadcasts it
        outputs = compact(records, matches, repeats=repeats)
        kept, dups = outputs.messages, outputs.duplicates
        existing = _curated_so_far(spark, base) if incremental else None
        if existing is not None:
            kept, earlier = split_seen(winners(valid, repeats), existing)
            kept = curated(kept)
            earlier = earlier.select("messageId", F.col("copies").cast("bigint").alias("discarded"))
            dups = dups.join(earlier, "messageId", "left_anti").unionByName(earlier)
        partitions = [name for name, _ in schema.CURATED_PARTITIONS]
        # counted while written (Observation), not by more passes over the data
        written, refused, dropped = Observation("messages"), Observation("rejects"), Observation("duplicates")
        rows = kept.observe(written, F.count(F.lit(1)).alias("n"))
        # One writer per core, each sorting its rows by dt and messageType (Spark's planned
        # write) and writing one file at a time: on two cores that beat keeping a Parquet
        # file open per folder (a dozen or more per task) by about a second at 1M records.
        writer = rows.coalesce(spark.sparkContext.defaultParallelism).write.mode(mode).partitionBy(*partitions)
        for column in UNIQUE_COLUMNS:  # a dictionary of values that never repeat is wasted work
            writer = writer.option(f"parquet.enable.dictionary#{column}", "false")
        rejected_rows = outputs.rejects.observe(refused, F.count(F.lit(1)).alias("n"))
        dups = dups.observe(dropped, F.coalesce(F.sum("discarded"), F.lit(0)).alias("n"))
        # The three writes are independent: run together, one job is planned, and its files
        # committed, while another's tasks use the cores.
        concurrently(
            lambda: writer.parquet(f"{base}/messages"),
            lambda: rejected_rows.coalesce(1).write.mode(mode).parquet(f"{base}/rejects"),
            lambda: dups.coalesce(1).write.mode(mode).parquet(f"{base}/duplicates"),
        )
    finally:
        release(checkpointed)
        spark.catalog.clearCache()
    counts = {
        name: int(seen.get["n"])
        for name, seen in (("messages", written), ("rejects", refused), ("duplicates", dropped))
    }
    return {"lines": sum(counts.values()), **counts, **extra}


def concurrently(*jobs: Callable[[], None]) -> None:
    """Run Spark actions from threads of this driver at once; wait for all, raise the first error."""
    with ThreadPoolExecutor(max_workers=len(jobs), thread_name_prefix="rdss-write") as pool:
        for done in [pool.submit(job) for job in jobs]:
            done.result()


def kept_once(spark: SparkSession, records: DataFrame) -> DataFrame:
    """``records`` computed once, by the first job that needs them, and read back by the rest.

    On a cluster, cached (a lost executor's part is recomputed from the archive). In local
    mode, checkpointed instead: the rows are kept as the first job made them, where a cache
    would rebuild them into compressed columns with statistics and a read would turn them
    back into rows, about a tenth of the job's time on two cores. Nothing is lost to lose.
    """
    if (spark.sparkContext.master or "").startswith("local"):
        return records.localCheckpoint(eager=False)
    return records.persist(StorageLevel.MEMORY_AND_DISK)


def release(records: DataFrame) -> None:
    """Free what :func:`kept_once` kept (a long-lived session runs many jobs)."""
    plan: Any = records._jdf.queryExecution().logical()
    if plan.getClass().getSimpleName() == "LogicalRDD":
        plan.rdd().unpersist(False)
    else:
        records.unpersist()


def _curated_so_far(spark: SparkSession, base: str) -> DataFrame | None:
    try:
        return spark.read.parquet(f"{base}/messages").select("messageId", "dt")
    except Exception as error:  # the first run: nothing curated yet
        if "PATH_NOT_FOUND" in str(error) or "Path does not exist" in str(error):
            return None
        raise


def execute(context: runtime.Context) -> Mapping[str, int]:
    """The job where it runs: the archives in (the audit archive bookmarked on Glue), the tables out."""
    spark = context.spark
    register(spark)
    lines, sources = context.archive_lines(context.argument("input"), bookmark="audit_archive")
    errors = context.arguments["errors"]
    rejected = read_rejections(context, errors) if errors else None
    return run(
        spark,
        with_line_numbers(lines),
        objects(spark, sources),
        context.argument("output"),
        incremental=context.on_glue,
        rejected=rejected,
    )


JOB = runtime.Job(
    name="audit-compaction",
    description="Compact the raw audit archive into curated Parquet.",
    arguments=(
        runtime.Argument("input", "the audit archive (a directory or s3:// prefix, read recursively)"),
        runtime.Argument("output", "where messages/, rejects/ and duplicates/ go", use=runtime.OUTPUT),
        runtime.Argument(
            "errors",
            "the errors archive (invalid/ and error/ under it): records the broker moved there are "
            "rejections, not duplicates",
            required=False,
        ),
    ),
    run=execute,
    local_settings=LOCAL_SETTINGS,
    jars=(JAR,),
    class_archive=CDS_ARCHIVE,
)


def local_session(app: str | None = None, *, record_classes: Path | None = None) -> SparkSession:
    """A local SparkSession for this job (:func:`runtime.local_session`): the jar on its
    classpath, the class-data-sharing archive mapped when there is one, or recorded to
    ``record_classes``."""
    return runtime.local_session(JOB, app=app, record_classes=record_classes)


def main(argv: Sequence[str] | None = None, *, spark: SparkSession | None = None) -> int:
    """The entry point, local or on AWS Glue (:func:`runtime.main`); prints the counts as JSON."""
    return runtime.main(JOB, argv, spark=spark)


if __name__ == "__main__":
    sys.exit(main())
