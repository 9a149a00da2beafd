"""A replay's mark: the messageHistory hop that says a record was sent again by ``rdss replay``.

A replay takes archived records and sends them again, either through the broker (into ``input``)
or straight onto a routed channel for one consumer group. Either way the record it makes ends
with a hop whose machineId names the replay (``rdss-replay/<name>``) or the replay and the one
group it is for (``rdss-replay/<name>/<group>``): consumers and ``rdss trace`` read it, and
receivers de-duplicate a replayed message under its own key (:func:`dedupe_key`), so a message a
group received before is delivered once more - once per replay, however often the record comes.

Only the system writes a *last* hop onto a routed channel: the broker appends its own hop to
everything it routes, so a replay hop a producer put into its message is never last there. The
broker makes a replay's last hop only for a record an operator granted (the grant lies in the
broker's table, which no vendor's role may write: :mod:`rdss.processors.replay`), and a record
for one group is put on its routed channel by the operator's replay itself.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: How a replay's machineId starts.
PREFIX = "rdss-replay/"
#: A replay's name: letters, digits, ``.``, ``_`` and ``-`` (it appears in keys and hops).
NAME = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")
_MARK = re.compile(r"\Ardss-replay/([A-Za-z0-9][A-Za-z0-9._-]{0,63})(?:/([A-Za-z0-9][A-Za-z0-9._-]{0,127}))?\Z")


@dataclass(frozen=True)
class Mark:
    """A replay's mark on a record: the replay's name and, for a replay to one group, the group."""

    name: str
    group: str | None = None

    @property
    def machine_id(self) -> str:
        return f"{PREFIX}{self.name}" + (f"/{self.group}" if self.group else "")

    def reaches(self, group: str | None) -> bool:
        """Whether a receiver of ``group`` takes the record (a replay for one group reaches it alone)."""
        return self.group is None or self.group == group


def parse(machine_id: Any) -> Mark | None:
    """The mark a machineId makes, or None when it is not a replay's."""
    match = _MARK.match(machine_id) if isinstance(machine_id, str) else None
    return None if match is None else Mark(match.group(1), match.group(2))


def mark_of(header: Mapping[str, Any]) -> Mark | None:
    """The replay a routed record comes from: its *last* hop's mark (see the module docstring
    for why only the last), or None."""
    hops = header.get("messageHistory")
    if not isinstance(hops, Sequence) or isinstance(hops, str | bytes) or not hops:
        return None
    last = hops[-1]
    return parse(last.get("machineId")) if isinstance(last, Mapping) else None


def requested(header: Mapping[str, Any]) -> Mark | None:
    """The replay a record on ``input`` says it comes from (any of its hops, the latest first):
    a claim the broker checks against the operator's grant, never trusts by itself."""
    hops = header.get("messageHistory")
    if not isinstance(hops, Sequence) or isinstance(hops, str | bytes):
        return None
    for hop in reversed(hops):
        mark = parse(hop.get("machineId")) if isinstance(hop, Mapping) else None
        if mark is not None and mark.group is None:
            return mark
    return None


def dedupe_key(message_id: str, mark: Mark | None) -> str:
    """The key a receiver de-duplicates a message under: its messageId, or for a replayed one
    ``replay/<name>/<messageId>`` - delivered once per replay."""
    return message_id if mark is None else f"replay/{mark.name}/{message_id}"


def grant_key(name: str, message_id: str) -> str:
    """The key of the operator's grant in the broker's table: ``replay-grant#<name>#<messageId>``."""
    return f"replay-grant#{name}#{message_id}"


def claim_key(name: str, message_id: str) -> str:
    """The key the broker claims a granted replay under (``replay#<name>#<messageId>``): routed
    once per replay, a second copy dropped as its duplicate."""
    return f"replay#{name}#{message_id}"
