"""Which buckets ``rdss trace`` reads the archives from: --audit-bucket and --errors-bucket, else
the names the deployed broker was given (CloudFormation names the buckets on AWS), else the
deployment's own ``rdss-<env>-audit`` and ``rdss-<env>-errors``."""

from __future__ import annotations

import argparse
from typing import Any

from botocore.exceptions import ClientError, NoRegionError

from rdss.cli.trace import _named
from rdss.deployment.topology import Deployment

DEPLOYED = {"RDSS_BUCKET_AUDIT": "stack-audit-x1", "RDSS_BUCKET_ERRORS": "stack-errors-y2"}


class Lambda:
    def __init__(self, variables: dict[str, str] | None) -> None:
        self.variables = variables
        self.asked: list[str] = []

    def get_function_configuration(self, FunctionName: str) -> dict[str, Any]:
        self.asked.append(FunctionName)
        if self.variables is None:
            raise ClientError({"Error": {"Code": "ResourceNotFoundException"}}, "GetFunctionConfiguration")
        return {"Environment": {"Variables": self.variables}}


class Target:
    def __init__(self, function: Lambda | None) -> None:
        self.deployment = Deployment("dev", prefix="rdss")
        self.function = function

    def client(self, service: str) -> Any:
        assert service == "lambda"
        if self.function is None:
            raise NoRegionError()
        return self.function


def options(audit: str | None = None, errors: str | None = None) -> argparse.Namespace:
    return argparse.Namespace(audit_bucket=audit, errors_bucket=errors)


def buckets(deployment: Deployment) -> tuple[str, str]:
    return deployment.bucket("audit"), deployment.bucket("errors")


def test_the_deployed_brokers_names_fill_what_the_options_leave_and_the_options_win():
    function = Lambda(DEPLOYED)
    assert buckets(_named(options(), Target(function))) == ("stack-audit-x1", "stack-errors-y2")
    assert buckets(_named(options(errors="mine"), Target(function))) == ("stack-audit-x1", "mine")
    assert function.asked == ["rdss-dev-broker", "rdss-dev-broker"]


def test_both_options_given_the_broker_is_not_asked():
    function = Lambda(DEPLOYED)
    assert buckets(_named(options("a", "e"), Target(function))) == ("a", "e")
    assert function.asked == []


def test_without_a_broker_or_a_client_the_deployments_own_names_stand():
    assert buckets(_named(options(), Target(Lambda(None)))) == ("rdss-dev-audit", "rdss-dev-errors")
    assert buckets(_named(options(audit="a"), Target(None))) == ("a", "rdss-dev-errors")
    named = _named(options(), Target(Lambda({})))
    assert buckets(named) == ("rdss-dev-audit", "rdss-dev-errors")
    assert named.stream("input") == "rdss-dev-input"
