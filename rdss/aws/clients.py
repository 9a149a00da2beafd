"""boto3 clients configured the way every part of the system wants them.

``AWS_ENDPOINT_URL`` (or ``AWS_ENDPOINT_URL_<SERVICE>``) points them at the embedded emulator,
LocalStack or real AWS; boto3 reads those variables itself. Which of their failures are worth
another attempt is :mod:`rdss.aws.failures`.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import boto3
import botocore.session
from botocore.config import Config
from botocore.credentials import AssumeRoleCredentialFetcher, DeferredRefreshableCredentials
from botocore.exceptions import NoRegionError

from rdss.aws.failures import ClientConfigurationError

#: Standard retry mode (exponential backoff with jitter, throttling-aware), bounded timeouts:
#: a processor must fail a call in good time rather than outlive its Lambda timeout.
CLIENT_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": 4},
    connect_timeout=5,
    read_timeout=20,
    tcp_keepalive=True,
)


def client(service: str, session: boto3.Session | None = None, **kwargs: Any) -> Any:
    """A boto3 client for ``service`` with the project's retry and timeout settings (from
    ``session``'s credentials if given, else boto3's default chain; aimed at the running local
    runtime's endpoint, the region and credentials its state file records, :mod:`rdss.host.pointers`).

    Raises:
        ClientConfigurationError: the endpoint (``AWS_ENDPOINT_URL``...) is not a URL.
        ClientConfigurationError: no region is configured (saying where to give one).
    """
    kwargs.setdefault("config", CLIENT_CONFIG)
    if session is None:
        from rdss.host import pointers as localstate  # with the first client, not at a processor's cold import

        # aimed at the running local runtime: its region and credentials, without the AWS_* exports
        endpoint = kwargs.get("endpoint_url") or os.environ.get("AWS_ENDPOINT_URL")
        kwargs = {**localstate.client_settings(endpoint), **kwargs}
    try:
        return (session or boto3).client(service, **kwargs)
    except NoRegionError:  # botocore's "You must specify a region." says neither what nor where
        raise ClientConfigurationError(
            problem=f"no AWS region for {service}: give one in the deployment's URL (?region=REGION) or set AWS_REGION"
        ) from None
    except ValueError as error:  # botocore's "Invalid endpoint: garbage", from the environment
        named = kwargs.get("endpoint_url") or os.environ.get("AWS_ENDPOINT_URL") or "the endpoint"
        raise ClientConfigurationError(problem=f"cannot use {named} for {service}: {error}") from None


class LazyClient:
    """A :func:`client` made on its first use, not when the code that holds it is built.

    The processors are built when their Lambda handler is imported: making three clients there
    (each loading its service model and botocore's client machinery) would be paid in every cold
    start's init, before the function knows it has work. Attributes are the client's.
    """

    def __init__(self, service: str, **kwargs: Any) -> None:
        self._service = service
        self._kwargs = kwargs
        self._client: Any = None
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        if self._client is None:
            with self._lock:
                if self._client is None:
                    self._client = client(self._service, **self._kwargs)
        return getattr(self._client, name)

    def __repr__(self) -> str:
        state = "made" if self._client is not None else "not made yet"
        return f"<LazyClient {self._service} ({state})>"


def lazy_client(service: str, **kwargs: Any) -> Any:
    """:func:`client`, made on first use (:class:`LazyClient`)."""
    return LazyClient(service, **kwargs)


def assumed_session(
    role_arn: str, *, external_id: str | None, session_name: str, region: str | None, endpoint: str | None
) -> boto3.Session:
    """A session on ``role_arn``'s credentials, assumed from the default chain's with
    ``external_id``, and assumed again before they expire (a gateway outlives an hour).

    A vendor's gateway runs this way: its own credentials only let it assume its role in the
    deployment's account (``rdss vendor config`` prints the role and external ID).

    Raises:
        ClientConfigurationError: no credentials to assume it with (one line saying where to
            give them).
        BotoCoreError: STS cannot be reached, or ClientError: STS refused the role.
    """
    from rdss.host import pointers as localstate  # with the first client, not at a cold import

    aimed_at = endpoint or os.environ.get("AWS_ENDPOINT_URL")
    local = localstate.client_settings(aimed_at)
    source = boto3.Session(**{**local, **({"region_name": region} if region else {})})
    credentials = source.get_credentials()
    if credentials is None:  # botocore's fetcher would fail on None with an AttributeError
        raise ClientConfigurationError(problem=no_credentials(role_arn, aimed_at))
    sts_kwargs: dict[str, Any] = {"config": CLIENT_CONFIG}
    if endpoint:
        sts_kwargs["endpoint_url"] = endpoint
    extra: dict[str, Any] = {"RoleSessionName": session_name}
    if external_id:
        extra["ExternalId"] = external_id
    fetcher = AssumeRoleCredentialFetcher(
        client_creator=lambda service, **kwargs: source.client(service, **{**kwargs, **sts_kwargs}),
        source_credentials=credentials,
        role_arn=role_arn,
        extra_args=extra,
    )
    # Assume it now: a role or external ID STS refuses is a mistake in the URL, reported once
    # here, not on every call of every retry (botocore would log each with its traceback).
    fetcher.fetch_credentials()
    botocore_session = botocore.session.Session()
    botocore_session._credentials = DeferredRefreshableCredentials(  # boto3's documented hook for this
        method="assume-role", refresh_using=fetcher.fetch_credentials
    )
    return boto3.Session(botocore_session=botocore_session, region_name=region or source.region_name)


def no_credentials(role_arn: str, endpoint: str | None) -> str:
    """One line saying that no credentials were found to assume ``role_arn`` with, and where to
    give them: the vendor's own in AWS; for the local runtime, where it runs (its state file
    gives them), or its new address when the URL names one it no longer serves."""
    line = (
        f"no AWS credentials to assume role {role_arn} with: set AWS_PROFILE, or AWS_ACCESS_KEY_ID and "
        "AWS_SECRET_ACCESS_KEY (the vendor's own credentials; the role gives them the deployment's permissions)"
    )
    if not endpoint:
        return line
    from rdss.host import pointers as localstate

    running = localstate.read()
    if running is not None:
        return (
            f"{line}; rdss local up serves {running.endpoint} now, not {endpoint}: "
            "print the vendor's URL again with rdss vendor config NAME"
        )
    state_file = localstate.state_file()
    return f"{line}; for rdss local up's deployment, run where it runs: its state file ({state_file}) gives them"
