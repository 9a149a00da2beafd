"""Per-partition checkpoints and leases: the rows of the ``checkpoints`` table.

One row per (consumer group and stream, shard): partition key ``lease`` = ``<group>#<stream>``,
sort key ``shardId``. A row says who holds the shard (``leaseOwner``), how often the lease was
touched (``leaseCounter``, bumped by every renewal, take-over and checkpoint), the position after
which the group resumes (``checkpoint``: a sequence number, ``TRIM_HORIZON``, ``LATEST``, or
``SHARD_END`` once a closed shard is finished), the shard's parents (a child is read only after
its parents are finished), while a worker is asking for the lease, ``handoffTo``, and while the
record at the head of the shard keeps failing its handler, ``failedAt`` and ``attempts`` (the
poison-message count, :meth:`LeaseStore.count_attempt`). Every lease write
is conditional on what the writer last saw, so two workers can never both believe a write of
theirs succeeded. Only finished rows get the TTL attribute ``expiresAt``: a live row must never
disappear.

The lease *protocol* (who takes what, when a lease has expired) is :mod:`rdss.gateway.leases`;
this module only reads and writes rows, in DynamoDB or in memory.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from rdss.aws.conditions import conditional, equal, items
from rdss.repository.entries import RETENTION_SECONDS

#: Checkpoint values that are not sequence numbers.
TRIM_HORIZON, LATEST, SHARD_END = "TRIM_HORIZON", "LATEST", "SHARD_END"


@dataclass(frozen=True, slots=True)
class Lease:
    """One partition's row as last read or written."""

    partition: str
    owner: str | None
    counter: int
    checkpoint: str
    parents: tuple[str, ...] = ()
    #: A worker asked for this lease (balancing): its owner commits and releases it.
    handoff: str | None = None

    @property
    def finished(self) -> bool:
        """The partition is closed and every record in it was processed."""
        return self.checkpoint == SHARD_END


class LeaseStore(Protocol):
    """The rows of one lease key (one consumer group on one channel)."""

    def leases(self) -> list[Lease]:
        """Every row, strongly consistent."""
        ...

    def create(self, lease: Lease) -> bool:
        """Add a row unless one exists for the partition; True when this call added it."""
        ...

    def take(self, lease: Lease, owner: str) -> Lease | None:
        """Become the owner, if the row still has the owner and counter of ``lease``."""
        ...

    def renew(self, lease: Lease) -> Lease | None:
        """Bump the counter, if ``lease`` (owner and counter) is still current. The result
        carries ``handoff`` when another worker asked for the lease."""
        ...

    def request_handoff(self, lease: Lease, to: str) -> bool:
        """Ask the owner of ``lease`` (if it still is) to hand it over to ``to``; False if the
        lease changed hands or was already asked for. The counter is left alone: the owner
        keeps renewing while it finishes what it is doing."""
        ...

    def checkpoint(self, lease: Lease, position: str) -> Lease | None:
        """Record ``position`` (``SHARD_END`` also frees the row and lets it expire), if current."""
        ...

    def release(self, lease: Lease) -> Lease | None:
        """Give the partition up (no owner, no pending hand-off), if current."""
        ...

    def count_attempt(self, partition: str, position: str) -> int:
        """One more failed attempt at processing the record at ``position``; returns the attempts
        so far (1 for a record not counted before). Kept on the partition's row, so a restarted
        consumer, or the worker that takes the partition over, goes on counting."""
        ...


class DynamoLeaseStore:
    """Rows in the deployment's ``checkpoints`` table."""

    def __init__(self, client: Any, table: str, key: str, *, clock: Callable[[], float] = time.time) -> None:
        self.client = client
        self.table = table
        self.key = key
        self.clock = clock

    def leases(self) -> list[Lease]:
        found = items(
            self.client.query,
            TableName=self.table,
            ConsistentRead=True,
            **equal("lease", self.key, clause="KeyConditionExpression"),
        )
        return [_lease(item) for item in found]

    def create(self, lease: Lease) -> bool:
        item: dict[str, Any] = {
            "lease": {"S": self.key},
            "shardId": {"S": lease.partition},
            "leaseCounter": {"N": str(lease.counter)},
            "checkpoint": {"S": lease.checkpoint},
        }
        if lease.parents:
            item["parentShardIds"] = {"SS": list(lease.parents)}
        if lease.owner:
            item["leaseOwner"] = {"S": lease.owner}
        if lease.finished:
            item["expiresAt"] = {"N": str(int(self.clock()) + RETENTION_SECONDS)}
        return (
            self._write(TableName=self.table, Item=item, ConditionExpression="attribute_not_exists(shardId)", put=True)
            is not None
        )

    def take(self, lease: Lease, owner: str) -> Lease | None:
        held_by = "leaseOwner = :o" if lease.owner else "attribute_not_exists(leaseOwner)"
        values: dict[str, Any] = {
            ":c": {"N": str(lease.counter)},
            ":n": {"N": str(lease.counter + 1)},
            ":me": {"S": owner},
        }
        if lease.owner:
            values[":o"] = {"S": lease.owner}
        done = self._update(
            lease,
            "SET leaseOwner = :me, leaseCounter = :n REMOVE handoffTo",
            f"leaseCounter = :c AND {held_by}",
            values,
        )
        return replace(lease, owner=owner, counter=lease.counter + 1, handoff=None) if done is not None else None

    def renew(self, lease: Lease) -> Lease | None:
        done = self._update(lease, "SET leaseCounter = :n", *self._mine(lease), returns=True)
        if done is None:
            return None
        handoff = done.get("handoffTo", {}).get("S")
        return replace(lease, counter=lease.counter + 1, handoff=handoff)

    def request_handoff(self, lease: Lease, to: str) -> bool:
        done = self._update(
            lease,
            "SET handoffTo = :t",
            "leaseOwner = :o AND attribute_not_exists(handoffTo)",
            {":o": {"S": lease.owner or ""}, ":t": {"S": to}},
        )
        return done is not None

    def checkpoint(self, lease: Lease, position: str) -> Lease | None:
        condition, values = self._mine(lease)
        values[":p"] = {"S": position}
        if position == SHARD_END:
            values[":t"] = {"N": str(int(self.clock()) + RETENTION_SECONDS)}
            update = "SET checkpoint = :p, leaseCounter = :n, expiresAt = :t REMOVE leaseOwner, handoffTo"
            owner = None
        else:
            update, owner = "SET checkpoint = :p, leaseCounter = :n", lease.owner
        done = self._update(lease, update, condition, values)
        return replace(lease, checkpoint=position, owner=owner, counter=lease.counter + 1) if done is not None else None

    def release(self, lease: Lease) -> Lease | None:
        done = self._update(lease, "SET leaseCounter = :n REMOVE leaseOwner, handoffTo", *self._mine(lease))
        return replace(lease, owner=None, counter=lease.counter + 1, handoff=None) if done is not None else None

    def count_attempt(self, partition: str, position: str) -> int:
        # only the record at the head of a partition can be failing (a failure rewinds to it),
        # so one pair of attributes on the row is enough: which record, and how many attempts
        key = {"lease": {"S": self.key}, "shardId": {"S": partition}}
        values: dict[str, Any] = {":one": {"N": "1"}, ":p": {"S": position}}
        done = self._write(
            TableName=self.table,
            Key=key,
            UpdateExpression="ADD attempts :one",
            ConditionExpression="failedAt = :p",
            ExpressionAttributeValues=values,
            ReturnValues="UPDATED_NEW",
        )
        if done is not None:
            return int(done["attempts"]["N"])
        self._write(
            TableName=self.table,
            Key=key,
            UpdateExpression="SET failedAt = :p, attempts = :one",
            ConditionExpression="attribute_exists(shardId)",  # never a row without a lease
            ExpressionAttributeValues=values,
        )
        return 1

    # -- plumbing ------------------------------------------------------------------------------
    @staticmethod
    def _mine(lease: Lease) -> tuple[str, dict[str, Any]]:
        return "leaseOwner = :o AND leaseCounter = :c", {
            ":o": {"S": lease.owner or ""},
            ":c": {"N": str(lease.counter)},
            ":n": {"N": str(lease.counter + 1)},
        }

    def _update(
        self, lease: Lease, update: str, condition: str, values: dict[str, Any], *, returns: bool = False
    ) -> dict[str, Any] | None:
        """The row's new attributes (empty unless ``returns``), or None if the condition failed."""
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "Key": {"lease": {"S": self.key}, "shardId": {"S": lease.partition}},
            "UpdateExpression": update,
            "ConditionExpression": condition,
            "ExpressionAttributeValues": values,
        }
        if returns:
            kwargs["ReturnValues"] = "ALL_NEW"
        return self._write(**kwargs)

    def _write(self, *, put: bool = False, **kwargs: Any) -> dict[str, Any] | None:
        response = conditional(self.client.put_item if put else self.client.update_item, **kwargs)
        if response is None:
            return None
        attributes: dict[str, Any] = response.get("Attributes") or {}
        return attributes


class MemoryLeaseStore:
    """Rows in a dict (the memory backend; unit tests of the lease protocol)."""

    def __init__(self) -> None:
        self._rows: dict[str, Lease] = {}
        self._attempts: dict[str, tuple[str, int]] = {}  # partition -> (position, attempts)
        self._lock = threading.Lock()

    def leases(self) -> list[Lease]:
        with self._lock:
            return list(self._rows.values())

    def create(self, lease: Lease) -> bool:
        with self._lock:
            if lease.partition in self._rows:
                return False
            self._rows[lease.partition] = lease
            return True

    def take(self, lease: Lease, owner: str) -> Lease | None:
        new = replace(lease, owner=owner, counter=lease.counter + 1, handoff=None)
        return self._swap(lease, new, require_owner=False)

    def renew(self, lease: Lease) -> Lease | None:
        with self._lock:
            current = self._rows.get(lease.partition)
            if current is None or not current.owner or (current.owner, current.counter) != (lease.owner, lease.counter):
                return None
            new = self._rows[lease.partition] = replace(current, counter=current.counter + 1)
            return new

    def request_handoff(self, lease: Lease, to: str) -> bool:
        with self._lock:
            current = self._rows.get(lease.partition)
            if current is None or current.owner != lease.owner or not current.owner or current.handoff:
                return False
            self._rows[lease.partition] = replace(current, handoff=to)
            return True

    def checkpoint(self, lease: Lease, position: str) -> Lease | None:
        ending = position == SHARD_END
        owner = None if ending else lease.owner
        with self._lock:
            handoff = None if ending else getattr(self._rows.get(lease.partition), "handoff", None)
        new = replace(lease, checkpoint=position, owner=owner, counter=lease.counter + 1, handoff=handoff)
        return self._swap(lease, new)

    def release(self, lease: Lease) -> Lease | None:
        return self._swap(lease, replace(lease, owner=None, counter=lease.counter + 1, handoff=None))

    def count_attempt(self, partition: str, position: str) -> int:
        with self._lock:
            failed_at, attempts = self._attempts.get(partition, ("", 0))
            attempts = attempts + 1 if failed_at == position else 1
            self._attempts[partition] = (position, attempts)
            return attempts

    def _swap(self, expected: Lease, new: Lease, *, require_owner: bool = True) -> Lease | None:
        with self._lock:
            current = self._rows.get(expected.partition)
            if current is None or current.counter != expected.counter or current.owner != expected.owner:
                return None
            if require_owner and not current.owner:
                return None
            # every write bumps the counter, so a view with the current counter is the current
            # row except for a hand-off request (which leaves the counter alone)
            self._rows[expected.partition] = new
            return new


def _lease(item: dict[str, Any]) -> Lease:
    return Lease(
        partition=item["shardId"]["S"],
        owner=item.get("leaseOwner", {}).get("S"),
        counter=int(item.get("leaseCounter", {}).get("N", "0")),
        checkpoint=item.get("checkpoint", {}).get("S", TRIM_HORIZON),
        parents=tuple(sorted(item.get("parentShardIds", {}).get("SS", []))),
        handoff=item.get("handoffTo", {}).get("S"),
    )
