"""Where each of the local runtime's pollers has got to, kept on disk across restarts.

A poller (an event source mapping, a delivery stream, an archiver...) reads Kinesis shards and
remembers, per shard, the sequence number of the last record it is done with - the way Lambda
keeps a mapping's position. :meth:`Positions.of` hands a poller a mapping (shard -> sequence
number) under its name; each change is written to ``positions.json`` at once (a new file synced,
then renamed over the old one), so after a crash a poller starts after the last record it
committed. A position may be behind what the poller did (it crashed before writing it): the
records after it are read again, which every processor tolerates (at-least-once, de-duplicated
downstream). It is never ahead, because a poller commits a record only after its effects were
acknowledged by the emulator, whose journal holds them before it answers.

``Positions(None)`` keeps them in memory only (the demo, tests).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, MutableMapping
from pathlib import Path

import orjson


class Positions:
    """Every poller's positions: ``{poller: {shard: sequence number}}``."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._all: dict[str, dict[str, str]] = {}
        if path is not None and path.exists():
            loaded = orjson.loads(path.read_bytes())
            self._all = {str(poller): {str(k): str(v) for k, v in shards.items()} for poller, shards in loaded.items()}

    def of(self, poller: str) -> MutableMapping[str, str]:
        """The positions of the poller named ``poller`` (a name that stays the same across
        restarts: the processor's or the delivery stream's)."""
        return _PollerPositions(self, poller)

    def snapshot(self) -> dict[str, dict[str, str]]:
        with self._lock:
            return {poller: dict(shards) for poller, shards in self._all.items()}

    # -- used by _PollerPositions ------------------------------------------------------------
    def _get(self, poller: str) -> dict[str, str]:
        return self._all.get(poller, {})

    def _set(self, poller: str, shard: str, value: str | None) -> None:
        with self._lock:
            shards = self._all.setdefault(poller, {})
            if value is None:
                shards.pop(shard, None)
            elif shards.get(shard) == value:
                return
            else:
                shards[shard] = value
            self._write()

    def _write(self) -> None:
        if self.path is None:
            return
        temporary = self.path.with_name(self.path.name + ".tmp")
        with open(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as file:
            file.write(orjson.dumps(self._all, option=orjson.OPT_SORT_KEYS))
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, self.path)


class _PollerPositions(MutableMapping[str, str]):
    def __init__(self, positions: Positions, poller: str) -> None:
        self._positions = positions
        self._poller = poller

    def __getitem__(self, shard: str) -> str:
        return self._positions._get(self._poller)[shard]

    def __setitem__(self, shard: str, sequence_number: str) -> None:
        self._positions._set(self._poller, shard, sequence_number)

    def __delitem__(self, shard: str) -> None:
        if shard not in self._positions._get(self._poller):
            raise KeyError(shard)
        self._positions._set(self._poller, shard, None)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._positions._get(self._poller)))

    def __len__(self) -> int:
        return len(self._positions._get(self._poller))
