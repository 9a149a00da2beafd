"""The Glue tables the CDK app declares, and the rows Athena would read through them.

:func:`glue_tables` reads the table definitions from a synthesised template. :func:`visible`
lists the files a table's partition projection reaches under a local stand-in for its bucket,
with their partition values (the ``storage.location.template`` and the ``projection.*``
parameters, as Athena evaluates them: integer ranges and zero-padding, enum values, date
ranges); an unpartitioned table reads the files directly under its location, as Hive does,
skipping names starting with ``_`` or ``.``. :func:`load` puts every table into DuckDB: the
Parquet ones as views over their files, the JSON ones (the raw archives) row by row the way
Hadoop's text input format and the OpenX JSON SerDe with ``ignore.malformed.json`` and
``case.insensitive`` read them.
"""

from __future__ import annotations

import gzip
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

JSON_SERDE = "org.openx.data.jsonserde.JsonSerDe"
PARQUET_SERDE = "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"
#: Hive column types as DuckDB names them.
DUCKDB_TYPES = {"string": "VARCHAR", "int": "INTEGER", "bigint": "BIGINT", "double": "DOUBLE", "timestamp": "TIMESTAMP"}


@dataclass(frozen=True)
class GlueTable:
    name: str
    columns: tuple[tuple[str, str], ...]
    partitions: tuple[tuple[str, str], ...]
    #: the logical id of the bucket the table lives in, and the key prefix of its location
    bucket: str
    prefix: str
    serde: str
    parameters: dict[str, Any]

    @property
    def projected(self) -> bool:
        return self.parameters.get("projection.enabled") == "true"


def glue_tables(template: dict[str, Any]) -> dict[str, GlueTable]:
    """Every ``AWS::Glue::Table`` of a synthesised template, by name."""
    tables = {}
    for resource in template["Resources"].values():
        if resource["Type"] != "AWS::Glue::Table":
            continue
        table = resource["Properties"]["TableInput"]
        storage = table["StorageDescriptor"]
        bucket, prefix = s3_location(storage["Location"])
        tables[table["Name"]] = GlueTable(
            name=table["Name"],
            columns=tuple((c["Name"], c["Type"]) for c in storage["Columns"]),
            partitions=tuple((c["Name"], c["Type"]) for c in table.get("PartitionKeys", [])),
            bucket=bucket,
            prefix=prefix,
            serde=storage["SerdeInfo"]["SerializationLibrary"],
            parameters=table.get("Parameters", {}),
        )
    return tables


def s3_location(value: Any) -> tuple[str, str]:
    """``s3://<bucket ref>/<prefix>`` as CloudFormation writes it -> (bucket's logical id, prefix)."""
    parts = value["Fn::Join"][1]
    literal, reference, tail = parts
    if literal != "s3://" or not tail.startswith("/"):
        raise ValueError(f"not an s3:// location of one bucket: {value}")
    return reference["Ref"], tail[1:]


def _template_pattern(table: GlueTable) -> re.Pattern[str]:
    """The object keys (less the file name) partition projection reaches, with named groups."""
    _, template = s3_location(table.parameters["storage.location.template"])
    pattern = ""
    for literal, name in re.findall(r"([^$]*)(?:\$\{(\w+)\})?", template):
        pattern += re.escape(literal)
        if not name:
            continue
        kind = table.parameters[f"projection.{name}.type"]
        if kind == "integer":
            digits = table.parameters.get(f"projection.{name}.digits")
            pattern += rf"(?P<{name}>\d{{{digits}}})" if digits else rf"(?P<{name}>-?\d+)"
        elif kind == "enum":
            values = table.parameters[f"projection.{name}.values"].split(",")
            pattern += f"(?P<{name}>{'|'.join(map(re.escape, values))})"
        elif kind == "date":
            if table.parameters[f"projection.{name}.format"] != "yyyy-MM-dd":
                raise ValueError(f"{table.name}: date format of {name} not emulated")
            pattern += rf"(?P<{name}>\d{{4}}-\d{{2}}-\d{{2}})"
        else:
            raise ValueError(f"{table.name}: projection type {kind} of {name} not emulated")
    return re.compile(pattern)


def _in_range(table: GlueTable, name: str, value: str, today: date) -> bool:
    bounds = table.parameters.get(f"projection.{name}.range")
    if bounds is None:
        return True
    low, high = bounds.split(",")
    if table.parameters[f"projection.{name}.type"] == "integer":
        return int(low) <= int(value) <= int(high)
    day = date.fromisoformat(value)
    return date.fromisoformat(low) <= day <= (today if high == "NOW" else date.fromisoformat(high))


def visible(table: GlueTable, bucket_root: Path, today: date) -> Iterator[tuple[Path, dict[str, str]]]:
    """The files Athena reads for ``table`` when its bucket is ``bucket_root``, with partition values."""
    if not table.projected:
        folder = bucket_root / table.prefix
        for path in sorted(folder.iterdir()) if folder.is_dir() else []:
            if path.is_file() and not path.name.startswith(("_", ".")):
                yield path, {}
        return
    pattern = _template_pattern(table)
    for folder, _, names in sorted(os.walk(bucket_root)):
        key = Path(folder).relative_to(bucket_root).as_posix() + "/"
        match = pattern.fullmatch(key)
        if match is None:
            continue
        values = match.groupdict()
        if not all(_in_range(table, name, value, today) for name, value in values.items()):
            continue
        for name in sorted(names):
            if not name.startswith(("_", ".")):
                yield Path(folder) / name, values


def hadoop_lines(data: bytes) -> list[bytes]:
    """Lines as Hadoop's LineRecordReader splits them: at ``\\n``, ``\\r\\n`` or a lone ``\\r``."""
    lines = re.split(rb"\r\n|\n|\r", data)
    if lines and lines[-1] == b"":
        lines.pop()
    return lines


def serde_row(line: bytes, columns: tuple[tuple[str, str], ...]) -> tuple[Any, ...]:
    """One line through the OpenX JSON SerDe: an object's members by lower-cased name, nested
    values as their JSON text; anything that is not a JSON object (or repeats a key) is a row of
    nulls (``ignore.malformed.json``). What follows the object on the line is not looked at."""

    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        keys = [key for key, _ in pairs]
        if len(keys) != len(set(keys)):
            raise ValueError("Duplicate key")
        return dict(pairs)

    text = line.decode("utf-8", "replace").lstrip()
    try:
        value, _ = json.JSONDecoder(object_pairs_hook=unique).raw_decode(text)
    except ValueError:
        return tuple(None for _ in columns)
    if not isinstance(value, dict):
        return tuple(None for _ in columns)
    members = {key.lower(): member for key, member in value.items()}

    def cell(member: Any) -> Any:
        if member is None or isinstance(member, str):
            return member
        return json.dumps(member, separators=(",", ":"), ensure_ascii=False)

    return tuple(cell(members.get(name.lower())) for name, _ in columns)


def load(connection: Any, table: GlueTable, bucket_root: Path, today: date) -> int:
    """Make ``table`` queryable in DuckDB under its name; the number of files it reads."""
    columns = table.columns + table.partitions
    files = list(visible(table, bucket_root, today))
    if table.serde == JSON_SERDE:
        ddl = ", ".join(f'"{name}" {DUCKDB_TYPES[kind]}' for name, kind in columns)
        connection.execute(f'CREATE TABLE "{table.name}" ({ddl})')
        rows = []
        for path, partition in files:
            values = tuple(partition[name] for name, _ in table.partitions)
            rows += [
                serde_row(line, table.columns) + values for line in hadoop_lines(gzip.decompress(path.read_bytes()))
            ]
        if rows:
            marks = ", ".join("?" for _ in columns)
            connection.executemany(f'INSERT INTO "{table.name}" VALUES ({marks})', rows)
        return len(files)
    if table.serde != PARQUET_SERDE:
        raise ValueError(f"{table.name}: SerDe {table.serde} not emulated")
    selected = ", ".join(f'CAST("{name}" AS {DUCKDB_TYPES[kind]}) AS "{name}"' for name, kind in table.columns)
    partitioned = ", ".join(f'CAST(p."{name}" AS {DUCKDB_TYPES[kind]}) AS "{name}"' for name, kind in table.partitions)
    if not files:
        empty = ", ".join(f'CAST(NULL AS {DUCKDB_TYPES[kind]}) AS "{name}"' for name, kind in columns)
        connection.execute(f'CREATE VIEW "{table.name}" AS SELECT {empty} WHERE false')
        return 0
    listed = ", ".join(f"'{path}'" for path, _ in files)
    source = f"read_parquet([{listed}], filename = true)"
    if not table.partitions:
        connection.execute(f'CREATE VIEW "{table.name}" AS SELECT {selected} FROM {source}')
        return len(files)
    values = ", ".join(
        "(" + ", ".join([f"'{path}'", *(f"'{partition[name]}'" for name, _ in table.partitions)]) + ")"
        for path, partition in files
    )
    names = ", ".join(["filename", *(f'"{name}"' for name, _ in table.partitions)])
    connection.execute(
        f'CREATE VIEW "{table.name}" AS SELECT {selected}, {partitioned} FROM {source} '
        f"JOIN (VALUES {values}) AS p({names}) USING (filename)"
    )
    return len(files)


def now() -> date:
    return datetime.now(UTC).date()
