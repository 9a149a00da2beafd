"""Delivering archive members: Firehose PutRecordBatch with per-record retry, and S3 for a
member too large to be one Firehose record.

Members go out in as few PutRecordBatch calls as Firehose's limits allow (500 records and
4 MiB a call); when a call reports some records failed, only those are retried, after the
spec's exponential backoff. What still fails after the last retry is reported, never dropped:
the archiver nacks the records whose entries it holds, and the event source mapping delivers
them again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from rdss.archive import entries as archive
from rdss.aws.failures import aws_code
from rdss.aws.putrecords import next_delay

if TYPE_CHECKING:
    from rdss.model.retry import Backoff

#: PutRecordBatch limits (Amazon Data Firehose quotas).
MAX_RECORDS_PER_CALL = 500
MAX_BYTES_PER_CALL = 4 * 1024 * 1024

# Whole-call failures worth another attempt: capacity and transient service faults. (Failed
# records inside a successful call are always retried: Firehose reports only transient ones.)
_RETRYABLE_CODES = frozenset(
    {
        "ServiceUnavailableException",
        "ThrottlingException",
        "LimitExceededException",
        "InternalFailure",
        "InternalServerError",
        "InvalidKMSResourceException",  # a key being re-enabled, or its grant propagating
        "RequestTimeout",
    }
)

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Undelivered:
    """A record that could not be put, and why."""

    index: int
    error_code: str
    error_message: str


@dataclass(frozen=True, eq=False)  # compared by identity: a service, not a value
class ObjectStore:
    """Where a member too large for one Firehose record goes: an object of its own in
    ``bucket``, under ``prefix`` and the hour of delivery, named as Firehose names objects."""

    s3: Any
    bucket: str
    prefix: str
    name: str

    def put(self, data: bytes, moment: datetime) -> str:
        key = archive.object_key(self.prefix, moment, self.name)
        self.s3.put_object(Bucket=self.bucket, Key=key, Body=data)
        return key


class FirehoseWriter:
    """Puts records on Firehose delivery streams, retrying only the records that failed."""

    def __init__(
        self,
        client: Any,
        *,
        backoff: Backoff | None = None,
        sleep: Callable[[float], None] = time.sleep,
        logger: logging.Logger | None = None,
    ) -> None:
        """``backoff``: the retries of failed records (default: rdss.aws.putrecords.DEFAULT_BACKOFF,
        loaded when the first batch is put rather than at the archiver's cold import)."""
        self.client = client
        self._backoff = backoff
        self.sleep = sleep
        self.log = logger or _log
        #: PutRecordBatch calls made (retries included).
        self.calls = 0

    @property
    def backoff(self) -> Backoff:
        if self._backoff is None:
            from rdss.aws.putrecords import DEFAULT_BACKOFF

            self._backoff = DEFAULT_BACKOFF
        return self._backoff

    @backoff.setter
    def backoff(self, backoff: Backoff) -> None:
        self._backoff = backoff

    def put(self, delivery_stream: str, records: Sequence[bytes]) -> list[Undelivered]:
        """Put ``records`` (each at most :data:`rdss.archive.entries.MAX_MEMBER` bytes) on
        ``delivery_stream``; the ones that could not be put, after the retries."""
        pending = list(range(len(records)))
        delays = self.backoff.delays()
        attempt = 1
        while True:
            retry: list[Undelivered] = []
            given_up: list[Undelivered] = []
            for chunk in _chunks(pending, records):
                failed, fatal = self._call(delivery_stream, chunk, records)
                retry.extend(failed)
                given_up.extend(fatal)
            if given_up:  # a failure no retry mends (an unknown stream, a refused record)
                self.log.error("%s refused %d record(s): %s", delivery_stream, len(given_up), given_up[0].error_code)
                return sorted([*given_up, *retry], key=lambda u: u.index)
            if not retry:
                return []
            records_for = f"{len(retry)} archive record(s) for {delivery_stream}"
            delay = next_delay(delays, self.log, records_for, attempt, retry[0].error_code)
            if delay is None:
                return retry
            self.sleep(delay)
            attempt += 1
            pending = [u.index for u in retry]

    def _call(
        self, delivery_stream: str, chunk: list[int], records: Sequence[bytes]
    ) -> tuple[list[Undelivered], list[Undelivered]]:
        """One PutRecordBatch call: (records to retry, records refused for good)."""
        self.calls += 1
        try:
            response = self.client.put_record_batch(
                DeliveryStreamName=delivery_stream, Records=[{"Data": records[i]} for i in chunk]
            )
        except ClientError as error:
            code = aws_code(error) or "ClientError"
            failed = [Undelivered(i, code, str(error)) for i in chunk]
            return (failed, []) if code in _RETRYABLE_CODES else ([], failed)
        except BotoCoreError as error:  # connection refused, timeouts: the network, so retry
            return [Undelivered(i, type(error).__name__, str(error)) for i in chunk], []
        if not response.get("FailedPutCount"):
            return [], []
        retry = [
            Undelivered(i, result["ErrorCode"], result.get("ErrorMessage", ""))
            for i, result in zip(chunk, response["RequestResponses"], strict=True)
            if result.get("ErrorCode")
        ]
        return retry, []


def _chunks(indexes: list[int], records: Sequence[bytes]) -> list[list[int]]:
    chunks: list[list[int]] = []
    chunk: list[int] = []
    size = 0
    for index in indexes:
        length = len(records[index])
        if chunk and (len(chunk) == MAX_RECORDS_PER_CALL or size + length > MAX_BYTES_PER_CALL):
            chunks.append(chunk)
            chunk, size = [], 0
        chunk.append(index)
        size += length
    if chunk:
        chunks.append(chunk)
    return chunks
