"""What every Glue job shares: its arguments, its Spark session and its entry point, locally and on AWS Glue.

A job script declares a :class:`Job` (its arguments and a function of a :class:`Context`) and
ends with ``sys.exit(runtime.main(JOB))``. :func:`main` tells where it runs:

* on AWS Glue (``--JOB_NAME`` given and ``awsglue`` importable) it reads the arguments with
  getResolvedOptions, starts the Glue context and the job (so bookmarks apply), runs the job
  and commits it;
* anywhere else it parses the same arguments with argparse and starts a local session tuned for
  a small machine (:func:`local_session`).

Either way the job's function gets the session and the arguments, does its work (reading and
writing at the edges, pure transforms in between) and returns what it did, which :func:`main`
prints as one line of JSON.

Only pyspark and the standard library are imported: AWS Glue ships this file with the scripts
(``--extra-py-files``, see ``stacks/jobs.py``) and runs them without the ``rdss`` package.
"""

from __future__ import annotations

import argparse
import json
import re
import secrets
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

#: Spark settings every job needs, local or on Glue: UTC everywhere (days are UTC dates), no
#: ANSI errors on odd input, timestamps written as Parquet INT64 microseconds without calendar
#: rebasing (a producer's year-1 timestamp is stored as sent), and partition directories read
#: back as the strings the tables declare.
SESSION_SETTINGS: Mapping[str, str] = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.ansi.enabled": "false",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.sql.parquet.datetimeRebaseModeInWrite": "CORRECTED",
    "spark.sql.parquet.int96RebaseModeInWrite": "CORRECTED",
    "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
}
#: Start-up settings for a local run on a small machine; a job adds its own (:attr:`Job.local_settings`).
LOCAL_SETTINGS: Mapping[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.memory": "4g",
    "spark.sql.shuffle.partitions": "4",
}


#: The jobs' Java half (glue_jobs/java/, built by ``make setup``): the parsers Spark calls. On
#: Glue the same jar is passed with ``--extra-jars``.
JAR = Path(__file__).resolve().parent / "lib" / "rdss-glue.jar"

#: The SQL function that reads one archive line as the record it holds
#: (glue_jobs/java/rdss/glue/ArchiveEntry.java; rdss/archive/entries.py defines the format).
ENTRY_FUNCTION = "rdss_archive_entry"
ENTRY_CLASS = "rdss.glue.ArchiveEntry"
#: What it returns: the entry's identity and details, null for a legacy line (an archive written
#: before entries, one raw record per line), and the record's exact bytes.
ENTRY_FIELDS = T.StructType(
    [
        T.StructField("stream", T.StringType()),
        T.StructField("shard", T.StringType()),
        T.StructField("sequenceNumber", T.StringType()),
        T.StructField("partitionKey", T.StringType()),
        T.StructField("arrival", T.StringType()),
        T.StructField("payload", T.BinaryType()),
    ]
)
#: The columns that name a record: every reader counts one identity once (Firehose, and an
#: archiver restarted mid-stream, archive some records twice).
IDENTITY = ("stream", "shard", "sequenceNumber")

#: The Hadoop codec archive objects are read with (glue_jobs/java/rdss/glue/ArchiveCodec.java):
#: as rdss/archive/entries.py reads them, and a damaged object (truncated, bytes after its last gzip
#: member that are not gzip) ends with a line saying so instead of failing the run.
ARCHIVE_CODEC = "rdss.glue.ArchiveCodec"
#: The configuration key of that line's token, and the token: random per process, so no archived
#: line can pass for it (executors get it with the read's options).
DAMAGE_KEY = "rdss.archive.damage"
DAMAGE_MARKER = f"rdss-archive-damaged-{secrets.token_hex(16)}"


def register_entries(spark: SparkSession) -> None:
    """Make :data:`ENTRY_FUNCTION` callable in ``spark`` (:data:`JAR` must be on its classpath)."""
    try:
        spark.udf.registerJavaFunction(ENTRY_FUNCTION, ENTRY_CLASS, ENTRY_FIELDS)
    except Exception as error:
        if "rdss.glue." not in str(error) and "ClassNotFound" not in str(error):
            raise
        raise RuntimeError(
            f"{ENTRY_CLASS} is not on Spark's classpath: build {JAR} (make setup) and start Spark with it, "
            "or on AWS Glue pass it with --extra-jars"
        ) from error


def entries(lines: DataFrame) -> DataFrame:
    """Archive lines (a ``line`` column, and any others) as the records they hold: ``line``
    becomes the record's exact bytes and :data:`IDENTITY` columns are added (null for a
    legacy line). ``line`` stays a string column: Spark keeps a string's bytes as they are,
    valid UTF-8 or not, and casting it to binary gives them back."""
    entry = F.call_udf(ENTRY_FUNCTION, F.col("line").cast("binary")).alias("_entry")
    others = [name for name in lines.columns if name != "line"]
    read = lines.select(entry, *others)
    field = F.col("_entry").getField
    return read.select(
        field("payload").cast("string").alias("line"), *others, *(field(name).alias(name) for name in IDENTITY)
    )


def damage(line: Column) -> Column:
    """What was wrong with an archive object, on the line :data:`ARCHIVE_CODEC` ended it with
    (``<what> (byte N of the object)``); null on every line the object holds."""
    prefix = DAMAGE_MARKER + " "
    return F.when(line.startswith(prefix), line.substr(len(prefix) + 1, 1 << 30))


def intact(lines: DataFrame) -> DataFrame:
    """Archive lines (a ``line`` column) without the lines that say an object was damaged."""
    return lines.where(damage(F.col("line")).isNull())


@dataclass(frozen=True, order=True)
class Damaged:
    """An archive object read only up to where it is damaged: the lines before are read, the
    rest of the object is not."""

    source: str
    what: str

    def describe(self, job: str) -> str:
        """The one line a run prints for it."""
        return f"{job}: archive object {self.source} is damaged, read up to there: {self.what}"


def damaged(lines: DataFrame, source: str = "source") -> list[Damaged]:
    """The damaged objects ``lines`` (a ``line`` column and ``source``) came from."""
    found = lines.select(F.col(source).alias("source"), damage(F.col("line")).alias("what"))
    rows = found.where(F.col("what").isNotNull()).collect()
    return sorted(Damaged(str(row["source"]), str(row["what"])) for row in rows)


def report_damaged(job: str, objects: Sequence[Damaged]) -> None:
    """Each damaged object in one line on standard error (the run goes on with the rest)."""
    for found in objects:
        print(found.describe(job), file=sys.stderr, flush=True)


def unique_entries(records: DataFrame) -> DataFrame:
    """``records`` (with :data:`IDENTITY` columns) with each identity once; legacy records (no
    identity) all kept. Which copy of an identity stays is not said: for a small frame whose
    copies need not be told apart (the errors archive)."""
    identified = records.where(F.col("sequenceNumber").isNotNull()).dropDuplicates(list(IDENTITY))
    return identified.unionByName(records.where(F.col("sequenceNumber").isNull()))


#: How a job uses a path argument (:attr:`Argument.use`): an archive read recursively (every
#: object under it is a record's), a directory of named tables read, or where the job writes.
ARCHIVE, TABLES, OUTPUT = "archive", "tables", "output"


#: A URI's scheme (RFC 3986: two characters at least, so a drive letter is not one): s3://, file:/...
_URI = re.compile(r"([A-Za-z][A-Za-z0-9+.-]+):")


class UsageError(ValueError):
    """A local run's arguments name paths the job cannot use: said in one line, exit 2."""


@dataclass(frozen=True)
class Argument:
    """One ``--name VALUE`` argument of a job: the same name locally and on Glue."""

    name: str
    help: str
    required: bool = True
    #: :data:`ARCHIVE`, :data:`TABLES` or :data:`OUTPUT`: checked before a local run starts Spark
    use: str = ARCHIVE
    #: for :data:`TABLES`, what must be in the directory
    holds: tuple[str, ...] = ()


@dataclass(frozen=True)
class Context:
    """What a job's function gets: the session, its arguments, and how to read archives."""

    spark: SparkSession
    #: every declared argument; an optional one not given is None
    arguments: Mapping[str, str | None]
    #: the GlueContext on AWS Glue, None locally
    glue: Any = None

    @property
    def on_glue(self) -> bool:
        return self.glue is not None

    def argument(self, name: str) -> str:
        """A required argument's value."""
        value = self.arguments[name]
        if value is None:
            raise ValueError(f"--{name} is required")
        return value

    def archive_lines(self, path: str, *, bookmark: str | None = None) -> tuple[DataFrame, list[str]]:
        """Every line of every object under ``path`` (recursively) as ``line, source``, and the
        objects read.

        Lines split on ``\\n`` only, as Firehose's delimiter is; a ``\\r`` stays part of a line.
        Objects are read with :data:`ARCHIVE_CODEC`: a damaged one ends with a line
        :func:`damage` reads (take them out with :func:`intact`, list them with :func:`damaged`).
        ``bookmark`` (on Glue): read through a bookmarked source under that transformation
        context, so each run gets only objects earlier runs have not processed. Locally, and
        without a bookmark, the whole tree is read.
        """
        if self.glue is None or bookmark is None:
            reader = self.spark.read.option("lineSep", "\n").option("recursiveFileLookup", "true")
            # per read, not per session: no other read is touched
            reader = reader.option("io.compression.codecs", ARCHIVE_CODEC).option(DAMAGE_KEY, DAMAGE_MARKER)
            raw = reader.text(path)
            lines = raw.select(F.col("value").alias("line"), F.input_file_name().alias("source"))
            return lines, list(raw.inputFiles())
        return _bookmarked_lines(self.glue, path, bookmark)


@dataclass(frozen=True)
class Job:
    """A Glue job: what it is called, the arguments it takes and the function that does it."""

    name: str
    description: str
    arguments: Sequence[Argument]
    run: Callable[[Context], Mapping[str, Any]]
    #: settings of this job on top of :data:`SESSION_SETTINGS`, local or on Glue
    settings: Mapping[str, str] = field(default_factory=dict)
    #: settings of a local run on top of :data:`LOCAL_SETTINGS`
    local_settings: Mapping[str, str] = field(default_factory=dict)
    #: jars a local session puts on the driver's classpath (on Glue: ``--extra-jars``)
    jars: Sequence[Path] = ()
    #: a class-data-sharing archive a local JVM maps when present (``make setup`` records it)
    class_archive: Path | None = None


def main(job: Job, argv: Sequence[str] | None = None, *, spark: SparkSession | None = None) -> int:
    """Run ``job`` where this process is (AWS Glue or local) and print its result as JSON.

    ``argv`` defaults to the command line; ``spark``: run in this session (tests) instead of
    starting and stopping one.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if spark is None and on_glue(args):
        result = _glue_run(job, args)
    else:
        arguments = parse_arguments(job, args)
        try:
            check_paths(job, arguments)
        except UsageError as error:
            print(f"{job.name}: {error}", file=sys.stderr)
            return 2
        session = spark or local_session(job)
        try:
            apply_settings(session, job)
            result = job.run(Context(session, arguments))
        finally:
            if spark is None:
                session.stop()
    print(json.dumps(result, sort_keys=True))
    return 0


def parse_arguments(job: Job, argv: Sequence[str]) -> dict[str, str | None]:
    """A local run's arguments (argparse): every declared one, None for an optional one not given."""
    parser = argparse.ArgumentParser(prog=job.name, description=job.description)
    for argument in job.arguments:
        parser.add_argument(f"--{argument.name}", required=argument.required, help=argument.help)
    parsed = vars(parser.parse_args(argv))
    return {argument.name: parsed[argument.name] for argument in job.arguments}


def check_paths(job: Job, arguments: Mapping[str, str | None]) -> None:
    """The local paths among ``arguments`` are ones the job can use (an ``s3://`` or other
    remote path is the store's to judge): what it reads exists, what it writes is a directory or
    nothing yet, and no output lies inside an archive the job reads recursively (the next run
    would read the output's files as archive objects).

    Raises:
        UsageError: saying which argument and why.
    """
    given = {a.name: (a, _local(arguments.get(a.name))) for a in job.arguments}
    archives = [(name, path) for name, (a, path) in given.items() if path is not None and a.use == ARCHIVE]
    for name, (argument, path) in given.items():
        if path is None:
            continue
        if argument.use == OUTPUT:
            if path.exists() and not path.is_dir():
                raise UsageError(f"--{name} {path}: exists and is not a directory")
            for archive_name, archive in archives:
                if path.resolve().is_relative_to(archive.resolve()):
                    raise UsageError(
                        f"--{name} {path} is inside --{archive_name} {archive}, which is read recursively: "
                        "write the output elsewhere"
                    )
            continue
        if not path.exists():
            raise UsageError(f"--{name} {path}: no such file or directory")
        missing = [held for held in argument.holds if not (path / held).exists()]
        if missing:
            names = ", ".join(f"{held}/" for held in missing)
            raise UsageError(f"--{name} {path}: no {names} in it (expected: {argument.help})")


def _local(value: str | None) -> Path | None:
    """The local file a path argument names (a plain path or a ``file:`` URI), else None."""
    if value is None:
        return None
    uri = _URI.match(value)
    if uri is None:
        return Path(value)
    return Path(value[uri.end() :].removeprefix("//")) if uri.group(1).lower() == "file" else None


def on_glue(argv: Sequence[str]) -> bool:
    """True when AWS Glue started this process: its libraries are here and it passed ``--JOB_NAME``."""
    if "--JOB_NAME" not in argv:
        return False
    try:
        import awsglue  # noqa: F401
    except ImportError:
        return False
    return True


def apply_settings(spark: SparkSession, job: Job) -> None:
    """The settings every run of ``job`` needs, in a session someone else may have started."""
    for key, value in {**SESSION_SETTINGS, **job.settings}.items():
        spark.conf.set(key, value)


def local_session(job: Job, *, app: str | None = None, record_classes: Path | None = None) -> SparkSession:
    """A SparkSession on ``local[*]`` for ``job``: its jars on the classpath, its class-data-sharing
    archive mapped when there is one.

    ``record_classes``: instead, have the JVM write the classes it loaded there as it exits
    (``make setup`` records the archive so).
    """
    for jar in job.jars:
        if not jar.is_file():
            raise FileNotFoundError(f"{jar} is missing: build it with `make setup` (javac, from glue_jobs/java/)")
    settings = {**LOCAL_SETTINGS, **SESSION_SETTINGS, **job.settings, **job.local_settings}
    if job.jars:
        settings["spark.driver.extraClassPath"] = ":".join(str(jar) for jar in job.jars)
    options = settings.get("spark.driver.extraJavaOptions", "")
    quiet = " -Xlog:cds=off -Xlog:cds+dynamic=off"  # classes it cannot archive are no news
    if record_classes is not None:
        options += f" -XX:ArchiveClassesAtExit={record_classes}{quiet}"
    elif job.class_archive is not None and job.class_archive.is_file():
        # -Xshare:auto: an archive that no longer matches the JVM or the classpath is ignored
        options += f" -XX:SharedArchiveFile={job.class_archive} -Xshare:auto{quiet}"
    if options:
        settings["spark.driver.extraJavaOptions"] = options.strip()
    builder = SparkSession.builder.master("local[*]").appName(app or f"rdss-{job.name}")
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def write_text(spark: SparkSession, path: str, text: str) -> None:
    """One small file through Hadoop's file system API: a local path or s3:// alike."""
    jvm: Any = spark.sparkContext._jvm
    target = jvm.org.apache.hadoop.fs.Path(path)
    system = target.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    stream = system.create(target, True)
    try:
        stream.write(bytearray(text.encode("utf-8")))
    finally:
        stream.close()


def _glue_run(job: Job, argv: Sequence[str]) -> Mapping[str, Any]:
    """The job under AWS Glue: getResolvedOptions, the job's bookmarks, commit on success."""
    from awsglue.context import GlueContext
    from awsglue.job import Job as GlueJob
    from awsglue.utils import getResolvedOptions
    from pyspark.context import SparkContext

    # getResolvedOptions fails on an option it is asked for and not given: ask only for those given
    given = [a.name for a in job.arguments if a.required or f"--{a.name}" in argv]
    resolved = getResolvedOptions([sys.argv[0], *argv], ["JOB_NAME", *given])
    glue = GlueContext(SparkContext.getOrCreate())
    bookmarks = GlueJob(glue)
    bookmarks.init(resolved["JOB_NAME"], resolved)
    apply_settings(glue.spark_session, job)
    arguments = {a.name: resolved.get(a.name) for a in job.arguments}
    result = job.run(Context(glue.spark_session, arguments, glue))
    bookmarks.commit()
    return result


def _bookmarked_lines(glue: Any, path: str, bookmark: str) -> tuple[DataFrame, list[str]]:
    # A bookmarked source hands over only objects earlier runs have not processed. As CSV with
    # quoting off and a separator no valid JSON text contains raw (U+0001), each line arrives
    # whole in one column; a malformed line holding that byte arrives split and is rejoined.
    frame = glue.create_dynamic_frame.from_options(
        connection_type="s3",
        connection_options={"paths": [path], "recurse": True, "groupFiles": "none"},
        format="csv",
        format_options={"separator": "\u0001", "quoteChar": -1, "withHeader": False},
        transformation_ctx=bookmark,
    )
    columns: DataFrame = frame.toDF()
    fields = [F.col(f"`{name}`") for name in columns.columns]
    line = F.array_join(F.array(*fields), "\u0001") if len(fields) > 1 else fields[0]
    lines = columns.select(line.alias("line"), F.input_file_name().alias("source"))
    # the objects this run got: listing them costs one more pass over the run's (new) lines
    sources = [row.source for row in lines.select("source").distinct().collect()]
    return lines, sources
