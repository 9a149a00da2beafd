"""``rdss bench translate``: the Message Translators (rdss.model.translation) on realistic
messages, beside the classifier on the same messages (what a consumer reading another version
pays on top of what it pays anyway)."""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from functools import partial
from typing import Any

import orjson

from rdss.bench import rate
from rdss.model.translation import translate
from rdss.model.validation import validate
from rdss.model.workload import Workload

#: The tenantJiscID the benchmark's messages go up with.
TENANT = 1


@dataclass(frozen=True)
class Figures:
    messages: int
    mean_bytes: float
    #: 3.0.2 -> 4.0.0 and 4.0.0 -> 3.0.2, messages a second (median over the rounds).
    up_per_s: float
    down_per_s: float
    classifier_per_s: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def run(count: int, *, seed: int = 7, rounds: int = 5) -> Figures:
    """Time both directions and the classifier on the same ``count`` Metadata messages (the
    workload's mix without the Vocabulary types, which have no form in 4.0.0)."""
    messages = [m for m in Workload(seed).mix(count * 2) if not m["messageHeader"]["messageType"].startswith("Vocab")]
    payloads = [orjson.dumps(m) for m in messages[:count]]
    # judged: as a receiver translates what its classifier has just passed (translate() alone
    # would classify each payload first)
    up = partial(translate, to="4.0.0", tenant_jisc_id=TENANT, judged=True)
    translated = [up(p) for p in payloads]
    down = partial(translate, to="3.0.2", judged=True)
    ups, downs, classified = [], [], []
    for _ in range(rounds):
        ups.append(rate(payloads, up, rounds=1))
        downs.append(rate(translated, down, rounds=1))
        classified.append(rate(payloads, validate, rounds=1))
    return Figures(
        messages=len(payloads),
        mean_bytes=sum(map(len, payloads)) / len(payloads),
        up_per_s=statistics.median(ups),
        down_per_s=statistics.median(downs),
        classifier_per_s=statistics.median(classified),
    )
