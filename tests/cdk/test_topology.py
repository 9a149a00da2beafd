"""The topology description (rdss.deployment.topology.RDSS) and the template agree, in every environment."""

from __future__ import annotations

import pytest
from aws_cdk.assertions import Match

from rdss.deployment.topology import RDSS, Deployment, Processor
from stacks.bundling import handler_location
from stacks.nag import flatten
from stacks.state import CLAIMS_TABLE
from tests.cdk.conftest import Synthesized
from tests.cdk.support import granted, references, role_statements


def deployment(synthesized: Synthesized) -> Deployment:
    return Deployment(synthesized.config.name, RDSS)


def stream_id(synthesized: Synthesized, channel: str) -> str:
    return synthesized.logical_id(synthesized.stack.messaging.channels.stream(channel))


def role_id(synthesized: Synthesized, processor: str) -> str:
    return synthesized.logical_id(synthesized.stack.messaging.processors[processor].role)


def test_every_channel_is_an_encrypted_stream_named_by_the_deployment(synthesized: Synthesized) -> None:
    names = deployment(synthesized)
    streams = synthesized.resources("AWS::Kinesis::Stream")
    assert len(streams) == len(RDSS.channels)
    for channel in RDSS.channels:
        synthesized.template.has_resource_properties(
            "AWS::Kinesis::Stream",
            {
                "Name": names.stream(channel.name),
                "RetentionPeriodHours": synthesized.config.stream_retention_hours,
                "StreamEncryption": {"EncryptionType": "KMS", "KeyId": Match.any_value()},
            },
        )


def test_every_route_has_its_stream_and_a_processor_allowed_to_send_to_it(synthesized: Synthesized) -> None:
    template = synthesized.json
    for route in RDSS.routes:
        stream = stream_id(synthesized, route.channel)
        assert stream in template["Resources"], route
        senders = [p.name for p in RDSS.processors if route.channel in p.sends_to]
        assert senders, f"no processor sends to {route.channel}"
        for sender in senders:
            assert stream in granted(template, role_id(synthesized, sender), "kinesis:PutRecords"), (route, sender)


@pytest.mark.parametrize("processor", RDSS.processors, ids=lambda p: p.name)
def test_each_processor_is_granted_exactly_its_topology_entry(synthesized: Synthesized, processor: Processor) -> None:
    template = synthesized.json
    role = role_id(synthesized, processor.name)
    streams = {stream_id(synthesized, c.name): c.name for c in RDSS.channels}
    messaging = synthesized.stack.messaging
    tables = {synthesized.logical_id(t): name for name, t in messaging.state.tables.items()}
    buckets = {synthesized.logical_id(b): name for name, b in messaging.buckets.items()}

    def named(ids: set[str], kind: dict[str, str]) -> set[str]:
        return {kind[i] for i in ids if i in kind}

    delivery = {synthesized.logical_id(a.delivery_stream): a.channel.name for a in messaging.archives}
    assert named(granted(template, role, "kinesis:PutRecords"), streams) == set(processor.sends_to)
    assert named(granted(template, role, "kinesis:GetRecords"), streams) == set(processor.sources)
    assert named(granted(template, role, "dynamodb:GetItem"), tables) == set(processor.reads_tables)
    assert named(granted(template, role, "dynamodb:PutItem"), tables) == set(processor.writes_tables)
    assert named(granted(template, role, "s3:GetObject*"), buckets) == set(processor.reads_buckets)
    archive_buckets = {RDSS.archive_bucket(channel) for channel in processor.archives}
    assert named(granted(template, role, "s3:PutObject"), buckets) == set(processor.writes_buckets) | archive_buckets
    assert named(granted(template, role, "firehose:PutRecordBatch"), delivery) == set(processor.archives)
    assert named(granted(template, role, "s3:DeleteObject*"), buckets) == set(processor.writes_buckets)


def test_the_archiver_may_put_only_under_the_archive_prefixes(synthesized: Synthesized) -> None:
    """An entry too large for one Firehose record is its own object: PutObject on the channel's
    archive prefix, nothing else in the bucket, and neither read nor delete."""
    archiver = RDSS.processor("archiver")
    role = role_id(synthesized, "archiver")
    puts = [
        statement
        for statement in role_statements(synthesized.json, role)
        if any(action.startswith("s3:") for action in statement.actions)
    ]
    assert all(
        statement.actions
        <= {
            "s3:PutObject",
            "s3:PutObjectLegalHold",
            "s3:PutObjectRetention",
            "s3:PutObjectTagging",
            "s3:PutObjectVersionTagging",
            "s3:Abort*",
        }
        for statement in puts
    ), [statement.actions for statement in puts]
    objects = {flatten(resource) for statement in puts for resource in statement.resources}
    expected = {
        f"<{messaging_bucket_id(synthesized, RDSS.archive_bucket(channel))}.Arn>/{RDSS.channel(channel).archive}*"
        for channel in archiver.archives
    }
    assert objects == expected


@pytest.mark.parametrize("processor", RDSS.processors, ids=lambda p: p.name)
def test_each_processor_function_runs_its_handler_on_python_312_arm64(
    synthesized: Synthesized, processor: Processor
) -> None:
    names = deployment(synthesized)
    variables = names.environment_variables()
    function = synthesized.stack.messaging.processors[processor.name].function
    properties = synthesized.json["Resources"][synthesized.logical_id(function)]["Properties"]
    assert properties["Handler"] == handler_location(processor.handler)[1] == "handler.handler"
    assert properties["Runtime"] == "python3.12"
    assert properties["Architectures"] == ["arm64"]
    assert properties["TracingConfig"] == {"Mode": "Active"}
    assert "ZipFile" not in properties["Code"]
    assert "S3Key" in properties["Code"]
    environment = properties["Environment"]["Variables"]
    for name, value in variables.items():
        if name.startswith("RDSS_BUCKET_"):
            # bucket names are CloudFormation's: the variable refers to the bucket resource
            bucket = messaging_bucket_id(synthesized, name.removeprefix("RDSS_BUCKET_").lower())
            assert environment[name] == {"Ref": bucket}
        else:
            assert environment[name] == value, name
    assert environment["POWERTOOLS_SERVICE_NAME"] == processor.name
    assert environment["RDSS_SEQUENCE_TIMEOUT_SECONDS"] == str(synthesized.config.sequence_timeout_seconds)
    assert environment["RDSS_RECORD_ATTEMPTS"] == str(synthesized.config.event_source.record_attempts)


def messaging_bucket_id(synthesized: Synthesized, name: str) -> str:
    return synthesized.logical_id(synthesized.stack.messaging.buckets[name])


@pytest.mark.parametrize("processor", [p for p in RDSS.processors if p.sources], ids=lambda p: p.name)
def test_event_source_mappings_fail_safely(synthesized: Synthesized, processor: Processor) -> None:
    built = synthesized.stack.messaging.processors[processor.name]
    settings = synthesized.config.event_source
    mappings = [
        m["Properties"]
        for m in synthesized.resources("AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]["FunctionName"] == {"Ref": synthesized.logical_id(built.function)}
    ]
    assert sorted(next(iter(references(m["EventSourceArn"]))) for m in mappings) == sorted(
        stream_id(synthesized, source) for source in processor.sources
    )
    # the archiver batches for large gzip members, the others for latency (cdk.json)
    batching = synthesized.config.archive if processor.archives else settings
    for mapping in mappings:
        assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
        assert mapping["BisectBatchOnFunctionError"] is True
        assert mapping["MaximumRetryAttempts"] == settings.retry_attempts
        assert 0 <= mapping["MaximumRetryAttempts"] <= 10
        assert mapping["MaximumRecordAgeInSeconds"] == settings.max_record_age_hours * 3600
        assert mapping["StartingPosition"] == "TRIM_HORIZON"
        assert mapping["BatchSize"] == batching.batch_size
        assert mapping["MaximumBatchingWindowInSeconds"] == batching.max_batching_window_seconds
        assert references(mapping["DestinationConfig"]["OnFailure"]["Destination"]) == {
            synthesized.logical_id(built.on_failure)
        }
    queue = synthesized.json["Resources"][synthesized.logical_id(built.on_failure)]["Properties"]
    assert "KmsMasterKeyId" in queue


@pytest.mark.parametrize("processor", [p for p in RDSS.processors if p.schedule], ids=lambda p: p.name)
def test_scheduled_processors_run_on_their_schedule(synthesized: Synthesized, processor: Processor) -> None:
    built = synthesized.stack.messaging.processors[processor.name]
    function = synthesized.logical_id(built.function)
    rules = [
        r["Properties"]
        for r in synthesized.resources("AWS::Events::Rule").values()
        if any(references(t["Arn"]) == {function} for t in r["Properties"]["Targets"])
    ]
    assert [r["ScheduleExpression"] for r in rules] == [processor.schedule]
    (target,) = rules[0]["Targets"]
    assert references(target["DeadLetterConfig"]["Arn"]) == {synthesized.logical_id(built.on_failure)}
    assert target["RetryPolicy"]["MaximumRetryAttempts"] == 2


def test_every_archived_channel_has_a_direct_put_firehose_to_its_bucket(synthesized: Synthesized) -> None:
    from rdss.archive.entries import FIREHOSE_ERROR_EXPRESSION, FIREHOSE_HOUR_EXPRESSION, OBJECT_EXTENSION

    names = deployment(synthesized)
    archived = RDSS.archived()
    streams = synthesized.resources("AWS::KinesisFirehose::DeliveryStream")
    assert len(streams) == len(archived)
    for properties in (s["Properties"] for s in streams.values()):
        # written by the archiver (PutRecordBatch), not read from a stream
        assert properties["DeliveryStreamType"] == "DirectPut"
        assert "KinesisStreamSourceConfiguration" not in properties
        # gzip members already: no compression, no delimiter, no processor of Firehose's own
        destination = properties["ExtendedS3DestinationConfiguration"]
        assert "ProcessingConfiguration" not in destination or not destination["ProcessingConfiguration"]["Enabled"]
    for channel in archived:
        bucket = messaging_bucket_id(synthesized, RDSS.archive_bucket(channel.name))
        synthesized.template.has_resource_properties(
            "AWS::KinesisFirehose::DeliveryStream",
            {
                "DeliveryStreamName": names.delivery_stream(channel.name),
                "DeliveryStreamEncryptionConfigurationInput": {
                    "KeyType": "CUSTOMER_MANAGED_CMK",
                    "KeyARN": Match.any_value(),
                },
                "ExtendedS3DestinationConfiguration": Match.object_like(
                    {
                        "BucketARN": {"Fn::GetAtt": [bucket, "Arn"]},
                        "Prefix": f"{channel.archive}{FIREHOSE_HOUR_EXPRESSION}",
                        "ErrorOutputPrefix": FIREHOSE_ERROR_EXPRESSION,
                        "CompressionFormat": "UNCOMPRESSED",
                        "FileExtension": OBJECT_EXTENSION,
                        "EncryptionConfiguration": {"KMSEncryptionConfig": {"AWSKMSKeyARN": Match.any_value()}},
                        "BufferingHints": {
                            "IntervalInSeconds": synthesized.config.archive.buffer_seconds,
                            "SizeInMBs": synthesized.config.archive.buffer_mib,
                        },
                    }
                ),
            },
        )


def test_every_topology_table_is_encrypted_with_pitr_and_ttl(synthesized: Synthesized) -> None:
    names = deployment(synthesized)
    assert len(synthesized.resources("AWS::DynamoDB::Table")) == len(RDSS.tables)
    for table in RDSS.tables:
        keys = [{"AttributeName": table.partition_key, "KeyType": "HASH"}]
        if table.sort_key:
            keys.append({"AttributeName": table.sort_key, "KeyType": "RANGE"})
        synthesized.template.has_resource_properties(
            "AWS::DynamoDB::Table",
            {
                "TableName": names.table(table.name),
                "KeySchema": keys,
                # provisioned is CloudFormation's default: no BillingMode at all
                "BillingMode": Match.absent()
                if table.name == CLAIMS_TABLE and not synthesized.config.table_capacity.on_demand
                else "PAY_PER_REQUEST",
                "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
                "SSESpecification": {"SSEEnabled": True, "SSEType": "KMS", "KMSMasterKeyId": Match.any_value()},
                "TimeToLiveSpecification": {"AttributeName": table.ttl_attribute, "Enabled": True},
            },
        )


def test_every_topology_bucket_exists_with_its_expiry(synthesized: Synthesized) -> None:
    for bucket in RDSS.buckets:
        properties = synthesized.json["Resources"][messaging_bucket_id(synthesized, bucket.name)]["Properties"]
        rules = properties["LifecycleConfiguration"]["Rules"]
        expected = synthesized.config.lifecycle(bucket.name, bucket.expire_after_days).expire_after_days
        whole_bucket = [r for r in rules if "Prefix" not in r and "ExpirationInDays" in r]
        assert [r["ExpirationInDays"] for r in whole_bucket] == ([expected] if expected else [])


def test_functions_and_on_failure_queues_have_the_names_redrive_and_the_local_runtime_use(
    synthesized: Synthesized,
) -> None:
    names = deployment(synthesized)
    for processor in RDSS.processors:
        synthesized.template.has_resource_properties(
            "AWS::Lambda::Function", {"FunctionName": names.function(processor.name)}
        )
        synthesized.template.has_resource_properties(
            "AWS::SQS::Queue", {"QueueName": names.on_failure_queue(processor.name)}
        )
