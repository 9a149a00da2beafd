"""Which failures of an AWS call are worth another attempt, and which say the deployment cannot
be used as named.

Retries are for what passes: throttling, a service's 5xx, a timeout, a connection dropped
mid-call (:func:`transient`). Everything else - connection refused, a name that does not
resolve, no credentials or region, a parameter AWS refuses, a stream that is not there - fails
the same way on every attempt, so it fails at once; :func:`unusable` tells a caller that the
deployment as named cannot be used at all (a usage error, not a verdict on a message).

One exception: a connection refused or reset by an endpoint that has already answered the same
client (:class:`Answered`) is an endpoint restarting (``rdss local up`` stopped and started, a
proxy redeployed), not a wrong address, and is retried like the other passing failures.

Only botocore's exceptions are imported here (no boto3): the memory backend and the processors
classify failures without paying for a client library they may not use.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    HTTPClientError,
    ReadTimeoutError,
    SSLError,
)
from botocore.exceptions import ConnectionError as NoAnswer

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
        code = aws_code(error)
        status = (error.response or {}).get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
        return code in TRANSIENT_CODES or int(status) >= 500 or int(status) == 429
    return isinstance(error, ConnectTimeoutError | ReadTimeoutError | ConnectionClosedError)


def connection_lost(error: BaseException) -> bool:
    """True when a call got no answer at all: the connection refused, reset or cut, the name not
    resolved. A certificate refused (SSLError) is not lost: it fails the same way again."""
    return isinstance(error, NoAnswer | HTTPClientError) and not isinstance(error, SSLError)


class Answered:
    """Whether the endpoint of the clients it watches has answered one of them yet (any HTTP
    answer: a refusal is an answer too).

    A connection refused by an endpoint that never answered is a wrong address, told at once; by
    one that has answered, it is that endpoint going away and coming back (a restart), retried
    within the caller's backoff (:meth:`transient`). boto3's own standard retry mode retries both,
    a few times within seconds: that covers a dropped connection, not a server's restart.
    """

    def __init__(self) -> None:
        self.answered = False

    def watch(self, client: Any) -> None:
        """Count ``client``'s answers (a boto3 client; anything without botocore's event system,
        such as a test's stand-in, is ignored)."""
        events = getattr(getattr(client, "meta", None), "events", None)
        if events is not None:
            events.register("after-call", self._answer)

    def _answer(self, **_: Any) -> None:
        self.answered = True

    def transient(self, error: BaseException) -> bool:
        """:func:`transient`, and a connection lost once the endpoint has answered."""
        return transient(error) or (self.answered and connection_lost(error))


def aws_code(error: ClientError) -> str:
    """AWS's code for a refused call (``ResourceNotFoundException``, ``NoSuchKey``, ``404``...);
    empty when the answer carried none."""
    return str((error.response or {}).get("Error", {}).get("Code") or "")


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
