"""Glue catalog with partition projection, Glue jobs and the Athena workgroup."""

from __future__ import annotations

import json
import re
from typing import Any

from glue_jobs import schema
from stacks.catalog import REPORT_TABLE_PREFIX
from stacks.jobs import GLUE_VERSION, SHARED_MODULES
from stacks.queries import named_queries
from tests.cdk.conftest import Synthesized
from tests.cdk.support import literal_tail, references


def _tables(synthesized: Synthesized) -> dict[str, dict[str, Any]]:
    return {
        t["Properties"]["TableInput"]["Name"]: t["Properties"]["TableInput"]
        for t in synthesized.resources("AWS::Glue::Table").values()
    }


def test_one_database_and_the_tables_of_glue_jobs_schema(synthesized: Synthesized) -> None:
    (database,) = synthesized.resources("AWS::Glue::Database").values()
    assert database["Properties"]["DatabaseInput"]["Name"] == f"rdss_{synthesized.config.name}"
    tables = _tables(synthesized)
    reports = {REPORT_TABLE_PREFIX + name for name in schema.REPORT_TABLES}
    assert set(tables) == {"audit_raw", "errors_raw", "messages", "rejects", "duplicates", *reports}
    columns = {name: [(c["Name"], c["Type"]) for c in t["StorageDescriptor"]["Columns"]] for name, t in tables.items()}
    assert columns["messages"] == list(schema.CURATED_COLUMNS)
    assert columns["audit_raw"] == list(schema.RAW_AUDIT_COLUMNS)
    assert columns["rejects"] == list(schema.REJECT_COLUMNS)
    assert columns["duplicates"] == list(schema.DUPLICATE_COLUMNS)
    for name, declared in schema.REPORT_TABLES.items():
        assert columns[REPORT_TABLE_PREFIX + name] == list(declared)
        location = tables[REPORT_TABLE_PREFIX + name]["StorageDescriptor"]["Location"]
        assert literal_tail(location).endswith(f"reports/{name}/")
    partitions = [(c["Name"], c["Type"]) for c in tables["messages"]["PartitionKeys"]]
    assert partitions == list(schema.CURATED_PARTITIONS)


def test_curated_messages_are_projected_by_date_and_message_type(synthesized: Synthesized) -> None:
    parameters = _tables(synthesized)["messages"]["Parameters"]
    assert parameters["projection.enabled"] == "true"
    assert parameters["projection.dt.type"] == "date"
    assert parameters["projection.dt.format"] == "yyyy-MM-dd"
    assert parameters["projection.messageType.type"] == "enum"
    assert parameters["projection.messageType.values"].split(",") == [*schema.MESSAGE_TYPES, schema.UNKNOWN_TYPE]
    template = literal_tail(parameters["storage.location.template"])
    assert template.endswith("curated/messages/dt=${dt}/messageType=${messageType}/")


def test_raw_archives_are_projected_by_hour_like_firehose_writes_them(synthesized: Synthesized) -> None:
    tables = _tables(synthesized)
    for name in ("audit_raw", "errors_raw"):
        parameters = tables[name]["Parameters"]
        assert parameters["projection.enabled"] == "true"
        for part in ("year", "month", "day", "hour"):
            assert parameters[f"projection.{part}.type"] == "integer"
        for part in ("month", "day", "hour"):
            assert parameters[f"projection.{part}.digits"] == "2"
        assert literal_tail(parameters["storage.location.template"]).endswith(
            "year=${year}/month=${month}/day=${day}/hour=${hour}/"
        )
    assert tables["errors_raw"]["Parameters"]["projection.channel.values"] == "invalid,error"
    assert tables["audit_raw"]["StorageDescriptor"]["SerdeInfo"]["SerializationLibrary"].endswith("JsonSerDe")


def test_glue_jobs_run_the_scripts_with_bookmarks_under_the_security_configuration(synthesized: Synthesized) -> None:
    (configuration,) = synthesized.resources("AWS::Glue::SecurityConfiguration").values()
    encryption = configuration["Properties"]["EncryptionConfiguration"]
    assert encryption["S3Encryptions"][0]["S3EncryptionMode"] == "SSE-KMS"
    assert encryption["CloudWatchEncryption"]["CloudWatchEncryptionMode"] == "SSE-KMS"
    assert encryption["JobBookmarksEncryption"]["JobBookmarksEncryptionMode"] == "CSE-KMS"
    jobs = {j["Properties"]["Name"]: j["Properties"] for j in synthesized.resources("AWS::Glue::Job").values()}
    prefix = f"rdss-{synthesized.config.name}"
    assert set(jobs) == {f"{prefix}-audit-compaction", f"{prefix}-audit-report"}
    for job in jobs.values():
        assert job["GlueVersion"] == GLUE_VERSION
        assert job["Command"]["Name"] == "glueetl"
        assert "ScriptLocation" in job["Command"]
        assert job["SecurityConfiguration"] == configuration["Properties"]["Name"]
        arguments = job["DefaultArguments"]
        assert arguments["--job-bookmark-option"] == "job-bookmark-enable"
        assert {"--input", "--output", "--extra-py-files", "--TempDir"} <= set(arguments)
    audit = synthesized.logical_id(synthesized.stack.messaging.buckets["audit"])
    errors = synthesized.logical_id(synthesized.stack.messaging.buckets["errors"])
    compaction = jobs[f"{prefix}-audit-compaction"]["DefaultArguments"]
    assert references(compaction["--input"]) == {audit}
    # the errors archive tells the compaction which records the broker refused
    assert references(compaction["--errors"]) == {errors}
    # both scripts import the shared modules, shipped beside them
    for job in jobs.values():
        shipped = json.dumps(job["DefaultArguments"]["--extra-py-files"])
        assert len(re.findall(r"[0-9a-f]{64}\.py", shipped)) == len(SHARED_MODULES), shipped
    # the jobs' Java half (glue_jobs/java/: the archive entry reader, the compaction's parsers) goes with both
    assert "--extra-jars" in compaction
    assert "--extra-jars" in jobs[f"{prefix}-audit-report"]["DefaultArguments"]
    report = jobs[f"{prefix}-audit-report"]["DefaultArguments"]
    assert references(report["--errors"]) == {errors}


def test_athena_workgroup_enforces_encrypted_results(synthesized: Synthesized) -> None:
    (workgroup,) = synthesized.resources("AWS::Athena::WorkGroup").values()
    configuration = workgroup["Properties"]["WorkGroupConfiguration"]
    assert configuration["EnforceWorkGroupConfiguration"] is True
    result = configuration["ResultConfiguration"]
    assert result["EncryptionConfiguration"]["EncryptionOption"] == "SSE_KMS"
    assert references(result["OutputLocation"]) == {synthesized.logical_id(synthesized.stack.analytics.results)}
    assert configuration["BytesScannedCutoffPerQuery"] == synthesized.config.analytics.bytes_scanned_cutoff_mib * 2**20


def test_named_queries(synthesized: Synthesized) -> None:
    queries = {
        q["Properties"]["Name"]: q["Properties"] for q in synthesized.resources("AWS::Athena::NamedQuery").values()
    }
    assert set(queries) == {
        "volume-per-type-per-day",
        "error-rate-per-code",
        "duplicates",
        "incomplete-sequences",
        "latency",
    }
    assert set(queries) == {q.name for q in named_queries()}
    for query in queries.values():
        assert query["Database"] == f"rdss_{synthesized.config.name}"
