"""The gateway's Local Data Repository (spec: Local Data Repository, Transactional Behaviour).

Every message an application sends is recorded TO_SEND before it goes out and SENT once the
channel acknowledged it; every message it received and processed is recorded RECEIVED, and a
message already RECEIVED is a duplicate (Kinesis delivers at least once). Each entry keeps the
spec's fields: messageId, messageClass, messageType, sequence, position, status (plus
returnAddress and correlationId when the message has them).

On Kinesis the entries live in the deployment's ``messages`` table under the key
``gateway:<application>:<messageId>``. The namespace matters: the broker claims *bare*
messageIds in the same table with ``attribute_not_exists``, so a gateway entry under the bare id
would make the broker drop the very message the gateway just sent as a duplicate. It also keeps
applications apart: two applications reading one channel each process every message once.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from rdss.ldr import RECEIVED, SENT, TO_SEND, LocalDataRepository

__all__ = ["RECEIVED", "SENT", "TO_SEND", "DynamoRepository", "Entry", "MemoryRepository", "Repository"]


@dataclass(frozen=True, slots=True)
class Entry:
    """One Local Data Repository entry: the spec's minimum and the routing fields."""

    message_id: str
    message_class: str
    message_type: str
    sequence: str
    position: int
    status: str
    return_address: str | None = None
    correlation_id: str | None = None
    #: Set for a message received and moved to the invalid or error channel instead of being
    #: processed (the application refused it, or its handler failed too often: GENERR009).
    error_code: str | None = None

    @classmethod
    def of(cls, header: Mapping[str, Any], status: str, *, error_code: str | None = None) -> Entry:
        """The entry for a message with this header."""
        sequence = header.get("messageSequence") or {}
        return cls(
            message_id=header["messageId"],
            message_class=header.get("messageClass", ""),
            message_type=header.get("messageType", ""),
            sequence=sequence.get("sequence", ""),
            position=int(sequence.get("position", 1)),
            status=status,
            return_address=header.get("returnAddress"),
            correlation_id=header.get("correlationId"),
            error_code=error_code,
        )

    def attributes(self) -> dict[str, Any]:
        return {
            "messageClass": self.message_class,
            "messageType": self.message_type,
            "sequence": self.sequence,
            "position": self.position,
            "status": self.status,
            "returnAddress": self.return_address,
            "correlationId": self.correlation_id,
            "errorCode": self.error_code,
        }


class Repository(Protocol):
    """Where an application records what it sent and received."""

    def record(self, entries: Sequence[Entry]) -> None:
        """Write (or overwrite) these entries; returns once they are durable.

        Raises:
            Exception: the store could not be written (the caller must not treat the messages
                as recorded).
        """
        ...

    def statuses(self, message_ids: Sequence[str]) -> dict[str, str]:
        """The recorded status of each known messageId (unknown ids are absent)."""
        ...

    def entry(self, message_id: str) -> Entry | None:
        """The entry for one messageId, if any."""
        ...


class DynamoRepository:
    """Entries in the deployment's ``messages`` table, namespaced per application (100 entries
    to a TransactWriteItems call)."""

    def __init__(self, ldr: LocalDataRepository, application: str) -> None:
        self.ldr = ldr
        self.application = application
        self.prefix = f"gateway:{application}:"

    def record(self, entries: Sequence[Entry]) -> None:
        if entries:
            self.ldr.put_many(
                [
                    (
                        self.prefix + e.message_id,
                        {"application": self.application, "bareMessageId": e.message_id, **e.attributes()},
                    )
                    for e in entries
                ]
            )

    def statuses(self, message_ids: Sequence[str]) -> dict[str, str]:
        if not message_ids:
            return {}
        found = self.ldr.get([self.prefix + m for m in message_ids])
        cut = len(self.prefix)
        return {key[cut:]: str(item.get("status", "")) for key, item in found.items()}

    def entry(self, message_id: str) -> Entry | None:
        item = self.ldr.get([self.prefix + message_id]).get(self.prefix + message_id)
        if item is None:
            return None
        return Entry(
            message_id=message_id,
            message_class=str(item.get("messageClass", "")),
            message_type=str(item.get("messageType", "")),
            sequence=str(item.get("sequence", "")),
            position=int(item.get("position", 1)),
            status=str(item.get("status", "")),
            return_address=item.get("returnAddress"),
            correlation_id=item.get("correlationId"),
            error_code=item.get("errorCode"),
        )


class MemoryRepository:
    """Entries in a dict: the memory backend's repository (one per application and bus, so a
    gateway re-opened on the same bus sees what an earlier one recorded)."""

    def __init__(self) -> None:
        self._entries: dict[str, Entry] = {}
        self._lock = threading.Lock()
        #: Calls to :meth:`record`, for tests that count writes.
        self.writes = 0

    def record(self, entries: Sequence[Entry]) -> None:
        with self._lock:
            self.writes += 1
            for entry in entries:
                self._entries[entry.message_id] = entry

    def statuses(self, message_ids: Sequence[str]) -> dict[str, str]:
        with self._lock:
            return {m: self._entries[m].status for m in message_ids if m in self._entries}

    def entry(self, message_id: str) -> Entry | None:
        with self._lock:
            return self._entries.get(message_id)

    def __len__(self) -> int:
        return len(self._entries)
