"""Multi-message sequences (spec: Multi-Message Sequence).

A message whose serialisation exceeds the limit travels as parts. Every part keeps the
header, with its own messageId and a shared ``messageSequence.sequence``, ``position`` 1..n
and ``total`` n, and carries as messageBody a *string*: a fragment of the JSON text of the
whole body. Concatenating the fragments in position order gives that text back.

Sizes are counted in serialised UTF-8 bytes, and a fragment never ends inside a character.
(The spec's own snippet slices ``str(dict)`` by characters; that text is Python, not JSON, and
a character count says nothing about bytes, so it is not followed.)

The ids of a split message are derived from its own messageId (:func:`sequence_id`,
:func:`part_id`: name-based UUIDs, version 5): whoever holds the id the sender was given finds
the sequence (``rdss trace``), a resend of the same message is the same parts again (dropped as
duplicates), and another message under that id conflicts with them part by part.

Every part ends in exactly one place: released with its sequence, or moved with a code. What
holds a sequence (the sequencer, a gateway receiver, :class:`Reassembler`) keeps one rule for a
part at a position already held, as the broker does for a messageId already claimed
(:mod:`rdss.model.conflicts`): *the first part to arrive holds the position*. A part with
the same messageId and the same message (:func:`same_part`: type, class and fragment) is that
part again - Kinesis delivers at least once - and is dropped, counted as a duplicate. Any other
part there (another fragment, or the same fragment under another messageId) is a *conflict*:
moved alone to ``invalid`` with GENERR004 naming the part that holds the position, while the
sequence goes on without it (:class:`PartConflict`). The first part is kept rather than the
sequence refused because it may have been released already when the second arrives: only
"first wins" gives the same answer whatever the order of arrival. A part whose ``total``
differs from the one the sequence's first part gave conflicts with the sequence the same way.
A ``total`` over :data:`rdss.MAX_SEQUENCE_PARTS` never reaches a sequence: the classifier
refuses it (GENERR004).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from rdss import MAX_MESSAGE_BYTES, MAX_SEQUENCE_PARTS
from rdss.model import jsonkeys
from rdss.model.conflicts import message_digest
from rdss.model.errors import ErrorCode
from rdss.model.messages import Message, new_id

#: How long an incomplete sequence may wait for its parts when its message sets no expiry
#: (seconds): the sweep's default in the deployment and a gateway receiver's.
SEQUENCE_TIMEOUT_SECONDS = 3600.0

# In a JSON string orjson writes '"' and '\' as two bytes; everything else in a JSON text
# (control characters are already escaped there) is written as is.
_QUOTE, _BACKSLASH = b'"', b"\\"


class SequenceError(ValueError):
    """Parts that cannot form one message: mixed sequences, totals or positions, bad fragments.

    ``error_code`` is the code every part is moved with: GENERR001 (the body is not as the
    schema says), GENERR007 when the joined body names a member twice in one object.
    """

    def __init__(self, message: str, error_code: ErrorCode = ErrorCode.GENERR001) -> None:
        super().__init__(message)
        self.error_code = error_code


class PartConflict(SequenceError):
    """One part that cannot join its sequence, which goes on without it: its position is held by
    another part, or its total is not the sequence's. The part alone is moved, with GENERR004."""

    def __init__(self, message: str) -> None:
        super().__init__(message, ErrorCode.GENERR004)


def same_part(held: Mapping[str, Any], part: Mapping[str, Any]) -> bool:
    """Whether ``part`` is the part ``held`` again (a redelivery, a resend): the same messageId
    and the same message - messageType, messageClass and fragment - whatever hops its header
    gained on the way. Anything else at a held position is a conflict (:func:`conflict`)."""
    return _message_id(held) == _message_id(part) and message_digest(held) == message_digest(part)


def conflict(sequence: str, position: int, held: Mapping[str, Any], part: Mapping[str, Any]) -> PartConflict:
    """Why ``part`` may not take ``position`` of ``sequence``, which ``held`` holds."""
    held_id, part_id = _message_id(held), _message_id(part)
    if held_id == part_id:
        what = "the same messageId with another fragment"
    elif message_digest(held) == message_digest(part):
        what = f"the same fragment under another messageId ({part_id})"
    else:
        what = f"another fragment (messageId {part_id})"
    return PartConflict(
        f"messageHeader.messageSequence.position: position {position} of sequence {sequence} is held by part "
        f"{held_id}, which came first; this part has {what}. A position holds one part"
    )


def total_conflict(sequence: str, total: int, part_total: int) -> PartConflict:
    """Why a part saying ``part_total`` may not join ``sequence``, whose first part said ``total``."""
    return PartConflict(
        f"messageHeader.messageSequence.total: sequence {sequence} has {total} parts (its first part said so); "
        f"this part says {part_total}"
    )


def _message_id(message: Mapping[str, Any]) -> Any:
    header = message.get("messageHeader")
    return header.get("messageId") if isinstance(header, Mapping) else None


def stale(
    sequence: str,
    arrived: int,
    total: int,
    *,
    expires_at: float | None,
    waited: float,
    now: float,
    timeout: float = SEQUENCE_TIMEOUT_SECONDS,
) -> tuple[ErrorCode, str] | None:
    """Whether an incomplete sequence has waited long enough, and with which code it moves to
    the error channel: GENERR003 once its message's expirationTimestamp (``expires_at``, epoch
    seconds) has passed ``now``, GENERR006 once it ``waited`` the ``timeout``; None to wait on."""
    waiting = f"{arrived} of {total} parts arrived"
    if expires_at is not None and expires_at <= now:
        return ErrorCode.GENERR003, f"sequence {sequence} expired before it was complete ({waiting})"
    if waited >= timeout:
        return ErrorCode.GENERR006, f"sequence {sequence} incomplete after {timeout:g} s ({waiting})"
    return None


def split(message: Message, limit: int = MAX_MESSAGE_BYTES) -> list[Message]:
    """The message itself if it fits in ``limit`` bytes, else its parts in position order.

    Every serialised part is at most ``limit`` bytes. Parts share a sequence id and get
    messageIds of their own, both derived from the message's messageId (:func:`sequence_id`,
    :func:`part_id`); everything else in the header is kept.

    Raises:
        ValueError: the header alone leaves no room for a fragment within ``limit``, or the
            message would take more than :data:`rdss.MAX_SEQUENCE_PARTS` parts.
    """
    if len(orjson.dumps(message)) <= limit:
        return [message]
    text = orjson.dumps(message["messageBody"])
    header = message["messageHeader"]
    whole_id = header.get("messageId")
    sequence = sequence_id(whole_id) if isinstance(whole_id, str) and whole_id else new_id()
    total = 1
    while True:
        budget = limit - _overhead(header, sequence, total)
        if budget < 4:  # room for at least one character of up to four bytes
            raise ValueError(f"a {limit}-byte limit leaves no room for a body fragment beside the header")
        fragments = _fragments(text, budget)
        if len(fragments) > MAX_SEQUENCE_PARTS:
            raise ValueError(
                f"{len(text):,} bytes of body at most {budget:,} a part would take {len(fragments):,} parts; "
                f"a sequence has at most {MAX_SEQUENCE_PARTS:,}"
            )
        if _digits(len(fragments)) <= _digits(total):
            break
        total = 10 ** _digits(len(fragments)) - 1  # widest position/total of that many digits
    parts = [
        _part(header, sequence, position, len(fragments), fragment) for position, fragment in enumerate(fragments, 1)
    ]
    for part in parts:
        size = len(orjson.dumps(part))
        if size > limit:  # pragma: no cover - would be a bug in the budget arithmetic
            raise AssertionError(f"part of {size} bytes exceeds the {limit}-byte limit")
    return parts


def join(parts: Iterable[Message]) -> Message:
    """The whole message from all of its parts, in any order (the same part twice allowed).

    The whole message carries the header of part 1 with ``messageSequence`` set to position 1
    of total 1 (a whole message), keeping the sequence id. Nothing is allocated per position
    the parts claim, only per part given: a total of 10^30 is answered at once.

    Raises:
        SequenceError: the parts do not make exactly one complete sequence, or the joined
            fragments are not JSON; :class:`PartConflict` (GENERR004) for two different parts
            at one position, or a total beyond :data:`rdss.MAX_SEQUENCE_PARTS`.
    """
    by_position: dict[int, Message] = {}
    sequence: str | None = None
    total: int | None = None
    for part in parts:
        seq = part["messageHeader"]["messageSequence"]
        if sequence is None:
            sequence, total = seq["sequence"], seq["total"]
            _check_total(sequence, total)
        elif seq["sequence"] != sequence:
            raise SequenceError(f"parts of two sequences: {sequence} and {seq['sequence']}")
        elif seq["total"] != total:
            raise SequenceError(f"sequence {sequence}: parts disagree on total ({total} and {seq['total']})")
        position = seq["position"]
        held = by_position.setdefault(position, part)
        if held is not part and not same_part(held, part):
            raise conflict(sequence, position, held, part)
    if sequence is None or total is None:
        raise SequenceError("no parts to join")
    outside = sorted((p for p in by_position if not (type(p) is int and 1 <= p <= total)), key=str)
    if outside:
        raise SequenceError(f"sequence {sequence}: positions outside 1..{total}: {outside[:10]}")
    if len(by_position) < total:
        missing = _missing(by_position, total)
        raise SequenceError(f"sequence {sequence}: missing positions {missing} of {total}")
    fragments = [by_position[position]["messageBody"] for position in range(1, total + 1)]
    if total > 1 and not all(isinstance(fragment, str) for fragment in fragments):
        raise SequenceError(f"sequence {sequence}: a part's messageBody is not a string fragment")
    text = "".join(fragments) if total > 1 else ""
    try:
        body = orjson.loads(text) if total > 1 else fragments[0]
    except orjson.JSONDecodeError as error:
        raise SequenceError(f"sequence {sequence}: the joined fragments are not JSON: {error}") from error
    if total > 1:
        encoded = text.encode("utf-8", "surrogatepass")
        if not jsonkeys.has_unique_names(encoded, body):
            found = jsonkeys.first_duplicate(encoded)
            where = jsonkeys.describe(["messageBody", *found[0]], found[1]) if found else "a member named twice"
            raise SequenceError(f"sequence {sequence} (whole message): {where}", ErrorCode.GENERR007)
    header = dict(by_position[1]["messageHeader"])
    header["messageSequence"] = {"sequence": sequence, "position": 1, "total": 1}
    return {"messageHeader": header, "messageBody": body}


def _check_total(sequence: str, total: Any) -> None:
    """A total a sequence can have: an integer in 1..MAX_SEQUENCE_PARTS (the classifier has said
    so of any part it passed; parts handed over unclassified are checked here)."""
    if type(total) is not int or not 1 <= total <= MAX_SEQUENCE_PARTS:
        shown = str(total) if type(total) is int and total < 10**40 else f"{str(total)[:37]}..."
        raise PartConflict(
            f"messageHeader.messageSequence.total: sequence {sequence} says {shown} parts; "
            f"a sequence has 1 to {MAX_SEQUENCE_PARTS:,}"
        )


def _missing(held: Mapping[int, object], total: int, limit: int = 10) -> list[int]:
    """The first ``limit`` positions of 1..total not in ``held``, found from the gaps between the
    positions held (never by listing 1..total)."""
    missing: list[int] = []
    previous = 0
    for position in [*sorted(held), total + 1]:
        gap = range(previous + 1, min(position, previous + 1 + limit - len(missing)))
        missing.extend(gap)
        if len(missing) >= limit:
            break
        previous = position
    return missing


@dataclass
class _Pending:
    """A sequence being gathered: its parts so far."""

    total: int
    first_seen: float
    parts: dict[int, Message] = field(default_factory=dict)


@dataclass(frozen=True)
class Incomplete:
    """A sequence still waiting for parts."""

    sequence: str
    #: The parts it will have (its first part's ``total``).
    total: int
    #: The positions held so far, in order.
    positions: tuple[int, ...]
    #: When its first part arrived (the reassembler's clock): its timeout counts from then.
    first_seen: float
    parts: tuple[Message, ...]


class Reassembler:
    """Collects parts in any order and gives back each whole message once it is complete.

    The same part again is ignored (Kinesis delivers at least once); another part at a position
    already held is refused (:class:`PartConflict`): the first holds it. A whole message
    (total 1) passes straight through.
    """

    def __init__(self, clock: Any = time.monotonic) -> None:
        self._clock = clock
        self._pending: dict[str, _Pending] = {}

    def add(self, part: Message) -> Message | None:
        """Take one part; return the whole message when this part completes it, else None.

        The same part again (:func:`same_part`) is ignored.

        Raises:
            PartConflict: the part cannot join its sequence (another part holds its position,
                its total is not the sequence's, or no sequence has that total); it was not
                taken, and the sequence goes on without it.
            SequenceError: the part completed its sequence, but the parts do not join.
        """
        seq = part["messageHeader"]["messageSequence"]
        sequence, position, total = seq["sequence"], seq["position"], seq["total"]
        if total == 1:
            return part
        pending = self._pending.get(sequence)
        if pending is not None and pending.total != total:
            raise total_conflict(sequence, pending.total, total)
        _check_total(sequence, total)
        if not (type(position) is int and 1 <= position <= total):
            raise PartConflict(f"messageHeader.messageSequence.position: {position} is outside 1..total ({total})")
        if pending is None:
            pending = self._pending[sequence] = _Pending(total, self._clock())
        held = pending.parts.setdefault(position, part)
        if held is not part:
            if same_part(held, part):
                return None
            raise conflict(sequence, position, held, part)
        if len(pending.parts) < total:
            return None
        del self._pending[sequence]
        return join(pending.parts.values())

    def incomplete(self) -> list[Incomplete]:
        """The sequences still waiting, oldest first."""
        return sorted(
            (
                Incomplete(
                    sid, p.total, tuple(sorted(p.parts)), p.first_seen, tuple(p.parts[i] for i in sorted(p.parts))
                )
                for sid, p in self._pending.items()
            ),
            key=lambda item: item.first_seen,
        )

    def discard(self, sequence: str) -> list[Message]:
        """Forget an incomplete sequence and return the parts it held (e.g. for the error channel)."""
        pending = self._pending.pop(sequence, None)
        return [] if pending is None else [pending.parts[i] for i in sorted(pending.parts)]

    def __len__(self) -> int:
        return len(self._pending)


def _fragments(text: bytes, budget: int) -> list[str]:
    """Cut a UTF-8 JSON text into fragments each serialising (as a JSON string, quotes
    excluded) to at most ``budget`` bytes, never inside a character."""
    fragments: list[str] = []
    position, size = 0, len(text)
    while position < size:
        end = min(size, position + budget)
        while True:
            chunk = text[position:end]
            cost = len(chunk) + chunk.count(_QUOTE) + chunk.count(_BACKSLASH)
            if cost <= budget:
                break
            end -= cost - budget
        while end < size and text[end] & 0xC0 == 0x80:  # a continuation byte: step back
            end -= 1
        fragments.append(text[position:end].decode("utf-8"))
        position = end
    return fragments


def _overhead(header: dict[str, Any], sequence: str, widest: int) -> int:
    """Bytes of a serialised part with an empty fragment and the widest position and total."""
    return len(orjson.dumps(_part(header, sequence, widest, widest, "")))


#: The namespace of the name-based UUIDs of split messages.
SEQUENCE_NAMESPACE = uuid.UUID("5c0b1f0e-3f5e-5d7a-9c8e-2d3b7f3a1e21")


def sequence_id(message_id: str) -> str:
    """The sequence id of the message with ``message_id`` once split into parts."""
    return str(uuid.uuid5(SEQUENCE_NAMESPACE, message_id))


def part_id(sequence: str, position: int) -> str:
    """The messageId of the part at ``position`` of ``sequence``."""
    return str(uuid.uuid5(SEQUENCE_NAMESPACE, f"{sequence}/{position}"))


def _part(header: dict[str, Any], sequence: str, position: int, total: int, fragment: str) -> Message:
    part_header = dict(header)
    part_header["messageId"] = part_id(sequence, position)
    part_header["messageSequence"] = {"sequence": sequence, "position": position, "total": total}
    return {"messageHeader": part_header, "messageBody": fragment}


def _digits(number: int) -> int:
    return len(str(number))
