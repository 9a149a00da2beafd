"""What ``rdss trace`` finds, as a timeline: the events the deployment recorded about one
message, the records carrying it into ``input`` (:class:`Dispatch`, each with the broker's
decision), and where its copies are. Built by :mod:`rdss.trace.findings` from what
:mod:`rdss.trace.sources` reads; shown by the CLI (:meth:`Timeline.lines`, :meth:`Timeline.as_dict`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from rdss.model import timestamps


@dataclass(frozen=True)
class Event:
    """One thing that happened to the message, as the deployment recorded it."""

    at: datetime | None
    where: str
    what: str
    details: Mapping[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "at": timestamps.format(self.at) if self.at else None,
            "where": self.where,
            "what": self.what,
            **({"details": dict(self.details)} if self.details else {}),
        }


@dataclass
class Dispatch:
    """One record put on ``input`` carrying the message, and what the broker decided for it."""

    record: str
    arrived: datetime | None
    outcome: str  # routed | part | invalid | error | duplicate | conflict | redriven | replayed | pending
    channels: list[str] = field(default_factory=list)
    error_code: str | None = None
    error_description: str | None = None
    duplicate_of: str | None = None
    #: For a conflict: the record that claimed the messageId first, for a different message.
    conflicts_with: str | None = None
    #: For a record parked and put back by ``rdss redrive``: the record it went back as.
    redriven_as: str | None = None

    def as_dict(self) -> dict[str, Any]:
        found: dict[str, Any] = {"record": self.record, "outcome": self.outcome, "channels": self.channels}
        if self.arrived:
            found["arrived"] = timestamps.format(self.arrived)
        for name, value in (
            ("errorCode", self.error_code),
            ("errorDescription", self.error_description),
            ("duplicateOf", self.duplicate_of),
            ("conflictsWith", self.conflicts_with),
            ("redrivenAs", self.redriven_as),
        ):
            if value:
                found[name] = value
        return found


@dataclass
class Timeline:
    """What ``rdss trace`` found about one messageId."""

    message_id: str
    events: list[Event] = field(default_factory=list)
    dispatches: list[Dispatch] = field(default_factory=list)
    #: channel -> records of the message found there (routed copies, parts, decorated copies)
    channels: dict[str, int] = field(default_factory=dict)
    error_code: str | None = None
    error_description: str | None = None
    history: list[dict[str, Any]] = field(default_factory=list)
    sequence: dict[str, Any] | None = None
    archives: list[dict[str, Any]] = field(default_factory=list)
    header: dict[str, Any] | None = None
    #: consumers' moves of the message: (consumer group, channel, errorCode)
    moves: list[tuple[str, str, str | None]] = field(default_factory=list)
    #: For a sequence (:mod:`rdss.trace.sequences`): what became of the whole message.
    whole: dict[str, Any] | None = None
    #: For a request: each copy of its replies on a channel (:mod:`rdss.trace.replies`).
    replies: list[dict[str, Any]] = field(default_factory=list)

    @property
    def found(self) -> bool:
        return bool(self.events)

    def summary(self) -> str:
        """Where it went, in one line."""
        if not self.found:
            return "nothing found"
        if self.whole is not None:
            return f"sequence {self.sequence_id}: " + _whole_summary(self.whole)
        parts = []
        outcomes = ("routed", "part", "conflict", "invalid", "error", "duplicate", "redriven", "replayed", "pending")
        for outcome in outcomes:
            chosen = [d for d in self.dispatches if d.outcome == outcome]
            if not chosen:
                continue
            if outcome == "routed":
                parts.append(f"routed to {', '.join(sorted({c for d in chosen for c in d.channels}))}")
            elif outcome == "part":
                released = [c for c in self.channels if c not in ("input", "sequence", "invalid", "error")]
                where = f"released to {', '.join(released)}" if released else "not released yet"
                parts.append(f"a part of sequence {self.sequence_id}, {where}")
            elif outcome == "conflict":
                parts.append(f"{len(chosen)} record(s) reusing the id for a different message, moved to invalid")
            elif outcome in ("invalid", "error"):
                codes = sorted({d.error_code or "?" for d in chosen})
                parts.append(f"{len(chosen)} record(s) moved to {outcome} ({', '.join(codes)})")
            elif outcome == "duplicate":
                parts.append(f"{len(chosen)} duplicate record(s) dropped")
            elif outcome == "redriven":
                parts.append(f"{len(chosen)} parked record(s) put back by rdss redrive")
            elif outcome == "replayed":
                again = ", ".join(sorted({c for d in chosen for c in d.channels})) or "-"
                parts.append(f"{len(chosen)} record(s) sent again by rdss replay, routed to {again}")
            else:
                parts.append(f"{len(chosen)} record(s) not processed yet")
        for group, channel, code in self.moves:
            parts.append(f"moved to {channel} by consumer group {group} ({code})")
        for reply in self.replies:
            parts.append(f"answered by {reply['messageId']} on {reply['channel']}")
        if not self.dispatches:
            moved = [c for c in ("invalid", "error") if c in self.channels and not self._only_moves(c)]
            routed = [c for c in self.channels if c not in ("input", "sequence", "invalid", "error")]
            if routed:
                parts.append(f"found on {', '.join(routed)}")
            if moved:
                parts.append(f"moved to {', '.join(moved)} ({self.error_code})")
            if not parts:
                parts.append("found only in the archives")
        return "; ".join(parts)

    def _only_moves(self, channel: str) -> bool:
        """Whether every copy of the message on ``channel`` is a consumer's move."""
        return self.channels.get(channel, 0) <= sum(1 for _, c, _ in self.moves if c == channel)

    @property
    def sequence_id(self) -> str | None:
        return self.sequence.get("sequence") if self.sequence else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "messageId": self.message_id,
            "found": self.found,
            "summary": self.summary(),
            "messageType": (self.header or {}).get("messageType"),
            "messageClass": (self.header or {}).get("messageClass"),
            "records": [d.as_dict() for d in self.dispatches],
            "channels": self.channels,
            "errorCode": self.error_code,
            "errorDescription": self.error_description,
            "messageHistory": self.history,
            "sequence": self.sequence,
            **({"whole": self.whole} if self.whole is not None else {}),
            "archives": self.archives,
            "moves": [{"group": g, "channel": c, "errorCode": code} for g, c, code in self.moves],
            "replies": self.replies,
            "events": [e.as_dict() for e in sorted(self.events, key=_order)],
        }

    def lines(self) -> list[str]:
        """The timeline for a terminal."""
        header = self.header or {}
        title = f"message {self.message_id}"
        if header:
            title += f" - {header.get('messageType')} {header.get('messageClass')}"
        out = [title]
        for event in sorted(self.events, key=_order):
            stamp = timestamps.format(event.at) if event.at else " " * 24
            out.append(f"  {stamp}  {event.where:<10} {event.what}")
        out.append(f"where it went: {self.summary()}")
        return out


def _whole_summary(whole: Mapping[str, Any]) -> str:
    if whole.get("reassembled"):
        verdict = "valid" if whole.get("valid") else f"invalid, {whole.get('errorCode')}"
        return f"released to {whole['channel']}, reassembled as message {whole['messageId']} ({verdict})"
    if "why" in whole:
        return f"released to {whole['channel']}, parts that do not join"
    return f"moved to {whole['channel']} ({whole.get('errorCode')})"


def _order(event: Event) -> tuple[float, str]:
    return (event.at.timestamp() if event.at else float("inf"), event.where)


@dataclass(frozen=True)
class Record:
    """One record of a channel, as the trace read it."""

    channel: str
    shard: str
    sequence_number: str
    arrived: datetime | None
    data: bytes
    partition_key: str = ""

    @property
    def record(self) -> str:
        return f"{self.shard}/{self.sequence_number}"
