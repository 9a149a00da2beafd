"""Analytics: the archives made queryable (Glue catalog, Glue jobs, Athena).

Firehose writes the raw archives (messaging); the compaction job turns the audit archive into
curated Parquet, the report job summarises it, and Athena reads all of them through tables
with partition projection.
"""

from __future__ import annotations

from collections.abc import Mapping

import aws_cdk as cdk
from aws_cdk import aws_glue as glue
from aws_cdk import aws_s3 as s3
from constructs import Construct

from rdss.deployment.topology import Deployment, Topology
from stacks.archives import archive_bucket_of
from stacks.catalog import Catalog, TableLocation
from stacks.config import EnvironmentConfig, removal_policy
from stacks.dependencies import drop_referenced_dependency
from stacks.encryption import DataKey
from stacks.jobs import GLUE_JAR, GLUE_JOBS, Access, GlueJob, GlueSecurity, JobSpec
from stacks.nag import NIST, acknowledge
from stacks.queries import AthenaWorkgroup
from stacks.storage import SecureBucket, expiry_rules, lifecycle_rules

#: Key prefixes of the curated bucket.
CURATED_PREFIX = "curated/"
REPORTS_PREFIX = "reports/"
GLUE_TEMP_PREFIX = "glue-temp/"


def error_archives(topology: Topology) -> tuple[str, str, tuple[str, ...]]:
    """(bucket, common prefix, channels) of the invalid and error archives, which the errors
    table reads as one, partitioned by channel: ``<prefix><channel>/year=.../``."""
    channels = (*topology.channels_of("invalid"), *topology.channels_of("error"))
    layout = set()
    for channel in channels:
        archive = channel.archive or ""
        if not archive.endswith(f"/{channel.name}/"):
            raise ValueError(f"channel {channel.name}: archive {archive!r} is not <prefix>{channel.name}/")
        layout.add((archive_bucket_of(channel, topology), archive[: -len(channel.name) - 1]))
    if len(layout) != 1:
        raise ValueError(f"the invalid and error archives must share a bucket and prefix, found {sorted(layout)}")
    bucket, prefix = layout.pop()
    return bucket, prefix, tuple(channel.name for channel in channels)


class Analytics(Construct):
    """Curated and query-results buckets, the catalog, the Glue jobs and the Athena workgroup."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: EnvironmentConfig,
        deployment: Deployment,
        buckets: Mapping[str, s3.IBucket],
        access_logs: s3.IBucket,
    ) -> None:
        super().__init__(scope, construct_id)
        topology = deployment.topology
        removal = removal_policy(config)
        prefix = f"{deployment.prefix}-{config.name}"
        settings = config.analytics

        self.key_alias = f"alias/{prefix}-analytics"
        self.data_key = DataKey(
            self,
            "DataKey",
            alias=self.key_alias,
            description=f"RDSS {config.name}: curated data, query results, Glue logs and bookmarks",
            removal=removal,
        )
        key = self.data_key.key
        self.data_key.allow_cloudwatch_logs()

        self.curated = SecureBucket(
            self,
            "CuratedBucket",
            key=key,
            access_logs=access_logs,
            removal=removal,
            auto_delete=config.auto_delete_objects,
            # A compaction run rewrites partitions: a bad run must not destroy the good data.
            versioned=True,
            lifecycle_rules=[
                *lifecycle_rules(config.lifecycle("curated")),
                s3.LifecycleRule(id="ExpireReplacedVersions", noncurrent_version_expiration=cdk.Duration.days(30)),
                *expiry_rules(
                    prefix=GLUE_TEMP_PREFIX,
                    expire_after_days=config.retention.scratch_days,
                    rule_id="ExpireGlueTemporaryFiles",
                ),
            ],
        ).bucket
        self.results = SecureBucket(
            self,
            "QueryResultsBucket",
            key=key,
            access_logs=access_logs,
            removal=removal,
            auto_delete=config.auto_delete_objects,
            unversioned_reason=(
                "Athena writes each query's results once, under the query's own id, and they expire after "
                f"{config.retention.athena_results_days} days; they can be produced again by running the query"
            ),
            lifecycle_rules=expiry_rules(expire_after_days=config.retention.athena_results_days),
        ).bucket

        (input_channel,) = topology.channels_of("input")
        audit_name = archive_bucket_of(input_channel, topology)
        audit = Access(audit_name, buckets[audit_name], input_channel.archive or "")
        errors_name, errors_prefix, error_channels = error_archives(topology)
        errors = Access(errors_name, buckets[errors_name], errors_prefix)
        curated = Access("curated", self.curated, CURATED_PREFIX)
        reports = Access("curated", self.curated, REPORTS_PREFIX)
        temp = Access("curated", self.curated, GLUE_TEMP_PREFIX)

        self.database_name = f"{deployment.prefix}_{config.name}".replace("-", "_")
        self.catalog = Catalog(
            self,
            "Catalog",
            database_name=self.database_name,
            audit=TableLocation(audit.bucket.bucket_name, audit.prefix),
            errors=TableLocation(errors.bucket.bucket_name, errors.prefix),
            error_channels=error_channels,
            curated=TableLocation(self.curated.bucket_name, CURATED_PREFIX),
            reports=TableLocation(self.curated.bucket_name, REPORTS_PREFIX),
            first_year=settings.first_year,
        )

        security = GlueSecurity(self, "GlueSecurity", name=f"{prefix}-glue", key=key)
        specs = (
            JobSpec(
                name="audit-compaction",
                script=GLUE_JOBS / "audit_compaction.py",
                description="Compacts the raw audit archive into curated Parquet (messages, rejects, duplicates)",
                # the errors archive says which records the broker refused: rejections, not duplicates
                arguments={"--input": audit.url, "--output": curated.url, "--errors": errors.url},
                reads=(audit, errors),
                writes=(curated,),
                jars=(GLUE_JAR,),
            ),
            JobSpec(
                name="audit-report",
                script=GLUE_JOBS / "audit_report.py",
                description="Summarises the curated messages and the error archives into reports",
                arguments={"--input": curated.url, "--output": reports.url, "--errors": errors.url},
                reads=(curated, errors),
                writes=(reports,),
                jars=(GLUE_JAR,),  # the archive entry reader
            ),
        )
        self.jobs = {
            spec.name: GlueJob(
                self,
                "".join(part.capitalize() for part in spec.name.split("-")) + "Job",
                spec=spec,
                job_name=f"{prefix}-{spec.name}",
                security=security,
                temp=temp,
                key_name=self.key_alias,
                workers=settings.glue_workers,
                timeout_minutes=settings.glue_timeout_minutes,
            )
            for spec in specs
        }
        for job in self.jobs.values():
            acknowledge(
                job.role,
                f"{NIST}-IAMNoInlinePolicy",
                f"the role of the Glue job {job.job.name}: its policy holds the grants of exactly this role "
                "(created, changed and deleted with it); a managed policy would only let it be attached elsewhere",
            )
            # the job references its role (Fn::GetAtt); an explicit DependsOn repeats it
            drop_referenced_dependency(job.job, job.role)
        if settings.compaction_schedule:
            self._schedule(prefix, settings.compaction_schedule)

        self.workgroup = AthenaWorkgroup(
            self,
            "Athena",
            name=prefix,
            database_name=self.database_name,
            results=self.results,
            key=key,
            bytes_scanned_cutoff=settings.bytes_scanned_cutoff_mib * 1024 * 1024,
            recursive_delete=not config.retains_data,
        )
        for query in self.workgroup.queries:
            query.node.add_dependency(self.catalog.database)

    def _schedule(self, prefix: str, schedule: str) -> None:
        """Compaction on a schedule, the report after each successful compaction."""
        compaction = self.jobs["audit-compaction"].job
        report = self.jobs["audit-report"].job
        scheduled = glue.CfnTrigger(
            self,
            "CompactionSchedule",
            name=f"{prefix}-audit-compaction",
            type="SCHEDULED",
            schedule=schedule,
            start_on_creation=True,
            actions=[glue.CfnTrigger.ActionProperty(job_name=compaction.ref)],
        )
        after = glue.CfnTrigger(
            self,
            "ReportAfterCompaction",
            name=f"{prefix}-audit-report",
            type="CONDITIONAL",
            start_on_creation=True,
            predicate=glue.CfnTrigger.PredicateProperty(
                conditions=[
                    glue.CfnTrigger.ConditionProperty(
                        job_name=compaction.ref, logical_operator="EQUALS", state="SUCCEEDED"
                    )
                ]
            ),
            actions=[glue.CfnTrigger.ActionProperty(job_name=report.ref)],
        )
        after.node.add_dependency(scheduled)
