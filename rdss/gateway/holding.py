"""Holding the parts of a sequence in a gateway receiver until the whole message can be delivered.

:class:`SequenceHolding` is a component the receiver owns: it keeps the held parts, the
reassembler and the sequences lately complete, and reaches back to its receiver only through
:class:`HoldingHost`, the few things it needs of one (move records, forget or mark a messageId,
offer a whole message, a record's arrival order)."""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import orjson

from rdss.gateway.backend import Delivery, TransportError
from rdss.gateway.received import Received, ReceiveStats, Rejecting
from rdss.model import timestamps
from rdss.model.errors import ErrorCode
from rdss.model.sequences import PartConflict, Reassembler, SequenceError, stale
from rdss.model.validation import Verdict, validate_message
from rdss.repository.entries import RECEIVED, Entry, Repository

_log = logging.getLogger(__name__)

#: How many parts of the sequences lately complete a receiver remembers (the latest sequences'),
#: to refuse another part of one of them arriving later.
_COMPLETE_PARTS = 100_000


@dataclass
class Held:
    """Parts of one sequence waiting for the rest: position -> (delivery, header)."""

    parts: dict[int, tuple[Delivery, Mapping[str, Any]]] = field(default_factory=dict)


class CompleteSequences:
    """The parts of the sequences lately complete (delivered, or moved whole), sequence id ->
    their messageIds: at most ``limit`` parts, the oldest sequences forgotten first."""

    def __init__(self, limit: int = _COMPLETE_PARTS) -> None:
        self.limit = limit
        self._parts: OrderedDict[str, frozenset[str]] = OrderedDict()
        self._count = 0

    def add(self, sequence: str, parts: frozenset[str]) -> None:
        if sequence in self._parts:
            return
        self._parts[sequence] = parts
        self._count += len(parts)
        while self._count > self.limit and len(self._parts) > 1:
            _, forgotten = self._parts.popitem(last=False)
            self._count -= len(forgotten)

    def get(self, sequence: str) -> frozenset[str] | None:
        return self._parts.get(sequence)


class HoldingHost(Rejecting, Protocol):
    """What :class:`SequenceHolding` needs of the receiver it holds parts for."""

    channel: str
    stats: ReceiveStats
    repository: Repository

    def move(self, items: list[tuple[Delivery, ErrorCode, str]], *, settle: bool = True) -> list[Delivery]:
        """Move records to ``invalid``/``error`` with their codes; the ones that could not be moved."""
        ...

    def forget(self, message_id: str, *, recent: bool = False) -> None:
        """``message_id`` is no longer in flight (``recent``: and was just received or moved)."""
        ...

    def in_flight(self, message_id: str) -> None:
        """``message_id`` is held: the same message read again meanwhile is a duplicate."""
        ...

    def offer(self, received: Received) -> None:
        """A whole message, ready for the application."""
        ...

    def arrival(self, delivery: Delivery) -> int:
        """The order ``delivery`` was read in (-1: not known)."""
        ...


class SequenceHolding:
    """Holds the parts of sequences until they are whole, forgets what was read after a rewound
    position, and moves sequences that waited too long - as the sequencer and its sweep do in
    the deployed system."""

    def __init__(
        self,
        host: HoldingHost,
        *,
        clock: Callable[[], float],
        now: Callable[[], datetime],
        sequence_timeout: float,
    ) -> None:
        self.host = host
        self.clock = clock
        self.now = now
        self.sequence_timeout = sequence_timeout
        self._reassembler = Reassembler(clock=clock)
        self._held: dict[str, Held] = {}
        self._complete = CompleteSequences()

    def hold(self, delivery: Delivery, verdict: Verdict, now: datetime) -> list[Delivery]:
        """Hold one part; deliver its sequence when complete. Returns deliveries to settle."""
        assert verdict.message is not None
        header = verdict.message["messageHeader"]
        sequence = header["messageSequence"]
        failed: SequenceError | None = None
        try:
            self._check_not_complete(header)
            whole = self._reassembler.add(verdict.message)
        except PartConflict as error:  # another part holds its position, or another total: it alone moves
            self.host.stats.invalid += 1
            self._move_parts([(delivery, header)], error.error_code, str(error))
            return []
        except SequenceError as error:  # it completed its sequence, but the parts do not join
            whole, failed = None, error
        held = self._held.setdefault(sequence["sequence"], Held())
        if sequence["position"] in held.parts:  # the same part again (the reassembler ignored it)
            self.host.stats.duplicates += 1
            return [delivery]
        held.parts[sequence["position"]] = (delivery, header)
        self.host.in_flight(str(header["messageId"]))
        if failed is not None:  # every part goes, with the sequencer's code
            parts = self.release(sequence["sequence"])
            self._completed(sequence["sequence"], [h for _, h in parts])
            self.host.stats.invalid += len(parts)
            self._move_parts(parts, failed.error_code, f"sequence {sequence['sequence']}: {failed}")
            return []
        if whole is None:
            return []
        del self._held[sequence["sequence"]]
        ordered = [held.parts[position] for position in sorted(held.parts)]
        self._completed(sequence["sequence"], [h for _, h in ordered])
        check = validate_message(whole, now=now)
        if not check.valid:  # every part goes, decorated with the whole message's code
            assert check.error_code is not None
            why = f"sequence {sequence['sequence']} (whole message): {check.error_description}"
            self.host.stats.invalid += len(ordered)
            self._move_parts(ordered, check.error_code, why)
            return []
        self.host.offer(
            Received(
                whole,
                orjson.dumps(whole),
                self.host.channel,
                tuple(d for d, _ in ordered),
                tuple(h for _, h in ordered),
                self.host,
            )
        )
        return []

    def drop_after(self, partition: str, first: int) -> list[Delivery]:
        """Forget the held parts read from ``partition`` at or after arrival ``first``; return them."""
        dropped: list[Delivery] = []
        for sequence, held in list(self._held.items()):
            later = {
                p for p, (d, _) in held.parts.items() if d.partition == partition and self.host.arrival(d) >= first
            }
            if not later:
                continue
            parts = self._reassembler.discard(sequence)
            for position in later:
                delivery, header = held.parts.pop(position)
                dropped.append(delivery)
                self.host.forget(str(header["messageId"]))
            for part in parts:
                if part["messageHeader"]["messageSequence"]["position"] not in later:
                    self._reassembler.add(part)
            if not held.parts:
                del self._held[sequence]
        return dropped

    def release_unowned(self, owned: set[str]) -> None:
        """Let go of the sequences with a part read from a partition this receiver no longer owns:
        the partition's new owner reads those parts again."""
        for sequence, held in list(self._held.items()):
            if any(d.partition not in owned for d, _ in held.parts.values()):
                self.release(sequence)

    def _completed(self, sequence: str, headers: list[Mapping[str, Any]]) -> None:
        """Remember which parts completed ``sequence``: a part of it arriving later is one of
        them read again (after a rewind: held anew) or another part, which conflicts with them."""
        self._complete.add(sequence, frozenset(str(header["messageId"]) for header in headers))

    def _check_not_complete(self, header: Mapping[str, Any]) -> None:
        """Refuse a part of a sequence complete already (delivered, or moved whole) that is not
        one of its parts: its position is held. A sequence completed before a restart, or too
        long ago to be remembered, is not known: such a part waits, and is moved as an incomplete
        sequence (GENERR006) when it times out."""
        sequence = header["messageSequence"]
        parts = self._complete.get(str(sequence["sequence"]))
        if parts is not None and str(header.get("messageId")) not in parts:
            raise PartConflict(
                f"messageHeader.messageSequence: sequence {sequence['sequence']} was complete already "
                f"({len(parts)} parts); this part (messageId {header.get('messageId')}, position "
                f"{sequence['position']}) is not one of them"
            )

    def release(self, sequence: str) -> list[tuple[Delivery, Mapping[str, Any]]]:
        """Forget a held sequence entirely; return its deliveries and their headers."""
        self._reassembler.discard(sequence)
        held = self._held.pop(sequence, Held())
        for _, header in held.parts.values():
            self.host.forget(str(header["messageId"]))
        return [held.parts[position] for position in sorted(held.parts)]

    def _move_parts(self, parts: list[tuple[Delivery, Mapping[str, Any]]], code: ErrorCode, why: str) -> None:
        """Move parts (decorated with ``code``) and, those moved, record RECEIVED with the code, as
        a rejected message is: the same part read again (a resend, a redelivery) is then a
        duplicate, not moved a second time. One that could not be moved is read again."""
        unmoved = {id(d) for d in self.host.move([(d, code, why) for d, _ in parts])}
        moved = [header for delivery, header in parts if id(delivery) not in unmoved]
        if not moved:
            return
        try:
            self.host.repository.record([Entry.of(header, RECEIVED, error_code=str(code)) for header in moved])
        except TransportError:
            raise
        except Exception as error:  # moved already: a re-read is then moved again, never lost
            _log.error("%s: could not record %d moved parts as %s: %s", self.host.channel, len(moved), code, error)
        for header in moved:
            self.host.forget(str(header["messageId"]), recent=True)

    def time_out(self) -> None:
        """Move the sequences past their expiry or the timeout to ``error``, parts and all."""
        now = self.now()
        for incomplete in self._reassembler.incomplete():
            header = incomplete.parts[0]["messageHeader"]
            verdict = stale(
                incomplete.sequence,
                len(incomplete.positions),
                incomplete.total,
                expires_at=timestamps.expires_at(header),
                waited=self.clock() - incomplete.first_seen,
                now=now.timestamp(),
                timeout=self.sequence_timeout,
            )
            if verdict is None:
                continue
            code, why = verdict
            parts = self.release(incomplete.sequence)
            self.host.stats.expired += len(parts)
            self._move_parts(parts, code, why)
