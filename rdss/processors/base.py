"""What the broker and the sequencer share: an AMGI batch app over one deployment.

Each is built from the deployment's resolved names: it routes by content (:class:`Router`),
looks requests up in the ``messages`` table (the broker also claims there), moves what it cannot
route through the one reject path - keeping a record too large to travel decorated in the
``errors`` bucket (Claim Check) - and sends to streams by logical channel.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Self

from rdss.amgi.batch import BatchApp, kinesis_send
from rdss.deployment.routing import Router
from rdss.deployment.topology import RDSS, Resolved, Topology, from_environment
from rdss.model import history, timestamps
from rdss.model.errors import ErrorCode
from rdss.observability.powertools import logger
from rdss.processors.attempts import RecordAttempts, describe, is_transient, record_attempts
from rdss.repository.dynamodb import LocalDataRepository

if TYPE_CHECKING:  # made on the first rejection: see Processor.rejector
    from rdss.model.rejection import Rejector


class Processor(BatchApp):
    """A processor of the topology as an AMGI app (see the module docstring)."""

    #: The topology's name for it (metrics and logs).
    processor: str

    def __init__(
        self,
        *,
        names: Resolved,
        dynamodb: Any,
        s3: Any = None,
        topology: Topology = RDSS,
        clock: Callable[[], float] = time.time,
        now: Callable[[], datetime] = timestamps.now,
        max_attempts: int | None = None,
    ) -> None:
        """
        Args:
            s3: for claim checks in the errors bucket (without it, a record too large to travel
                decorated is nacked rather than moved).
            max_attempts: failed attempts at one record before it is moved to ``error``
                (GENERR009); default ``RDSS_RECORD_ATTEMPTS``, else 3 (:mod:`rdss.processors.attempts`).
        """
        self.names = names
        self.ldr = LocalDataRepository(dynamodb, names.table("messages"), clock=clock)
        self.attempts = RecordAttempts(self.ldr)
        self.max_attempts = max_attempts if max_attempts is not None else record_attempts()
        self.router = Router(names, topology)
        self.s3 = s3
        self.clock = clock
        self.now = now
        #: This processor's machineId in the messageHistory hops it appends.
        self.machine_id = history.processor_id(self.processor, names.environment)

    @functools.cached_property
    def rejector(self) -> Rejector:
        """The one reject path, claim checks in the ``errors`` bucket. Made on the first
        rejection: a batch of valid messages never needs it, and a cold start does not load it."""
        from rdss.aws.putrecords import MAX_RECORD_DATA
        from rdss.model.rejection import Rejector, S3ClaimChecks

        claim_checks = S3ClaimChecks(self.s3, self.names.bucket("errors")) if self.s3 is not None else None
        return Rejector(MAX_RECORD_DATA, claim_checks, now=self.now)

    @classmethod
    def from_environment(cls) -> Self:
        """The processor as the CDK app (or the local runtime) deployed it."""
        from rdss.aws.clients import lazy_client

        # made when first used, not at import: see rdss.aws.clients.LazyClient
        return cls(names=from_environment(), dynamodb=lazy_client("dynamodb"), s3=lazy_client("s3"))

    def send_to(self, channel: str, payload: bytes, partition_key: str) -> dict[str, Any]:
        """A ``message.send`` to the stream of a logical channel."""
        return kinesis_send(self.names.stream(channel), payload, partition_key)

    def failed_attempt(self, record: str, payload: bytes, partition_key: str, error: BaseException) -> Failure:
        """One record failed (``error`` was raised handling it): count the attempt and say what
        becomes of it - moved to ``error`` with GENERR009 once the attempts are used up (the send
        is in :attr:`Failure.move`), else retried, with the records after it on its shard."""
        if is_transient(error):
            logger.warning("record %s: the infrastructure failed (%s); retried", record, describe(error))
            return Failure(f"{describe(error)}; retried (the infrastructure's failure, not counted)")
        attempts = self.attempts.count(record, error)
        logger.error(
            "record %s failed (attempt %s of %d): %s",
            record,
            attempts if attempts is not None else "?",
            self.max_attempts,
            describe(error),
            exc_info=error,
        )
        if attempts is None or attempts < self.max_attempts:
            return Failure(f"{describe(error)}; attempt {attempts or '?'} of {self.max_attempts}, retried")
        description = f"{self.processor} failed {attempts} times on this record: {describe(error)}"
        rejection = self.rejector.reject(payload, ErrorCode.GENERR009, description)
        logger.warning(
            f"message moved to {rejection.channel}",
            extra={"record": record, "errorCode": str(ErrorCode.GENERR009), "errorDescription": description},
        )
        return Failure(description, self.send_to(rejection.channel, rejection.record, partition_key))


@dataclass(frozen=True)
class Failure:
    """What becomes of a record a processor failed on (:meth:`Processor.failed_attempt`)."""

    #: Why: the nack's message while it is retried, the errorDescription once moved.
    reason: str
    #: The ``message.send`` moving it to ``error`` (GENERR009) once its attempts are used up.
    move: dict[str, Any] | None = None

    @property
    def moved(self) -> bool:
        return self.move is not None
