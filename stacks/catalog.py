"""The Glue Data Catalog: one database per environment, its tables declared from glue_jobs/schema.py.

Every table uses partition projection: Athena computes partitions from the table's own
parameters and the S3 layout, so no crawler runs and no ``MSCK REPAIR`` is ever needed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_glue as glue
from constructs import Construct

from glue_jobs import schema

_JSON_SERDE = "org.openx.data.jsonserde.JsonSerDe"
_TEXT_INPUT = "org.apache.hadoop.mapred.TextInputFormat"
_TEXT_OUTPUT = "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat"
_PARQUET_SERDE = "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"
_PARQUET_INPUT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat"
_PARQUET_OUTPUT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat"

#: Partition projection of the hour partitions Firehose writes (year=/month=/day=/hour=).
_HOUR_DIGITS = {"month": (1, 12), "day": (1, 31), "hour": (0, 23)}


@dataclass(frozen=True)
class TableLocation:
    """Where a table's data lives: ``s3://<bucket>/<prefix>``."""

    bucket_name: str
    prefix: str

    @property
    def url(self) -> str:
        return f"s3://{self.bucket_name}/{self.prefix}"


def _columns(columns: Sequence[tuple[str, str]]) -> list[glue.CfnTable.ColumnProperty]:
    return [glue.CfnTable.ColumnProperty(name=name, type=type_) for name, type_ in columns]


def hour_projection(first_year: int) -> dict[str, str]:
    """Integer projection of Firehose's hour partitions, zero-padded like the keys."""
    parameters = {
        "projection.year.type": "integer",
        "projection.year.range": f"{first_year},{first_year + 50}",
    }
    for name, (low, high) in _HOUR_DIGITS.items():
        parameters[f"projection.{name}.type"] = "integer"
        parameters[f"projection.{name}.range"] = f"{low},{high}"
        parameters[f"projection.{name}.digits"] = "2"
    return parameters


_HOUR_TEMPLATE = "year=${year}/month=${month}/day=${day}/hour=${hour}/"
#: The report job's tables are ``report_<name>`` in the catalog (the job writes ``<name>/``).
REPORT_TABLE_PREFIX = "report_"


class Catalog(Construct):
    """The database ``rdss_<env>`` and its tables:

    - ``audit_raw``: the audit archive as the archiver writes it (archive entries, one per line,
      gzip, hour partitions; lines of archives written before entries read as raw messages);
    - ``errors_raw``: the invalid and error archives, partitioned by channel and hour;
    - ``messages``: the curated Parquet the compaction job writes (dt, messageType);
    - ``rejects`` and ``duplicates``: the compaction job's other outputs;
    - ``report_<table>``: the report job's tables (:data:`schema.REPORT_TABLES`), small and
      unpartitioned, rewritten whole on every run.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        database_name: str,
        audit: TableLocation,
        errors: TableLocation,
        error_channels: Sequence[str],
        curated: TableLocation,
        reports: TableLocation,
        first_year: int,
    ) -> None:
        super().__init__(scope, construct_id)
        account = cdk.Stack.of(self).account
        self.database_name = database_name
        self.database = glue.CfnDatabase(
            self,
            "Database",
            catalog_id=account,
            database_input=glue.CfnDatabase.DatabaseInputProperty(
                name=database_name, description="RDSS message archives and the curated tables built from them"
            ),
        )
        raw_columns = _columns(schema.RAW_AUDIT_COLUMNS)
        self.audit_raw = self._table(
            "AuditRaw",
            name="audit_raw",
            description="Every record published to the input channel, as sent: one archive entry per line (the "
            "record's identity, arrival and exact bytes; a record archived twice shares its identity)",
            columns=raw_columns,
            partitions=schema.RAW_AUDIT_PARTITIONS,
            location=audit,
            json=True,
            projection={
                **hour_projection(first_year),
                "storage.location.template": audit.url + _HOUR_TEMPLATE,
            },
        )
        self.errors_raw = self._table(
            "ErrorsRaw",
            name="errors_raw",
            description="Records of the invalid and error channels, decorated with errorCode and errorDescription",
            columns=raw_columns,
            partitions=(("channel", "string"), *schema.RAW_AUDIT_PARTITIONS),
            location=errors,
            json=True,
            projection={
                "projection.channel.type": "enum",
                "projection.channel.values": ",".join(error_channels),
                **hour_projection(first_year),
                "storage.location.template": errors.url + "${channel}/" + _HOUR_TEMPLATE,
            },
        )
        messages = TableLocation(curated.bucket_name, curated.prefix + "messages/")
        self.messages = self._table(
            "Messages",
            name="messages",
            description="Curated messages: one row per messageId the broker accepted (audit compaction)",
            columns=_columns(schema.CURATED_COLUMNS),
            partitions=schema.CURATED_PARTITIONS,
            location=messages,
            json=False,
            projection={
                "projection.dt.type": "date",
                "projection.dt.format": "yyyy-MM-dd",
                "projection.dt.range": f"{first_year}-01-01,NOW",
                "projection.dt.interval": "1",
                "projection.dt.interval.unit": "DAYS",
                "projection.messageType.type": "enum",
                "projection.messageType.values": ",".join((*schema.MESSAGE_TYPES, schema.UNKNOWN_TYPE)),
                "storage.location.template": messages.url + "dt=${dt}/messageType=${messageType}/",
            },
        )
        self.rejects = self._table(
            "Rejects",
            name="rejects",
            description="Archive lines that are not JSON, carry no messageId or the broker rejected, with the reason",
            columns=_columns(schema.REJECT_COLUMNS),
            partitions=(),
            location=TableLocation(curated.bucket_name, curated.prefix + "rejects/"),
            json=False,
        )
        self.duplicates = self._table(
            "Duplicates",
            name="duplicates",
            description="Per messageId the broker accepted more than once, how many records it dropped as duplicates",
            columns=_columns(schema.DUPLICATE_COLUMNS),
            partitions=(),
            location=TableLocation(curated.bucket_name, curated.prefix + "duplicates/"),
            json=False,
        )
        self.reports = {
            name: self._table(
                "Report" + "".join(part.capitalize() for part in name.split("_")),
                name=REPORT_TABLE_PREFIX + name,
                description=f"The audit report's {name.replace('_', ' ')} (rewritten by each run of the report job)",
                columns=_columns(columns),
                partitions=(),
                location=TableLocation(reports.bucket_name, f"{reports.prefix}{name}/"),
                json=False,
            )
            for name, columns in schema.REPORT_TABLES.items()
        }

    def _table(
        self,
        construct_id: str,
        *,
        name: str,
        description: str,
        columns: list[glue.CfnTable.ColumnProperty],
        partitions: Sequence[tuple[str, str]],
        location: TableLocation,
        json: bool,
        projection: dict[str, str] | None = None,
    ) -> glue.CfnTable:
        if json:
            storage = glue.CfnTable.StorageDescriptorProperty(
                columns=columns,
                location=location.url,
                input_format=_TEXT_INPUT,
                output_format=_TEXT_OUTPUT,
                compressed=True,
                serde_info=glue.CfnTable.SerdeInfoProperty(
                    serialization_library=_JSON_SERDE,
                    # The archive holds whatever producers sent: a line that is not JSON is
                    # read as nulls instead of failing the query.
                    parameters={"ignore.malformed.json": "true", "case.insensitive": "true"},
                ),
            )
            parameters = {"classification": "json", "compressionType": "gzip"}
        else:
            storage = glue.CfnTable.StorageDescriptorProperty(
                columns=columns,
                location=location.url,
                input_format=_PARQUET_INPUT,
                output_format=_PARQUET_OUTPUT,
                serde_info=glue.CfnTable.SerdeInfoProperty(serialization_library=_PARQUET_SERDE),
            )
            parameters = {"classification": "parquet"}
        if projection:
            parameters = {**parameters, "projection.enabled": "true", **projection}
        table = glue.CfnTable(
            self,
            construct_id,
            catalog_id=self.database.catalog_id,
            database_name=self.database_name,
            table_input=glue.CfnTable.TableInputProperty(
                name=name,
                description=description,
                table_type="EXTERNAL_TABLE",
                parameters={"EXTERNAL": "TRUE", **parameters},
                partition_keys=_columns(partitions),
                storage_descriptor=storage,
            ),
        )
        table.node.add_dependency(self.database)
        return table
