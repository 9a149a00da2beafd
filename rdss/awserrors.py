"""Which failures of an AWS call are worth another attempt, and which say the deployment cannot
be used as named.

Retries are for what passes: throttling, a service's 5xx, a timeout, a connection dropped
mid-call (:func:`transient`). Everything else - connection refused, a name that does not
resolve, no credentials or region, a parameter AWS refuses, a stream that is not there - fails
the same way on every attempt, so it fails at once; :func:`unusable` tells a caller that the
deployment as named cannot be used at all (a usage error, not a verdict on a message).

Only botocore's exceptions are imported here (no boto3): the memory backend and the processors
classify failures without paying for a client library they may not use.
"""

from __future__ import annotations

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    ReadTimeoutError,
)

#: Error codes of a call that may well succeed if tried again: throttling and the services'
#: transient faults (a 5xx status counts too, whatever its code).
TRANSIENT_CODES = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "LimitExceededException",
        "ThrottlingException",
        "Throttling",
        "ThrottledException",
        "RequestLimitExceeded",
        "TooManyRequestsException",
        "RequestThrottled",
        "RequestThrottledException",
        "SlowDown",
        "KMSThrottlingException",
        "InternalFailure",
        "InternalError",
        "InternalServerError",
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "RequestTimeout",
        "RequestTimeoutException",
        "TransactionInProgressException",
    }
)

#: Failures that mean the deployment cannot be used as named: unreachable, no credentials or
#: region, credentials refused, the resource not there. Exception class names or error codes.
UNUSABLE = frozenset(
    {
        "EndpointConnectionError",
        "ProxyConnectionError",
        "SSLError",
        "NoCredentialsError",
        "PartialCredentialsError",
        "CredentialRetrievalError",
        "NoRegionError",
        "ClientConfigurationError",
        "ParamValidationError",
        "ResourceNotFoundException",
        "UnrecognizedClientException",
        "InvalidClientTokenId",
        "InvalidSignatureException",
        "SignatureDoesNotMatch",
        "ExpiredToken",
        "ExpiredTokenException",
        "AccessDenied",
        "AccessDeniedException",
        "ValidationError",
    }
)


class ClientConfigurationError(BotoCoreError):  # type: ignore[misc]  # botocore has no type hints
    """A client that cannot be made as configured (``AWS_ENDPOINT_URL=garbage``, a region boto3
    does not accept): a :class:`BotoCoreError`, so every caller that reports AWS's failures
    reports this one the same way."""

    fmt = "{problem}"


def transient(error: BaseException) -> bool:
    """True for a failure worth another attempt: throttling, a 5xx, a timeout, a connection
    dropped mid-call. Connection refused and DNS failures are not: they fail at once."""
    if isinstance(error, ClientError):
        response = error.response or {}
        code = response.get("Error", {}).get("Code", "")
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
        return code in TRANSIENT_CODES or int(status) >= 500 or int(status) == 429
    return isinstance(error, ConnectTimeoutError | ReadTimeoutError | ConnectionClosedError)


def unusable(code: str) -> bool:
    """True when ``code`` (an exception's class name or AWS's error code) says the deployment
    cannot be used as named, rather than that one message was refused."""
    return code in UNUSABLE


def describe(error: BaseException) -> str:
    """One line for a failure of AWS or of boto3: ``Code: message`` of a refusal, botocore's own
    sentence otherwise."""
    if isinstance(error, ClientError):
        details = (error.response or {}).get("Error", {})
        return f"{details.get('Code', 'error')}: {details.get('Message') or error}"
    return " ".join(str(error).split())
