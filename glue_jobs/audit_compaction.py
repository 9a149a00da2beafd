"""Audit compaction: the raw audit archive as Firehose writes it becomes curated Parquet.

Input: gzip objects of newline-delimited records under Hive-style hour prefixes
(``audit/year=/month=/day=/hour=/<stream>-<version>-<yyyy-MM-dd-HH-mm-ss>-<uuid>.gz``), read
recursively. Every line is the exact bytes a producer published, so it may be anything.

Output, under ``--output``:

* ``messages/dt=<yyyy-MM-dd>/messageType=<type>/``: one row per unique messageId
  (:data:`schema.CURATED_COLUMNS`). The first-seen record wins: earliest archivedAt, then
  object key, then line within the object, so a re-run over the same archive gives the same rows.
* ``rejects/``: every line that is not JSON or carries no messageId, with the raw line and the
  reason (:data:`schema.REJECT_COLUMNS`); nothing is dropped.
* ``duplicates/``: per messageId seen more than once, how many records were discarded
  (:data:`schema.DUPLICATE_COLUMNS`), so the report can give a duplicate rate.

Locally: ``python glue_jobs/audit_compaction.py --input PATH --output PATH`` on ``local[*]``.
On AWS Glue (``--input s3://... --output s3://...``, ``--JOB_NAME``) the same file reads the
archive through a bookmarked source, so each run takes only objects it has not seen, and drops
records whose messageId an earlier run already curated.

Only pyspark, the standard library and ``schema.py`` are imported: Glue runs this file
without the ``rdss`` package.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.storagelevel import StorageLevel

try:
    from glue_jobs import schema
except ModuleNotFoundError:  # on Glue (--extra-py-files) and when run as glue_jobs/<job>.py
    import schema  # type: ignore[no-redef,import-not-found]

#: The lines the transforms take: the raw line, the object it is in, and a number that
#: increases down each object (:func:`with_line_numbers`).
LINE_COLUMNS = ("line", "source", "lineNumber")
#: The objects the lines come from: when each was archived, and its place in archive order.
OBJECT_COLUMNS = ("source", "archivedAt", "archivedDay", "objectRank")

#: Where the job's Java half is built (``make setup``): the line parser Spark calls. On Glue
#: the same jar is passed with ``--extra-jars``.
LIB = Path(__file__).resolve().parent / "lib"
JAR = LIB / "rdss-glue.jar"
#: A class-data-sharing archive of the classes a run loads (``make setup`` records it): the
#: JVM maps them instead of loading and verifying them one by one. Used when present.
CDS_ARCHIVE = LIB / "spark-classes.jsa"
#: The SQL function that parses a line (glue_jobs/java/rdss/glue/AuditHeader.java).
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

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# separators of the object list handed to Spark: no object key holds either
_ROW, _CELL = "\u0000", "\u0001"
#: Curated columns whose values are (nearly) all distinct: Parquet dictionary encoding skipped.
UNIQUE_COLUMNS = ("messageId", "correlationId", "sequence", "publishedTimestamp", "expirationTimestamp", "archivedAt")
# monotonically_increasing_id keeps a row's place within its task in the low 33 bits
_LINE_BITS = 33

#: Spark settings every run needs, local or on Glue: UTC everywhere (dt is a UTC date), no
#: ANSI errors on odd input, and timestamps written as Parquet INT64 microseconds without
#: calendar rebasing, so that a producer's year-1 timestamp is stored as sent.
SESSION_SETTINGS = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.ansi.enabled": "false",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.sql.parquet.datetimeRebaseModeInWrite": "CORRECTED",
    "spark.sql.parquet.int96RebaseModeInWrite": "CORRECTED",
}
#: Start-up settings for a local run on a small machine (measured on 2 cores: see README).
LOCAL_SETTINGS = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.memory": "4g",
    "spark.sql.shuffle.partitions": "4",
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
    """Make :data:`HEADER_FUNCTION` callable in ``spark``: the jar must be on its classpath."""
    try:
        spark.udf.registerJavaFunction(HEADER_FUNCTION, HEADER_CLASS, HEADER_FIELDS)
    except Exception as error:
        if HEADER_CLASS not in str(error) and "ClassNotFound" not in str(error):
            raise
        raise RuntimeError(
            f"{HEADER_CLASS} is not on Spark's classpath: build {JAR} (make setup) and start Spark with it "
            "(local_session does), or on AWS Glue pass it with --extra-jars"
        ) from error


def parse(lines: DataFrame) -> DataFrame:
    """Each line's header fields, read by :data:`HEADER_FUNCTION` (an explicit schema, no inference).

    ``lines`` has :data:`LINE_COLUMNS`. The result has the curated columns but archivedAt and
    dt, the messageType partition value, the UTC day of publication, ``source`` and
    ``lineNumber``, and for a line with no messageId (a reject) the raw line and whether it is
    JSON at all. A field of the wrong type becomes null, never an error.
    """
    header = F.call_udf(HEADER_FUNCTION, F.col("line").cast("binary"))
    parsed = lines.select("line", "source", "lineNumber", header.alias("header"))
    field = F.col("header").getField
    message_id = field("messageId")
    rejected = message_id.isNull() | (message_id == "")
    return parsed.select(
        F.when(~rejected, message_id).alias("messageId"),
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
        F.when(rejected, F.col("line")).alias("rejectedLine"),
        F.when(rejected, field("json")).alias("rejectedJson"),
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
        F.when(F.col("messageId").isNull(), F.col("source")).alias("rejectedFrom"),
    )


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
    """Every line without a messageId, raw, with the reason (:data:`schema.REJECT_COLUMNS`).

    A line that is not valid UTF-8 is kept base64-encoded (reason ``not UTF-8``) so the table
    holds only valid strings and the bytes can still be recovered exactly.
    """
    missing = records.where(F.col("messageId").isNull())
    text = F.col("rejectedLine")
    raw = text.cast("binary")
    valid_utf8 = F.encode(F.decode(raw, "UTF-8"), "UTF-8") == raw
    reason = (
        F.when(~valid_utf8, F.lit(schema.REJECT_NOT_UTF8))
        .when(~F.col("rejectedJson"), F.lit(schema.REJECT_NOT_JSON))
        .otherwise(F.lit(schema.REJECT_NO_MESSAGE_ID))
    )
    line = F.when(valid_utf8, text).otherwise(F.base64(raw))
    return missing.select(
        line.alias("line"), reason.alias("reason"), F.col("rejectedFrom").alias("source"), F.col("archivedAt")
    )


def split_seen(rows: DataFrame, existing: DataFrame) -> tuple[DataFrame, DataFrame]:
    """Winners whose messageId no earlier run curated, and those an earlier run did.

    Only the dt partitions the new rows fall in are compared: a re-sent message keeps its
    publishedTimestamp, so its copies share a dt.
    """
    seen = existing.select("messageId", "dt").join(rows.select("dt").distinct(), "dt", "left_semi")
    return rows.join(seen, ["messageId", "dt"], "left_anti"), rows.join(seen, ["messageId", "dt"], "left_semi")


# -- I/O --------------------------------------------------------------------------------------------


def read_archive(spark: SparkSession, path: str) -> tuple[DataFrame, DataFrame]:
    """Every line of every object under ``path`` (recursively), and the objects.

    Lines split on ``\\n`` only, as Firehose's delimiter is; a ``\\r`` stays part of a line.
    """
    raw = spark.read.option("lineSep", "\n").option("recursiveFileLookup", "true").text(path)
    lines = with_line_numbers(raw.select(F.col("value").alias("line"), F.input_file_name().alias("source")))
    return lines, objects(spark, raw.inputFiles())


def with_line_numbers(lines: DataFrame) -> DataFrame:
    """``line, source`` -> :data:`LINE_COLUMNS`; must come straight after the scan.

    Gzip is not splittable, so one task reads each object from start to end, and the id Spark
    gives rows inside a task increases down the object: it orders the lines of an object.
    """
    return lines.select("line", "source", F.monotonically_increasing_id().alias("lineNumber"))


def run(
    spark: SparkSession, lines: DataFrame, archive_objects: DataFrame, output: str, *, incremental: bool = False
) -> dict[str, int]:
    """The whole job: parse once, write messages, rejects and duplicates; the counts of this run.

    ``incremental`` (Glue, with bookmarks): append, leaving out messageIds earlier runs curated.
    """
    for key, value in SESSION_SETTINGS.items():
        spark.conf.set(key, value)
    register(spark)
    base = output.rstrip("/")
    mode = "append" if incremental else "overwrite"
    records = kept_once(spark, locate(parse(lines), archive_objects))
    try:
        repeats = repeated(records).persist(StorageLevel.MEMORY_AND_DISK)
        repeats.count()  # materialised, so the planner knows how small it is and broadcasts it
        kept = winners(records, repeats)
        dups = duplicates(repeats)
        existing = _curated_so_far(spark, base) if incremental else None
        if existing is not None:
            kept, earlier = split_seen(kept, existing)
            earlier = earlier.select("messageId", F.col("copies").cast("bigint").alias("discarded"))
            dups = dups.join(earlier, "messageId", "left_anti").unionByName(earlier)
        partitions = [name for name, _ in schema.CURATED_PARTITIONS]
        # counted while written (Observation), not by more passes over the data
        written, refused, dropped = Observation("messages"), Observation("rejects"), Observation("duplicates")
        rows = curated(kept).observe(written, F.count(F.lit(1)).alias("n"))
        # One writer per core, each sorting its rows by dt and messageType (Spark's planned
        # write) and writing one file at a time: on two cores that beat keeping a Parquet
        # file open per folder (a dozen or more per task) by about a second at 1M records.
        writer = rows.coalesce(spark.sparkContext.defaultParallelism).write.mode(mode).partitionBy(*partitions)
        for column in UNIQUE_COLUMNS:  # a dictionary of values that never repeat is wasted work
            writer = writer.option(f"parquet.enable.dictionary#{column}", "false")
        rejected = rejects(records).observe(refused, F.count(F.lit(1)).alias("n"))
        dups = dups.observe(dropped, F.coalesce(F.sum("discarded"), F.lit(0)).alias("n"))
        # The three writes are independent: run together, one job is planned, and its files
        # committed, while another's tasks use the cores.
        concurrently(
            lambda: writer.parquet(f"{base}/messages"),
            lambda: rejected.coalesce(1).write.mode(mode).parquet(f"{base}/rejects"),
            lambda: dups.coalesce(1).write.mode(mode).parquet(f"{base}/duplicates"),
        )
    finally:
        release(records)
        spark.catalog.clearCache()
    counts = {
        name: int(seen.get["n"])
        for name, seen in (("messages", written), ("rejects", refused), ("duplicates", dropped))
    }
    return {"lines": sum(counts.values()), **counts}


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
    plan = records._jdf.queryExecution().logical()
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


def local_session(app: str = "rdss-audit-compaction", *, record_classes: Path | None = None) -> SparkSession:
    """A SparkSession on ``local[*]`` tuned for a small machine, with :data:`JAR` on its classpath
    and :data:`CDS_ARCHIVE` when there is one.

    ``record_classes``: instead, have the JVM write the classes it loaded there as it exits
    (``python -m rdss.sparkcds`` records :data:`CDS_ARCHIVE` so).
    """
    if not JAR.is_file():
        raise FileNotFoundError(f"{JAR} is missing: build it with `make setup` (javac, from glue_jobs/java/)")
    settings = {**LOCAL_SETTINGS, **SESSION_SETTINGS, "spark.driver.extraClassPath": str(JAR)}
    options = settings["spark.driver.extraJavaOptions"]
    quiet = " -Xlog:cds=off -Xlog:cds+dynamic=off"  # classes it cannot archive are no news
    if record_classes is not None:
        options += f" -XX:ArchiveClassesAtExit={record_classes}{quiet}"
    elif CDS_ARCHIVE.is_file():
        # -Xshare:auto: an archive that no longer matches the JVM or the classpath is ignored
        options += f" -XX:SharedArchiveFile={CDS_ARCHIVE} -Xshare:auto{quiet}"
    settings["spark.driver.extraJavaOptions"] = options
    builder = SparkSession.builder.master("local[*]").appName(app)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def main(argv: Sequence[str] | None = None, *, spark: SparkSession | None = None) -> int:
    """Local entry point: ``--input PATH --output PATH``; prints the counts as JSON."""
    parser = argparse.ArgumentParser(description="Compact the raw audit archive into curated Parquet.")
    parser.add_argument("--input", required=True, help="the audit archive (a directory, read recursively)")
    parser.add_argument("--output", required=True, help="where messages/, rejects/ and duplicates/ go")
    args = parser.parse_args(argv)
    session = spark or local_session()
    try:
        lines, archive_objects = read_archive(session, args.input)
        counts = run(session, lines, archive_objects, args.output)
    finally:
        if spark is None:
            session.stop()
    print(json.dumps(counts, sort_keys=True))
    return 0


def glue_main() -> None:
    """AWS Glue entry point: bookmarked read of new objects, incremental append."""
    from awsglue.context import GlueContext
    from awsglue.job import Job
    from awsglue.utils import getResolvedOptions
    from pyspark.context import SparkContext

    args = getResolvedOptions(sys.argv, ["JOB_NAME", "input", "output"])
    glue = GlueContext(SparkContext.getOrCreate())
    spark = glue.spark_session
    job = Job(glue)
    job.init(args["JOB_NAME"], args)
    # A bookmarked source hands over only objects earlier runs have not processed. As CSV with
    # quoting off and a separator no valid JSON text contains raw (U+0001), each line arrives
    # whole in one column; a malformed line holding that byte arrives split and is rejoined.
    frame = glue.create_dynamic_frame.from_options(
        connection_type="s3",
        connection_options={"paths": [args["input"]], "recurse": True, "groupFiles": "none"},
        format="csv",
        format_options={"separator": "\u0001", "quoteChar": -1, "withHeader": False},
        transformation_ctx="audit_archive",
    )
    columns = frame.toDF()
    fields = [F.col(f"`{name}`") for name in columns.columns]
    line = F.array_join(F.array(*fields), "\u0001") if len(fields) > 1 else fields[0]
    lines = with_line_numbers(columns.select(line.alias("line"), F.input_file_name().alias("source")))
    # the objects this run got: listing them costs one more pass over the run's (new) lines
    sources = [row.source for row in lines.select("source").distinct().collect()]
    counts = run(spark, lines, objects(spark, sources), args["output"], incremental=True)
    print(json.dumps(counts, sort_keys=True))
    job.commit()


def _on_glue() -> bool:
    try:
        import awsglue  # noqa: F401
    except ImportError:
        return False
    return "--JOB_NAME" in sys.argv


if __name__ == "__main__":
    if _on_glue():
        glue_main()
    else:
        sys.exit(main())
