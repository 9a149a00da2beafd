"""``rdss bench coldstart``: each Lambda asset's size and its handler's cold import time.

Each function's asset is built as ``cdk synth`` builds it (stacks/bundling.py); its x86_64
twin (same files, x86_64 wheels) is imported by fresh Python 3.12 processes like Lambda's
(stacks/lambda_python.py), several times, and the median taken, with the environment Lambda
gives the deployed function (``LAMBDA_TASK_ROOT``, ``AWS_EXECUTION_ENV``, the function's own
variables: some libraries behave differently outside Lambda). The reference is ``import boto3``
in the same kind of process: the runtime's SDK, which every Python function that calls AWS
pays for before any of its own code runs. The ratio is the median of each round's, handler and
reference timed back to back in CPU time, which the other work of a shared machine does not
stretch as it does the wall clock.

With ``logs`` (a deployment's environment name), each function's Init Durations are read from
the ``REPORT`` lines in its CloudWatch log group (AWS, or ``AWS_ENDPOINT_URL``'s LocalStack):
what its cold starts took as deployed.

Needs the checkout (the CDK app's bundling code), like ``rdss bench glue``.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass
from typing import Any

from rdss.bench.figures import Measured
from rdss.deployment.topology import RDSS, Deployment
from rdss.host import resources


@dataclass(frozen=True)
class ColdStart(Measured):
    function: str
    #: the deployed (arm64) asset, zipped as Lambda receives it
    zipped_bytes: int
    #: files of the rdss package in the asset
    package_files: int
    #: median seconds to import the handler in a fresh Python 3.12
    import_seconds: float
    #: median seconds to import boto3 alone from the same asset (the reference)
    reference_seconds: float
    #: the median of each round's handler import over its reference, timed back to back and in
    #: CPU time (the process's own): a ratio of wall-clock medians pairs a handler timed while the
    #: machine was busy with a reference timed while it was not (on the shared 2-core build
    #: machine at a load of 4 to 6, one asset's swung from 0.9x to 1.4x between runs)
    ratio: float

    #: Init Durations (ms) of the deployed function's REPORT lines, when asked for
    init_durations_ms: tuple[float, ...] = ()


def lambda_environment(processor: str, task_root: str) -> dict[str, str]:
    """What Lambda's python3.12 runtime gives the deployed function while it imports its handler
    (stacks/processors.py's variables; no AWS call happens at import)."""
    deployment = Deployment("bench")
    function = f"{deployment.prefix}-{processor}"
    return {
        "LAMBDA_TASK_ROOT": task_root,
        "LAMBDA_RUNTIME_DIR": "/var/runtime",
        "AWS_EXECUTION_ENV": "AWS_Lambda_python3.12",
        "AWS_LAMBDA_FUNCTION_NAME": function,
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512",
        "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
        "AWS_LAMBDA_INITIALIZATION_TYPE": "on-demand",
        "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{function}",
        "AWS_LAMBDA_LOG_STREAM_NAME": "2026/01/01/[$LATEST]bench",
        "AWS_XRAY_CONTEXT_MISSING": "LOG_ERROR",
        "AWS_XRAY_DAEMON_ADDRESS": "127.0.0.1:2000",
        "AWS_DEFAULT_REGION": "eu-west-2",
        "AWS_REGION": "eu-west-2",
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_SESSION_TOKEN": "bench",
        "TZ": ":UTC",
        "_HANDLER": "handler.handler",
        **deployment.environment_variables(),
        "POWERTOOLS_SERVICE_NAME": processor,
        "POWERTOOLS_METRICS_NAMESPACE": "RDSS",
        "POWERTOOLS_LOG_LEVEL": "INFO",
        "RDSS_SEQUENCE_TIMEOUT_SECONDS": "3600",
    }


def init_durations(environment: str, processor: str, client: Any = None) -> tuple[float, ...]:
    """The Init Durations (ms) in the REPORT lines of deployment ``environment``'s function."""
    if client is None:
        from rdss.aws.clients import client as make

        client = make("logs")
    group = f"{Deployment(environment).prefix}-{processor}"
    found: list[float] = []
    try:
        for page in client.get_paginator("filter_log_events").paginate(
            logGroupName=f"/aws/lambda/{group}", filterPattern="REPORT"
        ):
            for event in page["events"]:
                match = _INIT_DURATION.search(event["message"])
                if match:
                    found.append(float(match.group(1)))
    except client.exceptions.ResourceNotFoundException:
        return ()
    return tuple(found)


_INIT_DURATION = re.compile(r"Init Duration: ([0-9.]+) ms")


def run(rounds: int = 7, logs: str | None = None) -> list[ColdStart]:
    resources.checkout_on_path()  # the rdss command of `make setup`'s venv
    from stacks import lambda_python
    from stacks.bundling import PYTHON_312_ARM64, PYTHON_312_X86_64, built

    results = []
    for processor in RDSS.processors:
        deployed = built(processor.handler, PYTHON_312_ARM64)
        twin = built(processor.handler, PYTHON_312_X86_64)
        environment = lambda_environment(processor.name, str(twin.resolve()))
        handler, reference, ratios = [], [], []
        for _ in range(rounds):  # interleaved, so load on the machine falls on both alike
            imported = lambda_python.run(twin, "handler.handler", environment=environment)
            alone = lambda_python.run(twin, "boto3.client", environment=environment)
            handler.append(imported["import_seconds"])
            reference.append(alone["import_seconds"])
            ratios.append(imported["import_cpu_seconds"] / alone["import_cpu_seconds"])
        results.append(
            ColdStart(
                function=processor.name,
                zipped_bytes=lambda_python.zipped_size(deployed),
                package_files=sum(1 for _ in (deployed / "rdss").rglob("*.py")),
                import_seconds=statistics.median(handler),
                reference_seconds=statistics.median(reference),
                ratio=statistics.median(ratios),
                init_durations_ms=init_durations(logs, processor.name) if logs else (),
            )
        )
    return results
