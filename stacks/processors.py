"""A processor of the topology as a Lambda function with everything it touches wired in.

Its role is granted exactly what its :class:`~rdss.deployment.topology.Processor` entry lists - read on
its source channels (through their event source mappings), write on the channels it sends to,
read/write on its tables and buckets, PutRecordBatch on the delivery streams of the channels
it archives (and put on their archive prefixes, for an entry too large for one Firehose
record) - through the resources' ``grant_*`` methods, and nothing else: no managed policies,
no hand-written statements.
"""

from __future__ import annotations

from collections.abc import Mapping

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kinesis as kinesis
from aws_cdk import aws_kinesisfirehose as firehose
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from rdss.deployment.topology import RDSS, Processor, Topology
from rdss.observability.powertools import NAMESPACE
from stacks.bundling import PYTHON_312_ARM64, PYTHON_312_X86_64, handler_location, processor_code
from stacks.config import EnvironmentConfig, log_retention, removal_policy
from stacks.dependencies import drop_referenced_dependency
from stacks.monitoring import Monitoring
from stacks.nag import NIST, SERVERLESS, Acknowledgements, acknowledge, iam5, resource_wildcard, skip_checkov

#: The functions' X-Ray tracing by the ``tracing`` setting (rdss.deployment.settings.TRACING_MODES):
#: Lambda samples actively traced invocations by its own fixed rule.
TRACING = {
    "active": lambda_.Tracing.ACTIVE,
    "pass-through": lambda_.Tracing.PASS_THROUGH,
    "disabled": lambda_.Tracing.DISABLED,
}

#: Why the functions run outside a VPC (cdk-nag NIST LambdaInsideVPC, checkov CKV_AWS_117).
NO_VPC_REASON = (
    "it serves no network endpoint and reaches no private resource: it calls only AWS APIs (Kinesis, DynamoDB, "
    "S3, SQS, Firehose, X-Ray), over TLS and authorised by its role; a VPC would add NAT gateways or an interface "
    "endpoint per service and zone, and isolate nothing that IAM does not already"
)

#: Why the functions stay on Python 3.12 although cdk-nag asks for the newest runtime.
RUNTIME_REASON = (
    "Python 3.12 on purpose: the asset's wheels (lambdas/requirements.txt) are resolved for cp312 and the handlers "
    "are tested at that version; moving runtime is a deliberate change of stacks.bundling.PYTHON_312_ARM64"
)


class ProcessorFunction(Construct):
    """One processor: function, role, log group, trigger, on-failure queue and alarms."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        processor: Processor,
        function_name: str,
        environment: Mapping[str, str],
        streams: Mapping[str, kinesis.IStream],
        tables: Mapping[str, dynamodb.ITable],
        buckets: Mapping[str, s3.IBucket],
        key: kms.IKey,
        key_name: str,
        config: EnvironmentConfig,
        monitoring: Monitoring,
        delivery_streams: Mapping[str, firehose.IDeliveryStream] | None = None,
        topology: Topology = RDSS,
    ) -> None:
        super().__init__(scope, construct_id)
        if not processor.sources and processor.schedule is None:
            raise ValueError(f"processor {processor.name} has neither a source channel nor a schedule")
        self.processor = processor
        settings = config.function(processor.name)
        platform = PYTHON_312_X86_64 if config.lambda_architecture == "x86_64" else PYTHON_312_ARM64
        _, handler = handler_location(processor.handler)

        self.log_group = logs.LogGroup(
            self,
            "Logs",
            log_group_name=f"/aws/lambda/{function_name}",
            retention=log_retention(config),
            encryption_key=key,
            removal_policy=removal_policy(config),
        )
        # An explicit role, so the function gets no AWSLambdaBasicExecutionRole: it may write to
        # its own log group and nothing else the grants below do not name.
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"The {processor.name} processor: {processor.description}",
        )
        self.log_group.grant_write(self.role)

        # Batches the event source mapping gives up on (and, for a scheduled processor, failed
        # asynchronous invocations) are parked here, encrypted, for an operator to replay.
        on_failure_name = f"{function_name}-on-failure"
        self.on_failure = sqs.Queue(
            self,
            "OnFailure",
            queue_name=on_failure_name,
            encryption=sqs.QueueEncryption.KMS,
            encryption_master_key=key,
            data_key_reuse=cdk.Duration.hours(1),
            enforce_ssl=True,
            retention_period=cdk.Duration.days(config.retention.dlq_days),
            removal_policy=removal_policy(config),
        )

        self.function = lambda_.Function(
            self,
            "Function",
            function_name=function_name,
            description=processor.description,
            runtime=platform.runtime,
            architecture=platform.architecture,
            handler=handler,
            code=processor_code(processor.handler, platform),
            role=self.role,
            memory_size=settings.memory_mb,
            timeout=cdk.Duration.seconds(settings.timeout_seconds),
            tracing=TRACING[config.tracing],
            log_group=self.log_group,
            reserved_concurrent_executions=settings.reserved_concurrency,
            # The variables name resources only, but they are encrypted with the stack's key
            # rather than Lambda's own, like every other piece of the deployment's state.
            environment_encryption=key,
            environment={
                **environment,
                "POWERTOOLS_SERVICE_NAME": processor.name,
                "POWERTOOLS_METRICS_NAMESPACE": NAMESPACE,
                "POWERTOOLS_LOG_LEVEL": settings.log_level,
                "RDSS_SEQUENCE_TIMEOUT_SECONDS": str(config.sequence_timeout_seconds),
                # failed attempts at one record before it is moved to error (rdss.processors.attempts)
                "RDSS_RECORD_ATTEMPTS": str(config.event_source.record_attempts),
            },
            # Only a scheduled processor is invoked asynchronously; its failures go to the queue.
            dead_letter_queue=self.on_failure if processor.schedule else None,
        )

        acks = Acknowledgements(self.role, f"role of the {processor.name} processor ({function_name})")
        for channel in processor.sends_to:
            streams[channel].grant_write(self.role)
        for table in processor.reads_tables:
            tables[table].grant_read_data(self.role)
        for table in processor.writes_tables:
            tables[table].grant_write_data(self.role)
        for bucket in processor.reads_buckets:
            buckets[bucket].grant_read(self.role)
            acks.bucket_read(buckets[bucket], bucket, "object keys name messages and parts, known only at run time")
        for bucket in processor.writes_buckets:
            buckets[bucket].grant_write(self.role)
            acks.bucket_write(buckets[bucket], bucket, "object keys name messages and parts, known only at run time")
        for channel in processor.archives:
            (delivery_streams or {})[channel].grant_put_records(self.role)
            # an entry too large for one Firehose record is stored as an object of its own, named
            # as Firehose names objects, under the channel's archive prefix and nowhere else
            bucket, prefix = topology.archive_bucket(channel), topology.channel(channel).archive
            buckets[bucket].grant_put(self.role, f"{prefix}*")
            acks.add(
                resource_wildcard(buckets[bucket], buckets[bucket].arn_for_objects(f"{prefix}*")),
                f"{prefix}* in the {bucket} bucket: PutObject only, of an archive entry too large for one Firehose "
                "record, under a key named by delivery hour, time and a UUID",
            )
            acks.add(
                iam5("Action::s3:Abort*"),
                f"grant_put on the {bucket} bucket's {prefix}: AbortMultipartUpload of its own uploads only",
            )
        # Every processor encrypts: at least the messages it parks on its on-failure queue.
        acks.key_use(key_name)
        acks.add(
            iam5("Resource::*"),
            "xray:PutTraceSegments and xray:PutTelemetryRecords (active tracing) support no resource-level permissions",
        )
        acks.apply()

        events_ = config.event_source
        # The archiver batches for large gzip members (config.archive); the others for latency.
        batch_size, window = events_.batch_size, events_.max_batching_window_seconds
        if processor.archives:
            batch_size, window = config.archive.batch_size, config.archive.max_batching_window_seconds
        for source in processor.sources:
            # The mapping grants the role read on the source stream (and decrypt on its key).
            self.function.add_event_source(
                sources.KinesisEventSource(
                    streams[source],
                    starting_position=lambda_.StartingPosition.TRIM_HORIZON,
                    batch_size=batch_size,
                    max_batching_window=cdk.Duration.seconds(window),
                    parallelization_factor=events_.parallelization_factor,
                    # The adaptor turns nacks into batchItemFailures: only those records retry.
                    report_batch_item_failures=True,
                    bisect_batch_on_error=True,
                    retry_attempts=events_.retry_attempts,
                    max_record_age=cdk.Duration.hours(events_.max_record_age_hours),
                    on_failure=sources.SqsDlq(self.on_failure),
                )
            )
        if processor.schedule is not None:
            self.schedule = events.Rule(
                self,
                "Schedule",
                description=f"Runs the {processor.name} processor",
                schedule=events.Schedule.expression(processor.schedule),
            )
            self.schedule.add_target(
                targets.LambdaFunction(
                    self.function,
                    dead_letter_queue=self.on_failure,
                    retry_attempts=2,
                    max_event_age=cdk.Duration.hours(1),
                )
            )

        # A scheduled processor's queue is its function's dead-letter queue, which cdk-nag
        # recognises; an event source mapping's on-failure destination it does not.
        rules = [f"{SERVERLESS}-SQSRedrivePolicy"] + (["AwsSolutions-SQS3"] if processor.schedule is None else [])
        for rule in rules:
            acknowledge(
                self.on_failure,
                rule,
                f"{on_failure_name} is itself the dead-letter destination of the {processor.name} processor; "
                "a queue behind it would only move the parked messages further from the operator",
            )
        for rule in ("AwsSolutions-L1", f"{SERVERLESS}-LambdaLatestVersion"):
            acknowledge(self.function, rule, f"{function_name}: {RUNTIME_REASON}")
        if processor.schedule is None:
            synchronous = (
                f"{function_name} is only invoked synchronously, by its Kinesis event source mapping, and a "
                f"dead-letter queue serves asynchronous invocations only; batches it fails go to the mapping's "
                f"on-failure destination, {on_failure_name}"
            )
            for rule in (f"{SERVERLESS}-LambdaDLQ", f"{NIST}-LambdaDLQ"):
                acknowledge(self.function, rule, synchronous)
            skip_checkov(self.function, "CKV_AWS_116", synchronous)
        acknowledge(self.function, f"{NIST}-LambdaInsideVPC", f"{function_name} runs outside a VPC: {NO_VPC_REASON}")
        if config.tracing != "active":
            acknowledge(
                self.function,
                f"{SERVERLESS}-LambdaTracing",
                f"{function_name}: X-Ray tracing is {config.tracing} by the environment's tracing setting (cdk.json), "
                "an operator's choice of cost against traces; active is the default",
            )
        skip_checkov(self.function, "CKV_AWS_117", f"{function_name} runs outside a VPC: {NO_VPC_REASON}")
        acknowledge(
            self.role,
            f"{NIST}-IAMNoInlinePolicy",
            f"the role of {function_name}: its policy holds the grants of exactly this role (created, changed "
            "and deleted with it), which is what CDK's grant_* methods write; a managed policy would only let it be "
            "attached to another principal",
        )
        # The function already references its role (Fn::GetAtt); an explicit DependsOn repeats it.
        drop_referenced_dependency(self.function, self.role)

        self._alarms(processor, monitoring, config)

    def _alarms(self, processor: Processor, monitoring: Monitoring, config: EnvironmentConfig) -> None:
        thresholds = config.alarms
        five_minutes = cdk.Duration.minutes(5)
        name = processor.name
        if processor.sources:
            monitoring.alarm(
                self,
                "IteratorAgeAlarm",
                name=f"{name}-iterator-age",
                metric=self.iterator_age(),
                threshold=thresholds.iterator_age_seconds * 1000,
                description=f"The {name} processor is falling behind its channel(s) {', '.join(processor.sources)}",
            )
        monitoring.alarm(
            self,
            "OnFailureAlarm",
            name=f"{name}-on-failure-depth",
            metric=self.on_failure.metric_approximate_number_of_messages_visible(
                period=five_minutes, statistic="Maximum"
            ),
            threshold=thresholds.dlq_depth,
            description=f"The {name} processor gave up on messages: they wait in {self.on_failure.queue_name}",
        )
        monitoring.alarm(
            self,
            "ErrorsAlarm",
            name=f"{name}-errors",
            metric=self.function.metric_errors(period=five_minutes, statistic="Sum"),
            threshold=thresholds.lambda_errors,
            description=f"The {name} function failed",
        )
        monitoring.alarm(
            self,
            "ThrottlesAlarm",
            name=f"{name}-throttles",
            metric=self.function.metric_throttles(period=five_minutes, statistic="Sum"),
            threshold=thresholds.lambda_throttles,
            description=f"The {name} function was throttled",
        )

    def iterator_age(self) -> cloudwatch.Metric:
        return self.function.metric("IteratorAge", period=cdk.Duration.minutes(5), statistic="Maximum")

    def widgets(self) -> list[cloudwatch.IWidget]:
        """The processor's row of the dashboard."""
        name = self.processor.name
        widgets: list[cloudwatch.IWidget] = [
            cloudwatch.GraphWidget(
                title=f"{name}: invocations, errors, throttles",
                left=[
                    self.function.metric_invocations(statistic="Sum"),
                    self.function.metric_errors(statistic="Sum"),
                    self.function.metric_throttles(statistic="Sum"),
                ],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title=f"{name}: duration",
                left=[
                    self.function.metric_duration(statistic="p99"),
                    self.function.metric_duration(statistic="Average"),
                ],
                width=8,
            ),
        ]
        if self.processor.sources:
            widgets.append(
                cloudwatch.GraphWidget(
                    title=f"{name}: iterator age and parked batches",
                    left=[self.iterator_age()],
                    right=[self.on_failure.metric_approximate_number_of_messages_visible(statistic="Maximum")],
                    width=8,
                )
            )
        else:
            widgets.append(
                cloudwatch.GraphWidget(
                    title=f"{name}: parked invocations",
                    left=[self.on_failure.metric_approximate_number_of_messages_visible(statistic="Maximum")],
                    width=8,
                )
            )
        return widgets
