"""Glue jobs: the PySpark scripts of ``glue_jobs/``, uploaded as assets, run with bookmarks.

Each job has its own role, granted read on what it reads and write on what it writes, by key
prefix. The jobs run under a security configuration that encrypts what they write to S3,
their CloudWatch logs and their bookmarks with the analytics key.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_glue as glue
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_assets as assets
from constructs import Construct

from stacks.nag import Acknowledgements, iam5, resource_wildcard

REPO = Path(__file__).resolve().parent.parent
GLUE_JOBS = REPO / "glue_jobs"
#: The modules every script imports (``--extra-py-files``): the table definitions and the
#: shared runtime (session, arguments, entry point).
SHARED_MODULES = (GLUE_JOBS / "schema.py", GLUE_JOBS / "runtime.py")
#: The jobs' Java half (glue_jobs/java/, built by ``make setup``): ``--extra-jars``.
GLUE_JAR = GLUE_JOBS / "lib" / "rdss-glue.jar"
#: The current Glue release (Spark 3.5, Python 3.11).
GLUE_VERSION = "5.1"


@dataclass(frozen=True)
class Access:
    """Objects under ``prefix`` of one bucket (``name`` is its topology/analytics name)."""

    name: str
    bucket: s3.IBucket
    prefix: str

    @property
    def url(self) -> str:
        return f"s3://{self.bucket.bucket_name}/{self.prefix}"

    @property
    def objects(self) -> str:
        return f"{self.prefix}*"

    @property
    def label(self) -> str:
        """``<name> bucket's <prefix>``: for people (acknowledgements), not for AWS."""
        return f"the {self.name} bucket's {self.prefix}"


@dataclass(frozen=True)
class JobSpec:
    """One Glue job: its script, its arguments and what it reads and writes."""

    name: str
    script: Path
    description: str
    arguments: Mapping[str, str]
    reads: Sequence[Access] = ()
    writes: Sequence[Access] = ()
    #: Jars the script needs on Spark's classpath (``--extra-jars``).
    jars: Sequence[Path] = ()
    extra: Mapping[str, str] = field(default_factory=dict)


class GlueSecurity(Construct):
    """The security configuration every job runs under (SSE-KMS output, encrypted logs and bookmarks)."""

    def __init__(self, scope: Construct, construct_id: str, *, name: str, key: kms.IKey) -> None:
        super().__init__(scope, construct_id)
        self.name = name
        self.key = key
        self.configuration = glue.CfnSecurityConfiguration(
            self,
            "Configuration",
            name=name,
            encryption_configuration=glue.CfnSecurityConfiguration.EncryptionConfigurationProperty(
                s3_encryptions=[
                    glue.CfnSecurityConfiguration.S3EncryptionProperty(
                        s3_encryption_mode="SSE-KMS", kms_key_arn=key.key_arn
                    )
                ],
                cloud_watch_encryption=glue.CfnSecurityConfiguration.CloudWatchEncryptionProperty(
                    cloud_watch_encryption_mode="SSE-KMS", kms_key_arn=key.key_arn
                ),
                job_bookmarks_encryption=glue.CfnSecurityConfiguration.JobBookmarksEncryptionProperty(
                    job_bookmarks_encryption_mode="CSE-KMS", kms_key_arn=key.key_arn
                ),
            ),
        )


class GlueJob(Construct):
    """A Spark job (``glueetl``) of one ``glue_jobs/`` script, with its own least-privilege role."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        spec: JobSpec,
        job_name: str,
        security: GlueSecurity,
        temp: Access,
        key_name: str,
        workers: int,
        timeout_minutes: int,
    ) -> None:
        super().__init__(scope, construct_id)
        if not spec.script.is_file():
            raise FileNotFoundError(f"Glue job {spec.name}: script {spec.script} does not exist")
        for jar in spec.jars:
            if not jar.is_file():
                raise FileNotFoundError(f"Glue job {spec.name}: {jar} does not exist; build it with `make setup`")
        self.spec = spec
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("glue.amazonaws.com"),
            description=f"The {job_name} Glue job: {spec.description}",
        )
        acks = Acknowledgements(self.role, f"role of the {job_name} Glue job")

        script = assets.Asset(self, "Script", path=str(spec.script))
        modules = [assets.Asset(self, f"{path.stem.capitalize()}Module", path=str(path)) for path in SHARED_MODULES]
        jars = [assets.Asset(self, f"Jar{number}", path=str(jar)) for number, jar in enumerate(spec.jars)]
        for asset in (script, *modules, *jars):
            asset.grant_read(self.role)
            acks.add(
                iam5("Action::s3:GetObject*"),
                "grant_read on the CDK asset bucket: the script, the shared modules and jars",
            )
            acks.add(iam5("Action::s3:GetBucket*"), "grant_read on the CDK asset bucket: its location and attributes")
            acks.add(iam5("Action::s3:List*"), "grant_read on the CDK asset bucket: listing the asset keys")
            acks.add(
                resource_wildcard(self, asset.bucket.arn_for_objects("*")),
                "the CDK asset bucket's objects: asset keys are content hashes known only at deployment",
            )

        for access in spec.reads:
            access.bucket.grant_read(self.role, access.objects)
            acks.bucket_read(access.bucket, access.name, f"the job reads {access.label}", access.objects)
        for access in (*spec.writes, temp):
            access.bucket.grant_read_write(self.role, access.objects)
            purpose = f"the job reads back and writes {access.label} (Spark picks the object names)"
            acks.bucket_read(access.bucket, access.name, purpose, access.objects)
            acks.bucket_write(access.bucket, access.name, purpose, access.objects)

        # The security configuration encrypts output, logs and bookmarks with this key.
        security.key.grant_encrypt_decrypt(self.role)
        acks.key_use(key_name)
        # Glue names its log groups after the security configuration and role
        # (/aws-glue/jobs/<configuration>-role/<role>/output ...) and creates them at the first
        # run, so no grant_* of an existing log group can cover them: this is AWS's documented
        # statement for encrypted Glue logs, limited to this account's /aws-glue/jobs/ groups.
        stack = cdk.Stack.of(self)
        glue_logs = stack.format_arn(
            service="logs",
            resource="log-group",
            resource_name="/aws-glue/jobs/*",
            arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
        )
        iam.Grant.add_to_principal(
            grantee=self.role,
            actions=["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents", "logs:AssociateKmsKey"],
            resource_arns=[glue_logs],
        )
        acks.add(
            resource_wildcard(self, glue_logs),
            "Glue's own log groups under /aws-glue/jobs/, named after the security configuration and the role at "
            "run time; nothing outside that prefix",
        )
        cloudwatch.Metric.grant_put_metric_data(self.role)
        acks.add(
            iam5("Resource::*"), "cloudwatch:PutMetricData (--enable-metrics) supports no resource-level permissions"
        )
        acks.apply()

        self.job = glue.CfnJob(
            self,
            "Job",
            name=job_name,
            description=spec.description,
            role=self.role.role_arn,
            command=glue.CfnJob.JobCommandProperty(
                name="glueetl", python_version="3", script_location=script.s3_object_url
            ),
            glue_version=GLUE_VERSION,
            worker_type="G.1X",
            number_of_workers=workers,
            timeout=timeout_minutes,
            max_retries=0,
            execution_property=glue.CfnJob.ExecutionPropertyProperty(max_concurrent_runs=1),
            security_configuration=security.name,
            default_arguments={
                **spec.arguments,
                "--extra-py-files": ",".join(module.s3_object_url for module in modules),
                **({"--extra-jars": ",".join(jar.s3_object_url for jar in jars)} if jars else {}),
                "--job-bookmark-option": "job-bookmark-enable",
                "--job-language": "python",
                "--TempDir": temp.url,
                "--enable-metrics": "true",
                "--enable-continuous-cloudwatch-log": "true",
                **spec.extra,
            },
        )
        self.job.node.add_dependency(security.configuration)
        # The role's policy must exist before the job can run with it.
        self.job.node.add_dependency(self.role)
