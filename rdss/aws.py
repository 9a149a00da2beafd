"""boto3 clients configured the way every part of the system wants them.

``AWS_ENDPOINT_URL`` (or ``AWS_ENDPOINT_URL_<SERVICE>``) points them at the embedded emulator,
LocalStack or real AWS; boto3 reads those variables itself.
"""

from __future__ import annotations

from typing import Any

import boto3
from botocore.config import Config

#: Standard retry mode (exponential backoff with jitter, throttling-aware), bounded timeouts:
#: a processor must fail a call in good time rather than outlive its Lambda timeout.
CLIENT_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": 4},
    connect_timeout=5,
    read_timeout=20,
    tcp_keepalive=True,
)


def client(service: str, **kwargs: Any) -> Any:
    """A boto3 client for ``service`` with the project's retry and timeout settings."""
    kwargs.setdefault("config", CLIENT_CONFIG)
    return boto3.client(service, **kwargs)
