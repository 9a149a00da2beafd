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

A list can also go on without a token coming back: a fresh token on every page, each page empty
or listing the same records again. :class:`Novelty` stops it after :data:`MAX_BARREN_PAGES`
pages in a row that list no record new to the harvest (:class:`ListWithoutEnd`).
"""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Iterable
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


#: How many pages in a row may add no record new to the harvest before the list is taken for
#: one without end (fresh tokens for ever, each page empty or listing what came before).
MAX_BARREN_PAGES = 100


class ListWithoutEnd(HarvestError):
    """Page after page of fresh resumption tokens and nothing new: the list never ends."""

    def __init__(self, pages: int, page: int) -> None:
        super().__init__(
            f"{pages:,} pages in a row, up to page {page:,} of this harvest, listed no record it had not "
            "listed before, each with a fresh resumption token: the list does not end, so the harvest "
            "stops at the last page published, where the next harvest resumes",
            "listWithoutEnd",
        )


class Novelty:
    """Which records one harvest has listed, to tell a page that adds nothing.

    A record is its identifier and datestamp (a new version of a record is new); each is kept as
    an 8-byte digest, so a harvest of a million records costs tens of megabytes, as its state does.
    """

    def __init__(self, limit: int = MAX_BARREN_PAGES) -> None:
        self.limit = limit
        #: Pages in a row that listed nothing new.
        self.barren = 0
        self._seen: set[bytes] = set()

    def listed(self, records: Iterable[tuple[str, str]], page: int) -> None:
        """A page listed ``records`` (identifier, datestamp).

        Raises:
            ListWithoutEnd: the ``limit``-th page in a row that listed nothing new.
        """
        before = len(self._seen)
        self._seen.update(_digest(f"{identifier}\n{datestamp}", 8) for identifier, datestamp in records)
        self.barren = 0 if len(self._seen) > before else self.barren + 1
        if self.barren >= self.limit:
            raise ListWithoutEnd(self.barren, page)


def _digest(token: str, size: int = 16) -> bytes:
    """16 bytes per token: a token is the repository's to choose, of any length."""
    return hashlib.blake2b(token.encode("utf-8", "surrogatepass"), digest_size=size).digest()


__all__ = ["MAX_BARREN_PAGES", "WINDOW", "ListWithoutEnd", "Mark", "Novelty", "ResumptionTokenLoop", "TokenTrail"]
