"""The sweep: sequences that will not complete go to the error channel, parts and all.

Runs on a schedule (EventBridge in AWS, a timer in the local runtime). A sequence still
waiting after its message's expirationTimestamp is GENERR003; one waiting longer than the
configured timeout (parts lost or never sent) is GENERR006. Either way every part that did
arrive is decorated and delivered to the error channel before the sequence is closed:
nothing is dropped.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson

from rdss.deployment.topology import Resolved, from_environment
from rdss.model.errors import ErrorCode
from rdss.observability.fields import message_fields
from rdss.observability.powertools import Tally, emit_counts, logger
from rdss.processors.sequencer.store import EXPIRED, TIMED_OUT, SequenceStore

if TYPE_CHECKING:
    from rdss.aws.putrecords import PutRecordsBatcher
    from rdss.model.rejection import Rejector


class Sweep:
    processor = "sweep"

    def __init__(
        self,
        *,
        names: Resolved,
        dynamodb: Any,
        s3: Any,
        kinesis: Any,
        timeout_seconds: float | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``timeout_seconds``: how long an incomplete sequence waits (default
        :data:`rdss.model.sequences.SEQUENCE_TIMEOUT_SECONDS`)."""
        self.names = names
        self.store = SequenceStore(
            dynamodb=dynamodb, s3=s3, table=names.table("sequences"), bucket=names.bucket("staging"), clock=clock
        )
        self.kinesis, self.s3 = kinesis, s3
        self.timeout = timeout_seconds if timeout_seconds is not None else _default_timeout()
        self.clock = clock

    # What a sweep moves a sequence with, made by the first sweep that moves one: the Lambda's
    # cold import need not load the batched PutRecords and the reject path for a schedule that
    # mostly finds nothing to move.
    @functools.cached_property
    def batcher(self) -> PutRecordsBatcher:
        from rdss.aws.putrecords import PutRecordsBatcher

        return PutRecordsBatcher(self.kinesis)

    @functools.cached_property
    def rejector(self) -> Rejector:
        from rdss.aws.putrecords import MAX_RECORD_DATA
        from rdss.model.rejection import Rejector, S3ClaimChecks

        return Rejector(MAX_RECORD_DATA, S3ClaimChecks(self.s3, self.names.bucket("errors")))

    @classmethod
    def from_environment(cls) -> Sweep:
        from rdss.aws.clients import lazy_client

        timeout = float(os.environ.get("RDSS_SEQUENCE_TIMEOUT_SECONDS") or _default_timeout())
        # made when first used, not at import: see rdss.aws.clients.LazyClient
        return cls(
            names=from_environment(),
            dynamodb=lazy_client("dynamodb"),
            s3=lazy_client("s3"),
            kinesis=lazy_client("kinesis"),
            timeout_seconds=timeout,
        )

    def run(self) -> dict[str, Any]:
        """One sweep; returns what it moved (also logged and counted)."""
        from rdss.aws.putrecords import Record
        from rdss.model.sequences import stale

        now = self.clock()
        tally = Tally()
        moved: list[str] = []
        for progress in self.store.pending():
            verdict = stale(
                progress.sequence,
                len(progress.positions),
                progress.total,
                expires_at=progress.message_expires_at,
                waited=now - progress.first_seen,
                now=now,
                timeout=self.timeout,
            )
            if verdict is None:
                continue
            code, description = verdict
            status = EXPIRED if code is ErrorCode.GENERR003 else TIMED_OUT
            staged = self.store.load(progress.sequence, progress.positions)
            try:
                rejections = [self.rejector.reject(payload, code, description) for payload in staged.values()]
            except Exception:  # a claim check could not be kept: the sequence waits for the next sweep
                logger.exception("could not reject a stale sequence", extra={"sequence": progress.sequence})
                tally.add("outcome", "retry-later")
                continue
            records = [
                Record(self.names.stream(r.channel), r.record, partition_key=progress.sequence) for r in rejections
            ]
            report = self.batcher.put(records)
            if report.failed:
                logger.error("could not move a stale sequence", extra={"sequence": progress.sequence})
                tally.add("outcome", "retry-later")
                continue
            if self.store.finish(progress.sequence, status):
                for payload in staged.values():
                    header = orjson.loads(payload)["messageHeader"]
                    logger.warning(
                        "message moved to error",
                        extra=message_fields(header, "error", errorCode=code, errorDescription=description),
                    )
                moved.append(progress.sequence)
                tally.add("outcome", status.lower())
                tally.add("code", str(code))
        emit_counts(self.processor, tally)
        logger.info("sweep done", extra={"moved": moved})
        return {"moved": moved, "count": len(moved)}


def _default_timeout() -> float:
    from rdss.model.sequences import SEQUENCE_TIMEOUT_SECONDS  # (the module loads when a sweep first runs)

    return SEQUENCE_TIMEOUT_SECONDS
