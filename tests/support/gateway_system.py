"""Gateways on a provisioned test deployment (the embedded emulator, or AWS_ENDPOINT_URL)."""

from __future__ import annotations

import os
from typing import Any

from rdss.gateway import Gateway
from rdss.model.retry import Backoff
from rdss.repository.dynamodb import create_table
from tests.support.system import System

FAST = Backoff(max_retries=3, base=0.001)


def gateway_url(system: System, ldr: str | None = None) -> str:
    """``kinesis://<env>?endpoint=...&region=...`` for the system's deployment (``&ldr=...``
    when given)."""
    url = f"kinesis://{system.deployment.environment}?region={system.endpoint.region}"
    url += f"&endpoint={system.endpoint.url}" if system.endpoint.url else ""
    return url + (f"&ldr={ldr}" if ldr else "")


def vendor_table(system: System) -> str:
    """A DynamoDB table of the vendor's own, beside the deployment (created on first use), for
    its gateways' Local Data Repository: key ``messageId``, as ``rdss.repository.stores`` asks."""
    name = f"vendor-{system.deployment.environment}-ldr"
    if name not in system.own_tables:
        create_table(system.client("dynamodb"), name)
        system.own_tables.append(name)
    return name


def open_gateway(system: System, application: str, *, ldr: str | None = None, **kwargs: Any) -> Gateway:
    """A gateway with the endpoint's credentials (the emulator's are not in the environment);
    its Local Data Repository is ``ldr`` (default: the system's vendor table)."""
    kwargs.setdefault("backoff", FAST)
    kwargs.setdefault("lease_duration", 1.0)
    kwargs.setdefault("reply_poll_interval", 0.05)
    clients = {"kinesis": system.client("kinesis"), "dynamodb": system.client("dynamodb"), **kwargs.pop("clients", {})}
    url = gateway_url(system, ldr or f"dynamodb://{vendor_table(system)}")
    return Gateway(url, application=application, clients=clients, **kwargs)


def process_environment(system: System) -> dict[str, str]:
    """The environment a worker process needs to reach the same AWS (and import this repo)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, **system.endpoint.environment(), "PYTHONPATH": root}
    env.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    return env
