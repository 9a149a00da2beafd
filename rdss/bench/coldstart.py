"""``rdss bench coldstart``: each Lambda asset's size and its handler's cold import time.

Each function's asset is built as ``cdk synth`` builds it (stacks/bundling.py); its x86_64
twin (same files, x86_64 wheels) is imported by fresh Python 3.12 processes like Lambda's
(stacks/lambda_python.py), several times, and the median taken. The reference is ``import
boto3`` from the same asset in the same kind of process: what every Python function pays
before any of its own code runs.

Needs the checkout (the CDK app's bundling code), like ``rdss bench glue``.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from typing import Any

from rdss.topology import RDSS, Deployment


@dataclass(frozen=True)
class ColdStart:
    function: str
    #: the deployed (arm64) asset, zipped as Lambda receives it
    zipped_bytes: int
    #: files of the rdss package in the asset
    package_files: int
    #: median seconds to import the handler in a fresh Python 3.12
    import_seconds: float
    #: median seconds to import boto3 alone from the same asset (the reference)
    reference_seconds: float

    @property
    def ratio(self) -> float:
        return self.import_seconds / self.reference_seconds

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ratio": self.ratio}


def run(rounds: int = 7) -> list[ColdStart]:
    from stacks import lambda_python
    from stacks.bundling import PYTHON_312_ARM64, PYTHON_312_X86_64, built

    # no AWS call happens at import; the handlers only need their names and a region
    environment = {
        **Deployment("bench").environment_variables(),
        "AWS_DEFAULT_REGION": "eu-west-2",
        "AWS_REGION": "eu-west-2",
        "POWERTOOLS_TRACE_DISABLED": "true",
        "POWERTOOLS_METRICS_NAMESPACE": "rdss-bench",
    }
    results = []
    for processor in RDSS.processors:
        deployed = built(processor.handler, PYTHON_312_ARM64)
        twin = built(processor.handler, PYTHON_312_X86_64)
        handler, reference = [], []
        for _ in range(rounds):  # interleaved, so load on the machine falls on both alike
            handler.append(lambda_python.run(twin, "handler.handler", environment=environment)["import_seconds"])
            reference.append(lambda_python.run(twin, "boto3.client", environment=environment)["import_seconds"])
        results.append(
            ColdStart(
                function=processor.name,
                zipped_bytes=lambda_python.zipped_size(deployed),
                package_files=sum(1 for _ in (deployed / "rdss").rglob("*.py")),
                import_seconds=statistics.median(handler),
                reference_seconds=statistics.median(reference),
            )
        )
    return results
