"""Failed attempts at one stream record, counted durably: no record takes its neighbours down.

A processor that fails on one record (an exception, not a verdict: every payload gets a verdict)
reports that record and the ones after it on its shard as batch item failures, so the ones
before it are checkpointed and Lambda retries from it. Each failure counts one attempt for that
record, by its identity (``<shard>/<sequence number>``), in the ``messages`` table under
``attempts#<shard>/<sequence number>`` with a TTL; once :func:`record_attempts` attempts have
failed the processor moves the record to ``error`` with GENERR009 naming the exception (the one
reject path) and acknowledges it. The count is a DynamoDB item because a Lambda execution
environment keeps nothing across invocations, and a retry may land in another one.

Failures of the infrastructure (throttling, timeouts, a service's 5xx) are not the record's:
they are retried without counting (:func:`is_transient`), as Lambda's own retries do.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from rdss.aws.failures import aws_code
from rdss.repository.entries import RETENTION_SECONDS, attempts_key

if TYPE_CHECKING:
    from rdss.repository.dynamodb import LocalDataRepository

#: Attempts at a record before it is moved to ``error`` (GENERR009), unless configured.
DEFAULT_RECORD_ATTEMPTS = 3
#: The processors' environment variable that configures it (cdk.json:
#: ``event_source.record_attempts``).
RECORD_ATTEMPTS_VARIABLE = "RDSS_RECORD_ATTEMPTS"

_TRANSIENT_CODES = frozenset(
    {
        "ThrottlingException",
        "Throttling",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
        "SlowDown",
        "InternalServerError",
        "InternalError",
        "ServiceUnavailable",
        "TransactionConflictException",
        "TransactionInProgressException",
        "KMSThrottlingException",
    }
)


def record_attempts(environ: Any = None) -> int:
    """The configured attempts (``RDSS_RECORD_ATTEMPTS``, at least 1; default 3)."""
    value = (os.environ if environ is None else environ).get(RECORD_ATTEMPTS_VARIABLE)
    try:
        return max(1, int(value)) if value else DEFAULT_RECORD_ATTEMPTS
    except ValueError:
        return DEFAULT_RECORD_ATTEMPTS


def is_transient(error: BaseException) -> bool:
    """Whether a failure is the infrastructure's (retried without counting an attempt)."""
    if isinstance(error, BotoCoreError):  # connections, timeouts, retries used up in botocore
        return True
    if isinstance(error, ClientError):
        code = aws_code(error)
        status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
        return code in _TRANSIENT_CODES or code.startswith("Throttl") or status >= 500
    return isinstance(error, (TimeoutError, ConnectionError))


def describe(error: BaseException) -> str:
    """The exception named for an errorDescription: its type and message."""
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


@dataclass
class RecordAttempts:
    """Failed attempts per stream record, kept in the processor's repository table (the
    deployment's ``messages``), beside its claims: the table's client, name, key and clock."""

    ldr: LocalDataRepository

    def count(self, record: str, error: BaseException) -> int | None:
        """Count one more failed attempt at ``record`` (``<shard>/<sequence number>``); the
        attempts so far, or None when the count could not be kept (then the record is retried
        rather than given up on early)."""
        try:
            response = self.ldr.client.update_item(
                TableName=self.ldr.table,
                Key={self.ldr.key: {"S": attempts_key(record)}},
                UpdateExpression="ADD attempts :one SET expiresAt = :expires, lastError = :error",
                ExpressionAttributeValues={
                    ":one": {"N": "1"},
                    ":expires": {"N": str(int(self.ldr.clock()) + RETENTION_SECONDS)},
                    ":error": {"S": describe(error)[:1000]},
                },
                ReturnValues="UPDATED_NEW",
            )
        except (ClientError, BotoCoreError):
            return None
        return int(response["Attributes"]["attempts"]["N"])
