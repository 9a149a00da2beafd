"""The entry points LocalStack loads (plux plugins): kept free of heavy imports, since LocalStack
imports every plugin of a namespace to read its name."""

from __future__ import annotations

from typing import Any

from localstack.services.cloudformation.resource_provider import CloudFormationResourceProviderPlugin
from localstack.services.lambda_.invocation.plugins import RuntimeExecutorPlugin

#: LAMBDA_RUNTIME_EXECUTOR's value that selects the process executor
EXECUTOR_NAME = "rdss-process"


class ProcessRuntimeExecutorPlugin(RuntimeExecutorPlugin):
    name = EXECUTOR_NAME

    def load(self, *args: Any, **kwargs: Any) -> Any:
        from rdss_localstack.executor import ProcessRuntimeExecutor

        return ProcessRuntimeExecutor


class CustomResourceProviderPlugin(CloudFormationResourceProviderPlugin):
    name = "AWS::CloudFormation::CustomResource"

    def __init__(self) -> None:
        self.factory: Any = None

    def load(self) -> None:
        from rdss_localstack.custom_resource import CustomResourceProvider

        self.factory = CustomResourceProvider
