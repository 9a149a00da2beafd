"""Holding the parts of a sequence in a gateway receiver until the whole message can be delivered."""

from __future__ import annotations

import logging
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

import orjson

from rdss.gateway.backend import Delivery, TransportError
from rdss.gateway.received import Received, ReceiveStats
from rdss.model import timestamps
from rdss.model.errors import ErrorCode
from rdss.model.sequences import PartConflict, Reassembler, SequenceError, stale
from rdss.model.validation import Verdict, validate_message
from rdss.repository.entries import RECEIVED, Entry, Repository

if TYPE_CHECKING:
    from rdss.gateway.consumer import Receiver

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


class SequenceHolding:
    """The part of :class:`rdss.gateway.consumer.Receiver` that holds the parts of sequences until
    they are whole, forgets what it read after a rewound position, and moves sequences that
    waited too long - as the sequencer and its sweep do in the deployed system."""

    if TYPE_CHECKING:  # the Receiver's, which this class is part of
        channel: str
        stats: ReceiveStats
        repository: Repository
        clock: Callable[[], float]
        now: Callable[[], datetime]
        sequence_timeout: float
        _held: dict[str, Held]
        _complete: CompleteSequences
        _reassembler: Reassembler
        _in_flight: set[str]
        _order: dict[str, int]
        _ready: deque[Received]

        def _move(self, items: list[tuple[Delivery, ErrorCode, str]], *, settle: bool = True) -> list[Delivery]: ...

        def _forget(self, message_id: str, *, recent: bool = False) -> None: ...

        def _offer(self, received: Received) -> None: ...

    def _hold(self, delivery: Delivery, verdict: Verdict, now: datetime) -> list[Delivery]:
        """Hold one part; deliver its sequence when complete. Returns deliveries to settle."""
        assert verdict.message is not None
        header = verdict.message["messageHeader"]
        sequence = header["messageSequence"]
        failed: SequenceError | None = None
        try:
            self._check_not_complete(header)
            whole = self._reassembler.add(verdict.message)
        except PartConflict as error:  # another part holds its position, or another total: it alone moves
            self.stats.invalid += 1
            self._move_parts([(delivery, header)], error.error_code, str(error))
            return []
        except SequenceError as error:  # it completed its sequence, but the parts do not join
            whole, failed = None, error
        held = self._held.setdefault(sequence["sequence"], Held())
        if sequence["position"] in held.parts:  # the same part again (the reassembler ignored it)
            self.stats.duplicates += 1
            return [delivery]
        held.parts[sequence["position"]] = (delivery, header)
        self._in_flight.add(str(header["messageId"]))
        if failed is not None:  # every part goes, with the sequencer's code
            parts = self._release(sequence["sequence"])
            self._completed(sequence["sequence"], [h for _, h in parts])
            self.stats.invalid += len(parts)
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
            self.stats.invalid += len(ordered)
            self._move_parts(ordered, check.error_code, why)
            return []
        self._offer(
            Received(
                whole,
                orjson.dumps(whole),
                self.channel,
                tuple(d for d, _ in ordered),
                tuple(h for _, h in ordered),
                cast("Receiver", self),
            )
        )
        return []

    def _drop_after(self, partition: str, first: int) -> list[Delivery]:
        """Forget what was read from ``partition`` at or after arrival ``first``; return it."""
        dropped: list[Delivery] = []
        keep: deque[Received] = deque()
        for received in self._ready:
            if any(d.partition == partition and self._order.get(d.id, -1) >= first for d in received.deliveries):
                dropped.extend(received.deliveries)
                for header in received.parts:
                    self._forget(str(header["messageId"]))
            else:
                keep.append(received)
        self._ready = keep
        for sequence, held in list(self._held.items()):
            later = {
                p for p, (d, _) in held.parts.items() if d.partition == partition and self._order.get(d.id, -1) >= first
            }
            if not later:
                continue
            parts = self._reassembler.discard(sequence)
            for position in later:
                delivery, header = held.parts.pop(position)
                dropped.append(delivery)
                self._forget(str(header["messageId"]))
            for part in parts:
                if part["messageHeader"]["messageSequence"]["position"] not in later:
                    self._reassembler.add(part)
            if not held.parts:
                del self._held[sequence]
        return dropped

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

    def _release(self, sequence: str) -> list[tuple[Delivery, Mapping[str, Any]]]:
        """Forget a held sequence entirely; return its deliveries and their headers."""
        self._reassembler.discard(sequence)
        held = self._held.pop(sequence, Held())
        for _, header in held.parts.values():
            self._forget(str(header["messageId"]))
        return [held.parts[position] for position in sorted(held.parts)]

    def _move_parts(self, parts: list[tuple[Delivery, Mapping[str, Any]]], code: ErrorCode, why: str) -> None:
        """Move parts (decorated with ``code``) and, those moved, record RECEIVED with the code, as
        a rejected message is: the same part read again (a resend, a redelivery) is then a
        duplicate, not moved a second time. One that could not be moved is read again."""
        unmoved = {id(d) for d in self._move([(d, code, why) for d, _ in parts])}
        moved = [header for delivery, header in parts if id(delivery) not in unmoved]
        if not moved:
            return
        try:
            self.repository.record([Entry.of(header, RECEIVED, error_code=str(code)) for header in moved])
        except TransportError:
            raise
        except Exception as error:  # moved already: a re-read is then moved again, never lost
            _log.error("%s: could not record %d moved parts as %s: %s", self.channel, len(moved), code, error)
        for header in moved:
            self._forget(str(header["messageId"]), recent=True)

    def _time_out_sequences(self) -> None:
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
            parts = self._release(incomplete.sequence)
            self.stats.expired += len(parts)
            self._move_parts(parts, code, why)
