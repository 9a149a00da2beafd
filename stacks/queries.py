"""Athena: the analysts' workgroup and the named queries operators ask most often.

The workgroup enforces its configuration (results encrypted with the analytics key, in the
results bucket; a scan limit per query), so a client cannot send results elsewhere or
unencrypted.
"""

from __future__ import annotations

from aws_cdk import aws_athena as athena
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from rdss.analytics.queries import named_queries


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
