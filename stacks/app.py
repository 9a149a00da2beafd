"""Builds the CDK app for one environment: the stack, tags, and the cdk-nag checks."""

from __future__ import annotations

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks, NIST80053R5Checks, ServerlessChecks

from stacks.config import CONTEXT_KEY, ConfigError, load
from stacks.stack import RdssStack


def build(app: cdk.App, environment: str | None = None) -> RdssStack:
    """Adds environment ``environment`` (default: the ``env`` context, ``-c env=<name>``) to ``app``.

    cdk-nag's AwsSolutions, Serverless and NIST 800-53 rev 5 packs run as validation plugins on every synth: a
    finding nobody acknowledged fails the synth, and the report lands in
    ``cdk.out/validation-report.json``.
    """
    name = environment or app.node.try_get_context("env")
    context = app.node.try_get_context(CONTEXT_KEY)
    if context is None:
        raise ConfigError(f"no {CONTEXT_KEY!r} context: run from the repository root, where cdk.json is")
    if not name or name not in context.get("environments", {}):
        unknown = f"unknown environment {name!r}; choose" if name else "choose an environment:"
        raise ConfigError(f"{unknown} one of {sorted(context.get('environments', {}))} with -c env=<name>")
    config = load(
        context,
        name,
        account=app.node.try_get_context("account"),
        region=app.node.try_get_context("region"),
        # -c custom_resources=false: a stack CloudFormation can create where functions cannot run
        custom_resources=_flag(app.node.try_get_context("custom_resources")),
        # -c lambda_architecture=x86_64: functions an x86_64 emulator (LocalStack here) runs natively
        lambda_architecture=app.node.try_get_context("lambda_architecture"),
    )
    stack = RdssStack(app, f"rdss-{config.name}", config=config)
    cdk.Tags.of(stack).add("Project", "rdss")
    cdk.Tags.of(stack).add("Environment", config.name)
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app), ServerlessChecks(app), NIST80053R5Checks(app))
    return stack


def _flag(value: object) -> bool | None:
    """A boolean context value as given with ``-c`` (a string) or in cdk.json (a bool)."""
    if value is None or isinstance(value, bool):
        return value
    if str(value).lower() in ("true", "1", "yes"):
        return True
    if str(value).lower() in ("false", "0", "no"):
        return False
    raise ConfigError(f"expected true or false, found {value!r}")
