"""A replay's rows in the ``checkpoints`` table (:mod:`rdss.processors.replay`): the replay
itself under ``replays``/``<name>`` (its options, status and counts), one row per record sent
under ``replay:<name>``, and the claim one run at a time holds on it (``leaseOwner`` and
``leaseUntil``, renewed by :class:`Claim`). See :mod:`rdss.processors.replay` for why each is so.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import orjson
from botocore.exceptions import BotoCoreError, ClientError

from rdss.aws.conditions import conditional
from rdss.aws.failures import aws_code

#: The checkpoints table's partition key of every replay's own row.
REPLAYS = "replays"
#: How long a replay's rows are kept after its last change.
KEEP = timedelta(days=35)
#: How long a run's claim on its replay lasts unrenewed (it renews it every quarter of that): a
#: start of a replay whose run died waits at most this long.
LEASE = timedelta(seconds=60)
_WRITE_BATCH = 25


class Named(Protocol):
    """What a claim reads of a replay (:class:`rdss.processors.replay.Spec`): its name and its
    options, which a resumed run must repeat."""

    @property
    def name(self) -> str: ...

    def options(self) -> dict[str, Any]: ...


def utc_text(moment: datetime) -> str:
    """``moment`` in UTC as ISO 8601 with a ``Z``, as a replay's rows and options hold it."""
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


class ReplayExists(LookupError):
    """A replay of that name exists with other options, or was cancelled."""


class ReplayRunning(ReplayExists):
    """Another run holds the replay (its claim has not lapsed)."""


class NotDeployed(LookupError):
    """A table the replay needs is not there: most likely the environment is misnamed."""


@contextmanager
def needs(what: str, environment: str) -> Iterator[None]:
    """AWS calls on ``what`` (``checkpoints table rdss-dev-checkpoints``): its absence is said as
    ``rdss redrive`` says a queue's, naming it and asking whether the environment is deployed.

    Raises:
        NotDeployed: AWS answered ResourceNotFoundException.
    """
    try:
        yield
    except ClientError as error:
        if aws_code(error) != "ResourceNotFoundException":
            raise
        raise NotDeployed(f"no {what} (is {environment!r} deployed?)") from error


def run_id() -> str:
    """A run's id, its claim's owner: host, process and a random suffix."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Progress:
    """Replays and their progress in the ``checkpoints`` table (see the module docstring)."""

    def __init__(self, dynamodb: Any, table: str, *, clock: Callable[[], float] = time.time) -> None:
        self.client = dynamodb
        self.table = table
        self.clock = clock

    def _expires(self) -> dict[str, str]:
        return {"N": str(int(self.clock() + KEEP.total_seconds()))}

    def get(self, name: str) -> dict[str, Any] | None:
        item = self.client.get_item(
            TableName=self.table, Key={"lease": {"S": REPLAYS}, "shardId": {"S": name}}, ConsistentRead=True
        ).get("Item")
        return None if item is None else _row(item)

    def list(self) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        paginator = self.client.get_paginator("query")
        for page in paginator.paginate(
            TableName=self.table,
            KeyConditionExpression="lease = :l",
            ExpressionAttributeValues={":l": {"S": REPLAYS}},
            ConsistentRead=True,
        ):
            rows.extend(_row(item) for item in page.get("Items", []))
        return rows

    def begin(self, spec: Named, owner: str) -> dict[str, Any]:
        """Claim the replay for the run ``owner``: its row made, or found with the same options (a
        resumed run) and no live claim on it.

        Raises:
            ReplayRunning: another run holds it.
            ReplayExists: it exists with other options, or was cancelled.
        """
        options = orjson.dumps(spec.options(), option=orjson.OPT_SORT_KEYS).decode()
        now = self.clock()
        stamp = utc_text(datetime.fromtimestamp(now, UTC))
        claim = {"leaseOwner": {"S": owner}, "leaseUntil": {"N": str(int(now + LEASE.total_seconds()))}}
        existing = self.get(spec.name)
        if existing is None:
            made = conditional(
                self.client.put_item,
                TableName=self.table,
                Item={
                    "lease": {"S": REPLAYS},
                    "shardId": {"S": spec.name},
                    "options": {"S": options},
                    "status": {"S": "running"},
                    "created": {"S": stamp},
                    "updated": {"S": stamp},
                    "sent": {"N": "0"},
                    "expiresAt": self._expires(),
                    **claim,
                },
                ConditionExpression="attribute_not_exists(lease)",
            )
            if made is not None:
                return {"name": spec.name, "options": options, "status": "running", "created": stamp, "sent": 0}
            existing = self.get(spec.name) or {}  # another start made it first: its claim decides
        self._refuse(spec.name, existing, options, now)
        claimed = conditional(
            self.client.update_item,
            TableName=self.table,
            Key={"lease": {"S": REPLAYS}, "shardId": {"S": spec.name}},
            UpdateExpression="SET #t = :running, #u = :u, #e = :e, leaseOwner = :me, leaseUntil = :until",
            # the same options, not cancelled, and nobody's live claim: one start wins the row
            ConditionExpression=(
                "#o = :options AND #t <> :cancelled AND (attribute_not_exists(leaseOwner) OR leaseUntil < :now)"
            ),
            ExpressionAttributeNames={"#t": "status", "#u": "updated", "#e": "expiresAt", "#o": "options"},
            ExpressionAttributeValues={
                ":running": {"S": "running"},
                ":cancelled": {"S": "cancelled"},
                ":options": {"S": options},
                ":u": {"S": stamp},
                ":e": self._expires(),
                ":me": claim["leaseOwner"],
                ":until": claim["leaseUntil"],
                ":now": {"N": str(int(now))},
            },
        )
        if claimed is None:  # changed since it was read: say what it is now
            self._refuse(spec.name, self.get(spec.name) or {}, options, now)
            raise ReplayRunning(f"replay {spec.name} is being started by another run")
        return existing

    @staticmethod
    def _refuse(name: str, row: Mapping[str, Any], options: str, now: float) -> None:
        """Raise why a start cannot claim ``row``, if it cannot."""
        if row.get("options") != options:
            raise ReplayExists(f"replay {name} exists with other options: {row.get('options')}")
        if row.get("status") == "cancelled":
            raise ReplayExists(f"replay {name} was cancelled; start another name")
        until = row.get("leaseUntil")
        if row.get("leaseOwner") and isinstance(until, int) and until >= int(now):
            raise ReplayRunning(
                f"replay {name} is running (run {row['leaseOwner']}, its claim renewed until"
                f" {utc_text(datetime.fromtimestamp(until, UTC))}): one run at a time; a run that died frees it then"
            )

    def renew(self, name: str, owner: str) -> bool:
        """Push the claim of run ``owner`` :data:`LEASE` ahead; False when it no longer holds it."""
        return self._claimed(name, owner, "SET leaseUntil = :until", {":until": self._until()})

    def update(
        self,
        name: str,
        *,
        status: str | None = None,
        sent: int = 0,
        selected: int | None = None,
        owner: str | None = None,
        release: bool = False,
    ) -> bool:
        """Note a run's progress. With ``owner``, only while that run holds the replay (False when
        it does not); ``release`` gives its claim up."""
        names = {"#u": "updated", "#e": "expiresAt", "#s": "sent"}
        values: dict[str, Any] = {
            ":u": {"S": utc_text(datetime.fromtimestamp(self.clock(), UTC))},
            ":e": self._expires(),
            ":n": {"N": str(sent)},
        }
        sets = ["#u = :u", "#e = :e"]
        if status is not None:
            names["#t"], values[":t"] = "status", {"S": status}
            sets.append("#t = :t")
        if selected is not None:
            names["#c"], values[":c"] = "selected", {"N": str(selected)}
            sets.append("#c = :c")
        update = "SET " + ", ".join(sets) + " ADD #s :n" + (" REMOVE leaseOwner, leaseUntil" if release else "")
        if owner is not None:
            return self._claimed(name, owner, update, values, names)
        self.client.update_item(
            TableName=self.table,
            Key={"lease": {"S": REPLAYS}, "shardId": {"S": name}},
            UpdateExpression=update,
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
        )
        return True

    def _until(self) -> dict[str, str]:
        return {"N": str(int(self.clock() + LEASE.total_seconds()))}

    def _claimed(
        self, name: str, owner: str, update: str, values: dict[str, Any], names: dict[str, str] | None = None
    ) -> bool:
        """``update`` the replay's row if run ``owner`` holds it."""
        request: dict[str, Any] = {
            "TableName": self.table,
            "Key": {"lease": {"S": REPLAYS}, "shardId": {"S": name}},
            "UpdateExpression": update,
            "ConditionExpression": "leaseOwner = :me",
            "ExpressionAttributeValues": values | {":me": {"S": owner}},
        }
        if names:
            request["ExpressionAttributeNames"] = names
        return conditional(self.client.update_item, **request) is not None

    def cancel(self, name: str) -> bool:
        """Mark it cancelled (a running start stops at its next batch); False when there is none."""
        if self.get(name) is None:
            return False
        self.update(name, status="cancelled")
        return True

    def done(self, name: str, sources: Sequence[str]) -> set[str]:
        """Which of ``sources`` an earlier run sent."""
        found: set[str] = set()
        unique = list(dict.fromkeys(sources))
        for start in range(0, len(unique), 100):
            request: dict[str, Any] = {
                self.table: {
                    "Keys": [{"lease": {"S": _rows(name)}, "shardId": {"S": s}} for s in unique[start : start + 100]],
                    "ConsistentRead": True,
                }
            }
            while request:
                response = self.client.batch_get_item(RequestItems=request)
                found.update(i["shardId"]["S"] for i in response.get("Responses", {}).get(self.table, []))
                request = response.get("UnprocessedKeys") or {}
        return found

    def note(self, name: str, sent: Sequence[tuple[str, str]]) -> None:
        """Note records sent: (source, the record it became ``<shard>/<sequence>``)."""
        expires = self._expires()
        for start in range(0, len(sent), _WRITE_BATCH):
            request: dict[str, Any] = {
                self.table: [
                    {
                        "PutRequest": {
                            "Item": {
                                "lease": {"S": _rows(name)},
                                "shardId": {"S": source},
                                "sentAs": {"S": record},
                                "expiresAt": expires,
                            }
                        }
                    }
                    for source, record in sent[start : start + _WRITE_BATCH]
                ]
            }
            while request:
                request = self.client.batch_write_item(RequestItems=request).get("UnprocessedItems") or {}


def _rows(name: str) -> str:
    """The partition key of one replay's per-record rows (no ``#``: no vendor's lease key)."""
    return f"replay:{name}"


def _row(item: Mapping[str, Any]) -> dict[str, Any]:
    plain: dict[str, Any] = {"name": item["shardId"]["S"]}
    for key, value in item.items():
        if key in ("lease", "shardId", "expiresAt"):
            continue
        plain[key] = int(value["N"]) if "N" in value else value.get("S")
    return plain


class Claim:
    """A run's claim on its replay, renewed every quarter of :data:`LEASE` on a thread of its own
    (a slow batch, a paced wait or a long read of the archive does not let it lapse); ``lost`` is
    set when a renewal finds another run holds it."""

    def __init__(self, progress: Progress, name: str, owner: str) -> None:
        self.progress = progress
        self.name = name
        self.owner = owner
        self.lost = threading.Event()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._renew, name=f"replay-claim-{name}", daemon=True)
        self._thread.start()

    def _renew(self) -> None:
        while not self._stopped.wait(LEASE.total_seconds() / 4):
            try:
                if not self.progress.renew(self.name, self.owner):
                    self.lost.set()
                    return
            except (ClientError, BotoCoreError):  # AWS out of reach a moment: the next renewal may pass
                continue

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join()
