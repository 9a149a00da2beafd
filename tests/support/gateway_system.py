"""Gateways on a provisioned test deployment (the embedded emulator, or AWS_ENDPOINT_URL)."""

from __future__ import annotations

import os
from typing import Any

from rdss.gateway import Gateway
from rdss.retry import Backoff
from tests.support.system import System

FAST = Backoff(max_retries=3, base=0.001)


def gateway_url(system: System) -> str:
    """``kinesis://<env>?endpoint=...&region=...`` for the system's deployment."""
    url = f"kinesis://{system.deployment.environment}?region={system.endpoint.region}"
    return url + (f"&endpoint={system.endpoint.url}" if system.endpoint.url else "")


def open_gateway(system: System, application: str, **kwargs: Any) -> Gateway:
    """A gateway with the endpoint's credentials (the emulator's are not in the environment)."""
    kwargs.setdefault("backoff", FAST)
    kwargs.setdefault("lease_duration", 1.0)
    kwargs.setdefault("reply_poll_interval", 0.05)
    clients = {"kinesis": system.client("kinesis"), "dynamodb": system.client("dynamodb"), **kwargs.pop("clients", {})}
    return Gateway(gateway_url(system), application=application, clients=clients, **kwargs)


def process_environment(system: System) -> dict[str, str]:
    """The environment a worker process needs to reach the same AWS (and import this repo)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, **system.endpoint.environment(), "PYTHONPATH": root}
    env.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    return env
