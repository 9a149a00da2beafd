"""The resumption tokens of one harvest, remembered to tell a list that loops.

OAI-PMH is stateless: a resumption token names a place in a list, so a token that comes back -
the very token the request carried, or one handed out pages before - lists the same pages again,
for ever. A harvest that follows it never ends, and its saved position would make the next one
loop too. :class:`TokenTrail` remembers each token of the harvest with the harvest position it
was saved with (its page and the high-water datestamp then), so that when one comes back the
harvest stops and keeps the position from before the loop.

Memory is bounded whatever the list's length: the trail keeps a digest of each of the last
:data:`WINDOW` tokens (a token repeating within that many pages is caught when it first
repeats), and of the tokens of pages 1, 2, 4, 8... of the harvest for good. A longer cycle is
caught on its second turn past one of those: a cycle of ``L`` pages entered at page ``m`` is
seen by page ``2m + L`` at the latest.
"""

from __future__ import annotations

import hashlib
from collections import deque
from dataclasses import dataclass

from rdss.adaptors.oai_pmh.client import HarvestError
from rdss.host.display import shorten

#: How many of the latest tokens are remembered one by one.
WINDOW = 10_000


@dataclass(frozen=True)
class Mark:
    """Where a token was first seen in the harvest."""

    #: The page of the harvest that handed the token out (0: the token the harvest resumed with).
    page: int
    #: The high-water datestamp saved with the token.
    high_water: str | None


class ResumptionTokenLoop(HarvestError):
    """A resumption token came back: the repository's list loops."""

    def __init__(self, token: str, first: int, again: int) -> None:
        first_seen = "the token this harvest resumed with" if first == 0 else f"page {first:,} handed it out"
        super().__init__(
            f"the repository handed out resumption token {shorten(token, 80)!r} again on page {again:,} "
            f"of this harvest ({first_seen}): its list loops, so the harvest stops at that token, "
            "where the next harvest resumes",
            "resumptionTokenLoop",
        )
        self.token = token


class TokenTrail:
    """The tokens of one harvest, in the order its pages handed them out."""

    def __init__(self, window: int = WINDOW) -> None:
        self.window = window
        #: Pages that handed out a token (the next token is handed out by page ``pages + 1``).
        self.pages = 0
        self._recent: dict[bytes, Mark] = {}
        self._order: deque[bytes] = deque()
        self._milestones: dict[bytes, Mark] = {}

    def __len__(self) -> int:
        """How many tokens are remembered (at most ``window`` and one per power of two)."""
        return len(self._recent.keys() | self._milestones.keys())

    def resumed_with(self, token: str, high_water: str | None) -> None:
        """The token the harvest starts from (page 0)."""
        self._remember(_digest(token), Mark(0, high_water))

    def seen(self, token: str) -> Mark | None:
        """Where ``token`` was seen before in this harvest, or None."""
        digest = _digest(token)
        return self._recent.get(digest) or self._milestones.get(digest)

    def handed_out(self, token: str, high_water: str | None) -> None:
        """The next page handed out ``token``, a new one (see :meth:`seen`), saved with ``high_water``."""
        self.pages += 1
        self._remember(_digest(token), Mark(self.pages, high_water))

    def _remember(self, digest: bytes, mark: Mark) -> None:
        if mark.page & (mark.page - 1) == 0:  # 0, 1, 2, 4, 8...: kept for good
            self._milestones[digest] = mark
        self._recent[digest] = mark
        self._order.append(digest)
        while len(self._order) > self.window:
            del self._recent[self._order.popleft()]


def _digest(token: str) -> bytes:
    """16 bytes per token: a token is the repository's to choose, of any length."""
    return hashlib.blake2b(token.encode("utf-8", "surrogatepass"), digest_size=16).digest()


__all__ = ["WINDOW", "Mark", "ResumptionTokenLoop", "TokenTrail"]
