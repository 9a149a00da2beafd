"""The Local Data Repository in a dict: the memory backend's (one per application and bus)."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from rdss.repository.entries import Entry


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
