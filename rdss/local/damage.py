"""What a start does with damaged state: refuse, naming what is lost - or, when told to, salvage.

A torn final journal frame (a crash mid-write: never acknowledged) is cut where it is found
(:mod:`rdss.local.journal`). Anything else - a frame failing its checksum with more after it, a
gap in the indexes, a journal shorter than what was acknowledged, a snapshot that does not verify -
held acknowledged requests, and a start never drops them quietly:

* without ``--salvage`` the start is refused with :class:`StateDamaged`, one line naming the
  damaged bytes and the requests lost (their indexes, the first and last by method and target).
  The damaged file is kept as ``<name>.damaged-<time>`` (a second name for the same bytes) with
  ``<name>.damaged-<time>.txt`` listing every request it costs - index, time, method, target -
  and the state is left as it was;
* with ``--salvage`` the same copy and list are kept, then the runtime starts from what is intact:
  the journal's intact prefix, or - when the snapshot is damaged - an empty emulator (the
  journal's requests continue from the snapshot and cannot be replayed without it). The pollers'
  positions are set aside too (``positions.json.salvaged-<time>``): they may point past what was
  kept, so the pollers read every stream from its oldest record again, and the broker's claims,
  the sequencer's store and the archive's readers drop what was already done.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from rdss.local.journal import COMMITTED, JOURNAL, Damage, Request, salvage
from rdss.local.positions import POSITIONS, PREVIOUS
from rdss.local.snapshot import SNAPSHOT, SnapshotDamaged
from rdss.local.state import StateDirectory


class StateDamaged(Exception):
    """A start refused on damaged state; the message is one line naming what is lost."""


def journal_damaged(state: StateDirectory, damage: Damage, *, end: int, salvaging: bool) -> str:
    """Refuse (raise) or salvage the journal's intact prefix (its first ``end`` bytes); returns
    the line to log when salvaged.

    Raises:
        StateDamaged: not salvaging.
    """
    copy = state.keep(JOURNAL) if state.files.exists(JOURNAL) else "(no journal)"
    lost = _lost(damage.last_intact, damage.lost_through, damage.damaged + damage.after)
    where = f"journal damaged at bytes {damage.start:,}-{damage.end:,} ({damage.reason})"
    kept = f"requests 1-{damage.last_intact}" if damage.last_intact else "no request"
    _write_list(state, copy, where, damage.damaged, damage.after, damage.last_intact)
    if not salvaging:
        raise StateDamaged(
            f"{where}: {lost} lost; kept as {state.path / copy}, each request listed in {copy}.txt; the state is "
            f"left as it was. Start with --salvage to go on from the intact prefix ({kept}), or with --fresh"
        )
    salvage(state.files, end)
    _set_positions_aside(state)
    return (
        f"{where}: salvaged, {kept} kept and {lost} dropped (listed in {state.path / copy}.txt); the pollers "
        "read every stream from its oldest record again"
    )


def snapshot_damaged(state: StateDirectory, error: SnapshotDamaged, *, salvaging: bool) -> str:
    """Refuse (raise) or start empty; returns the line to log when salvaged.

    Raises:
        StateDamaged: not salvaging.
    """
    copy = state.keep(SNAPSHOT)
    held = f"requests 1-{error.index}" if error.index else "every request before the journal's first"
    where = f"snapshot damaged ({error})"
    _write_list(
        state, copy, where, [], [], 0, note=f"It held {held}; the journal after it cannot be replayed without it."
    )
    if not salvaging:
        raise StateDamaged(
            f"{where}: it held {held}, and the journal continues from it; kept as {state.path / copy}; the state is "
            "left as it was. Start with --salvage to start from an empty emulator (journal and positions set aside), "
            "or with --fresh"
        )
    if state.files.exists(JOURNAL):
        state.keep(JOURNAL, "salvaged")
    for name in (SNAPSHOT, JOURNAL, COMMITTED):
        state.files.unlink(name)
    _set_positions_aside(state)
    return f"{where}: salvaged, starting from an empty emulator ({held} lost; kept as {state.path / copy})"


def _set_positions_aside(state: StateDirectory) -> None:
    if state.files.exists(POSITIONS):
        state.keep(POSITIONS, "salvaged")
    state.files.unlink(POSITIONS)
    state.files.unlink(PREVIOUS)


def _lost(last_intact: int, lost_through: int | None, requests: Sequence[Request]) -> str:
    """``requests 201-600 (from PUT /bucket/key at 12:00:03 to POST Kinesis_20131202.PutRecord at 12:02:10)``."""
    first = last_intact + 1
    span = f"requests {first}-{lost_through}" if lost_through and lost_through > first else f"request {first}"
    if lost_through is None:
        span = f"requests from {first} on (how many cannot be read)"
    named = [r for r in requests if r.method or r.target]
    if not named:
        return span
    if len(named) == 1:
        return f"{span} ({_request(named[0])})"
    return f"{span} (from {_request(named[0])} to {_request(named[-1])})"


def _request(request: Request) -> str:
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(request.moment)) if request.moment else "?"
    return f"{request.method} {request.target} at {when}".strip()


def _write_list(
    state: StateDirectory,
    copy: str,
    where: str,
    damaged: Sequence[Request],
    after: Sequence[Request],
    last_intact: int,
    *,
    note: str = "",
) -> None:
    """``<copy>.txt``: what was found, and every request it costs, one a line."""
    found = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    lines = [f"rdss local up found {where} on {found}; {copy} is the file as it was found."]
    if note:
        lines.append(note)
    lines.append(
        f"The intact prefix holds requests 1-{last_intact}." if last_intact else "Nothing before it is intact."
    )
    if damaged or after:
        lines.append("Lost with it (damaged frames as far as they can be read, then the intact ones after them):")
    for request in [*damaged, *after]:
        index = str(request.index) if request.index is not None else "?"
        flag = "" if request.intact else "  (damaged: as far as it can be read)"
        when = (
            time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(request.moment))
            + f".{int(request.moment * 1000) % 1000:03d}Z"
            if request.moment
            else "?"
        )
        lines.append(f"request {index:>8}  {when}  {request.method or '?'} {request.target or '?'}{flag}")
    state.files.write(copy + ".txt", ("\n".join(lines) + "\n").encode())


def _moment(moment: float | None) -> str:
    if not moment:
        return "?"
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(moment)) + f".{int(moment * 1000) % 1000:03d}Z"
