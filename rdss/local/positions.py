"""Where each of the local runtime's pollers has got to, kept on disk across restarts.

A poller (an event source mapping, a delivery stream, an archiver...) reads Kinesis shards and
remembers, per shard, the sequence number of the last record it is done with - the way Lambda
keeps a mapping's position. :meth:`Positions.of` hands a poller a mapping (shard -> sequence
number) under its name; each change is written to ``positions.json`` at once (a new file synced,
then renamed over the old one, which stays as ``positions.json.previous``), so after a crash a
poller starts after the last record it committed. A position may be behind what the poller did
(it crashed before writing it): the records after it are read again, which every processor
tolerates (at-least-once, de-duplicated downstream). It is never ahead, because a poller commits a
record only after its effects were acknowledged by the emulator, whose journal holds them before
it answers.

The file carries a CRC-32 of its positions. One that is empty, not JSON, not shaped as positions
or failing its checksum is damaged: it is kept as ``positions.json.damaged-<time>`` and the
positions are rebuilt from ``positions.json.previous`` (one write behind: a few records read
again) or, when that is damaged too, from nothing - every poller reads its streams from the oldest
record again, and the broker's claims, the sequencer's store and the archive's readers drop what
was done. Either way one WARNING line says so (:attr:`Positions.rebuilt`).

``Positions(None)`` keeps them in memory only (the demo, tests).
"""

from __future__ import annotations

import logging
import threading
import zlib
from collections.abc import Iterator, MutableMapping
from typing import TYPE_CHECKING

import orjson

if TYPE_CHECKING:
    from rdss.local.state import StateDirectory

_log = logging.getLogger(__name__)

POSITIONS = "positions.json"
PREVIOUS = "positions.json.previous"
_LARGEST = 64 * 1024 * 1024


class Damaged(ValueError):
    """A positions file that cannot be used as it is."""


def parse(data: bytes) -> dict[str, dict[str, str]]:
    """The positions a file holds.

    Raises:
        Damaged: empty, not JSON, not shaped as positions, or failing its checksum.
    """
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError as error:
        raise Damaged("not JSON" if data.strip() else "empty") from error
    if not isinstance(document, dict) or set(document) != {"positions", "crc32"}:
        raise Damaged("not a positions file")
    positions = document["positions"]
    if not isinstance(positions, dict) or not all(
        isinstance(shards, dict) and all(isinstance(v, str) for v in shards.values()) for shards in positions.values()
    ):
        raise Damaged("its positions are not {poller: {shard: sequence number}}")
    if document["crc32"] != _checksum(positions):
        raise Damaged("its checksum does not match")
    return {str(poller): {str(k): v for k, v in shards.items()} for poller, shards in positions.items()}


def _checksum(positions: object) -> int:
    return zlib.crc32(orjson.dumps(positions, option=orjson.OPT_SORT_KEYS))


class Positions:
    """Every poller's positions: ``{poller: {shard: sequence number}}``."""

    def __init__(self, state: StateDirectory | None = None) -> None:
        self.state = state
        self._lock = threading.Lock()
        self._all: dict[str, dict[str, str]] = {}
        #: Set when a damaged file was rebuilt: the line that said so.
        self.rebuilt: str | None = None
        if state is not None:
            self._all = self._load(state)

    def _load(self, state: StateDirectory) -> dict[str, dict[str, str]]:
        data = state.files.read(POSITIONS, _LARGEST)
        if data is None:  # none yet, or a crash between the two renames of a write: the previous one
            data = state.files.read(PREVIOUS, _LARGEST)
            if data is None:
                return {}
        try:
            return parse(data)
        except Damaged as damaged:
            copy = state.keep(POSITIONS)
            previous = state.files.read(PREVIOUS, _LARGEST)
            try:
                positions = parse(previous) if previous is not None else None
            except Damaged:
                positions = None
            if positions is not None:
                then = "the pollers carry on from the positions written before it (a few records are read again)"
            else:
                positions = {}
                then = (
                    "the pollers read every stream from its oldest record again (the broker's claims, the sequencer's "
                    "store and the archive's readers drop what was done)"
                )
            self.rebuilt = f"{state.path / POSITIONS} is damaged ({damaged}): kept as {state.path / copy}; {then}"
            _log.warning("%s", self.rebuilt)
            state.files.unlink(POSITIONS)  # (kept under the copy's name) so that the previous stays as it is
            self._all = positions
            self._write()
            return positions

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
        if self.state is None:
            return
        files = self.state.files
        data = orjson.dumps({"positions": self._all, "crc32": _checksum(self._all)}, option=orjson.OPT_SORT_KEYS)
        if files.exists(POSITIONS):
            # one write behind: what a damaged file is rebuilt from (synced with the write's own rename)
            files.rename(POSITIONS, PREVIOUS, sync=False)
        files.write(POSITIONS, data)


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
