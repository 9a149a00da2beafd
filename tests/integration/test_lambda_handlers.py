"""The Lambda handlers as Lambda runs them: one process per function, configured by the
environment the CDK app gives it, Powertools' decorators at work."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from rdss.deployment.topology import RDSS
from rdss.local.events import esm_event
from tests.support.system import System

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]

# Loads lambdas/<name>/handler.py as Lambda does and invokes it once with a context.
_INVOKE = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("handler", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)

class Context:
    function_name = sys.argv[2]
    function_version = "$LATEST"
    memory_limit_in_mb = 256
    invoked_function_arn = "arn:aws:lambda:eu-west-2:123456789012:function:" + sys.argv[2]
    aws_request_id = "request-1"

result = module.handler(json.loads(sys.argv[3]), Context())
print(json.dumps({"result": result}))
"""


def invoke(system: System, processor: str, event: dict[str, Any]) -> list[dict[str, Any]]:
    """Run one processor's handler in a process of its own; its stdout, line by line (JSON)."""
    function = f"{system.deployment.prefix}-{system.deployment.environment}-{processor}"
    env = {
        **os.environ,
        **system.endpoint.environment(),
        **system.deployment.environment_variables(),
        "POWERTOOLS_SERVICE_NAME": processor,  # as stacks/processors.py sets it
        "POWERTOOLS_METRICS_NAMESPACE": "RDSS",
        "POWERTOOLS_METRICS_DISABLED": "false",
        "POWERTOOLS_TRACE_DISABLED": "true",  # no X-Ray daemon here
        "POWERTOOLS_LOG_LEVEL": "INFO",
        "AWS_LAMBDA_FUNCTION_NAME": function,
        "PYTHONPATH": str(ROOT),
    }
    handler = ROOT / "lambdas" / processor / "handler.py"
    done = subprocess.run(
        [sys.executable, "-c", _INVOKE, str(handler), function, orjson.dumps(event).decode()],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return [orjson.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def test_each_handler_logs_under_its_own_service_with_the_lambda_context_and_a_cold_start_metric(system: System):
    # one invalid record for the broker: it must log one structured line for it
    system.publish([b'{"messageHeader": "not an object"}'])
    kinesis = system.client("kinesis")
    stream = system.deployment.stream("input")
    [shard] = kinesis.list_shards(StreamName=stream)["Shards"]
    iterator = kinesis.get_shard_iterator(
        StreamName=stream, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    records = kinesis.get_records(ShardIterator=iterator)["Records"]
    arn = kinesis.describe_stream_summary(StreamName=stream)["StreamDescriptionSummary"]["StreamARN"]
    events = {
        "broker": esm_event(arn, shard["ShardId"], records, system.endpoint.region),
        "sequencer": {"Records": []},
        "sweep": {"source": "aws.events", "detail-type": "Scheduled Event"},
        "archiver": esm_event(arn, shard["ShardId"], records, system.endpoint.region),
    }
    # the archiver writes to the input channel's Direct PUT delivery stream: the endpoint's own here
    firehose = system.client("firehose")
    firehose.create_delivery_stream(
        DeliveryStreamName=system.deployment.delivery_stream("input"),
        DeliveryStreamType="DirectPut",
        ExtendedS3DestinationConfiguration={
            "BucketARN": f"arn:aws:s3:::{system.deployment.bucket('audit')}",
            "RoleARN": "arn:aws:iam::000000000000:role/rdss-archive",
            "Prefix": "audit/",
            "CompressionFormat": "UNCOMPRESSED",
        },
    )
    try:
        for processor in RDSS.processors:
            lines = invoke(system, processor.name, events[processor.name])
            logs = [line for line in lines if "level" in line]
            metrics = [line for line in lines if "_aws" in line]
            assert lines[-1]["result"] is not None
            assert logs or processor.name == "sequencer"
            for log in logs:  # inject_lambda_context: the function and its cold start in every line
                assert log["service"] == processor.name
                assert log["function_name"].endswith(processor.name)
                assert log["cold_start"] is True
            # capture_cold_start_metric: one ColdStart metric, dimensioned by function and service
            [cold] = [m for m in metrics if "ColdStart" in m]
            assert cold["service"] == processor.name
            assert cold["function_name"].endswith(processor.name)
            if processor.name == "archiver":
                assert lines[-1]["result"] == {"batchItemFailures": []}
                [archived] = [log for log in logs if log["message"] == "batch archived"]
                assert (archived["records"], archived["members"], archived["nacked"]) == (1, 1, 0)
            if processor.name == "broker":
                [moved] = [log for log in logs if log["message"] == "message moved to invalid"]
                assert moved["level"] == "WARNING"
                assert moved["errorCode"] == "GENERR004"
                assert moved["record"] == f"{shard['ShardId']}/{records[0]['SequenceNumber']}"
    finally:
        firehose.delete_delivery_stream(DeliveryStreamName=system.deployment.delivery_stream("input"))
