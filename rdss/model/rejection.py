"""The one reject path: a message that cannot be processed, and what to publish where instead.

Every part of the system that moves a message to the spec's Invalid or Error Message Queue -
the broker, the sequencer and its sweep, the bridge, every gateway backend's consumer - asks
:meth:`Rejector.reject` (or :func:`reject`) what to publish, and publishes exactly that:

* the channel: ``invalid`` or ``error``, the channel of the error code (:mod:`rdss.model.errors`);
* the record: the payload decorated with ``errorCode`` and ``errorDescription``, its original
  bytes intact (:mod:`rdss.model.decoration`);
* or, when the decorated record would not fit the channel (a Kinesis record holds 1 MiB), a
  Claim Check: the payload is kept in a :class:`ClaimChecks` store and the channel carries a
  small decorated pointer to it (encoding, location, size, SHA-256).

Who moved a record: the broker, the sequencer and the sweep keep the partition key of the
record they reject (the input record's, the sequence id); a consumer's move - a gateway
receiver's, put by the consumer itself on ``invalid`` or ``error`` (vendor roles may write those
two channels and ``input``, nothing else) - is keyed :func:`moved_key` of its consumer group, so
the archive, ``rdss trace`` and the accounting tell the two apart without guessing from a header.

Who keeps claim checks: the processors keep them in the deployment's ``errors`` bucket
(:class:`S3ClaimChecks`); a gateway on Kinesis, which has no bucket of the deployment's, keeps
them in a directory of its own host (:class:`DirectoryClaimChecks`). Transports without a
record limit (RabbitMQ, the memory bus) never need one. A rejector that has no store and meets
a record too large raises :class:`ClaimCheckUnavailable`: the caller must then leave the message
unacknowledged (the broker nacks it, so it is retried and eventually parked, never dropped).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from rdss.model import decoration, timestamps
from rdss.model.errors import ErrorCode

if TYPE_CHECKING:  # not at run time: what only rejects by code (the sweep) needs no classifier
    from rdss.model.validation import Verdict

#: Where a claim-checked payload goes under a store's root: one folder a day, named by content.
CLAIM_CHECK_PREFIX = "claim-check"
#: The partition key of a consumer's move starts with this, then names the consumer group.
MOVED_PREFIX = "moved:"


def moved_key(group: str | None) -> str:
    """The partition key a consumer's move is put with: ``moved:<consumer group>``."""
    return f"{MOVED_PREFIX}{group or ''}"


def rejected_key(partition_key: str, fallback: str) -> str:
    """The partition key a processor's own rejection is put with: the rejected record's, unless
    the producer chose one that would read as a consumer's move (``moved:...``), then
    ``fallback`` (the record's identity) - no producer can make the broker's verdict look like a
    consumer's."""
    return fallback if partition_key.startswith(MOVED_PREFIX) else partition_key


def moved_by(partition_key: str | None) -> str | None:
    """The consumer group that moved a record of ``invalid``/``error``, from its partition key;
    None for a record the broker, the sequencer or the sweep rejected."""
    if partition_key is None or not partition_key.startswith(MOVED_PREFIX):
        return None
    return partition_key.removeprefix(MOVED_PREFIX)


class ClaimCheckUnavailable(RuntimeError):
    """A decorated record would not fit its channel and no claim-check store was given."""


@dataclass(frozen=True, slots=True)
class Rejection:
    """What to publish instead of a message that cannot be processed."""

    code: ErrorCode
    description: str
    #: The decorated payload, or the decorated pointer to a claim-checked one.
    record: bytes
    #: Where the payload was kept, when the record is a claim check (the wrapper's members).
    claim_check: Mapping[str, Any] | None = None

    @property
    def channel(self) -> str:
        """``invalid`` or ``error``: the logical channel of the code."""
        return self.code.channel.value

    @property
    def headers(self) -> dict[str, str]:
        """What a broker transport may route or filter on without parsing the record."""
        return {"errorCode": str(self.code)}


class ClaimChecks(Protocol):
    """A store for payloads too large to travel decorated (the Claim Check pattern)."""

    def keep(self, payload: bytes, *, sha256: str, now: datetime) -> dict[str, Any]:
        """Store ``payload`` durably; return where it is: the wrapper's ``encoding`` and the
        members that locate it (e.g. ``bucket`` and ``key``).

        Raises:
            Exception: it could not be stored (the caller must not acknowledge the message).
        """
        ...


@dataclass(frozen=True, eq=False)  # compared by identity: a service, not a value
class S3ClaimChecks:
    """Claim checks in an S3 bucket (the deployment's ``errors`` bucket for the processors)."""

    s3: Any
    bucket: str

    def keep(self, payload: bytes, *, sha256: str, now: datetime) -> dict[str, Any]:
        key = _key(sha256, now)
        self.s3.put_object(Bucket=self.bucket, Key=key, Body=payload)
        return {"encoding": "s3", "bucket": self.bucket, "key": key}


@dataclass(frozen=True, eq=False)  # compared by identity: a service, not a value
class DirectoryClaimChecks:
    """Claim checks as files under a directory of this host (a gateway outside the deployment)."""

    root: Path

    def keep(self, payload: bytes, *, sha256: str, now: datetime) -> dict[str, Any]:
        path = self.root / _key(sha256, now)
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial")
        partial.write_bytes(payload)
        partial.replace(path)  # whole or absent, even if this process dies while writing
        return {"encoding": "file", "path": str(path)}


@dataclass(frozen=True, eq=False)  # compared by identity: a service, not a value
class Rejector:
    """The reject path configured for one destination.

    Args:
        limit: the largest record the destination channel takes (bytes); None: no limit.
        claim_checks: where payloads too large to travel decorated are kept.
    """

    limit: int | None = None
    claim_checks: ClaimChecks | None = None
    now: Callable[[], datetime] = field(default=timestamps.now, compare=False)

    def reject(
        self,
        payload: bytes,
        reason: Verdict | ErrorCode | str,
        description: str | None = None,
        *,
        now: datetime | None = None,
    ) -> Rejection:
        """What to publish, and on which channel, instead of ``payload``.

        Args:
            reason: the classifier's verdict on the payload (an invalid one), or an error code.
            description: the errorDescription; default: the verdict's, else the spec's
                description of the code.
            now: the moment, for naming a claim check (default: the rejector's clock).

        Raises:
            ClaimCheckUnavailable: too large to travel decorated, and no store to keep it in.
            ValueError: ``reason`` is a valid verdict or not one of the spec's codes.
        """
        if isinstance(reason, str):  # an ErrorCode is one too
            code = ErrorCode(reason)
        else:
            if reason.error_code is None:
                raise ValueError("a valid message is not rejected")
            code = reason.error_code
            description = description or reason.error_description
        description = description or code.description
        record = decoration.decorate(payload, code, description)
        if self.limit is None or len(record) <= self.limit:
            return Rejection(code, description, record)
        if self.claim_checks is None:
            raise ClaimCheckUnavailable(
                f"{code}: the decorated record is {len(record)} bytes, over the channel's {self.limit}, "
                "and there is no claim-check store to keep the payload in"
            )
        digest = hashlib.sha256(payload).hexdigest()
        location = self.claim_checks.keep(payload, sha256=digest, now=now or self.now())
        pointer = decoration.claim_check(code, description, location=location, size=len(payload), sha256=digest)
        return Rejection(code, description, pointer, location)


def reject(payload: bytes, reason: Verdict | ErrorCode | str, description: str | None = None) -> Rejection:
    """:meth:`Rejector.reject` for a destination without a record limit (RabbitMQ, memory)."""
    return _UNLIMITED.reject(payload, reason, description)


_UNLIMITED = Rejector()


def _key(sha256: str, now: datetime) -> str:
    return f"{CLAIM_CHECK_PREFIX}/{now.astimezone(UTC):%Y/%m/%d}/{sha256}"
