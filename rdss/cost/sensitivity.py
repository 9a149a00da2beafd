"""Which assumption would flip the ranking between the project and a peer.

The bill rests on figures the project measures and on a few it cannot: the per-call latency
(measured against the embedded emulator, not AWS), the share of rejected messages, the
messages' size (the workload's mix), the broker's CPU per message (this build machine's). For
each, the factor it would have to be multiplied by - within 1/16x to 16x, both bills recomputed
- for the cheaper of the two to stop being the cheaper; or none, when no factor in that range
does.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from rdss.cost.estimate import project
from rdss.cost.peers import Peer, peer
from rdss.cost.rules import CALL_SECONDS
from rdss.deployment.capacity import MEASURED, REJECTED_SHARE, Figures
from rdss.deployment.settings import EnvironmentConfig

#: The widest factor tried either way.
LIMIT = 16.0
_STEPS = 33


@dataclass(frozen=True)
class Assumption:
    name: str
    #: The figures and rejected share with the assumption multiplied by a factor.
    scaled: Callable[[Figures, float, float], tuple[Figures, float]]
    #: The assumption's value at a factor, for the line (e.g. "2.5 ms").
    shown: Callable[[Figures, float, float], str]


def _latency(figures: Figures) -> float:
    return figures.call_seconds if figures.call_seconds is not None else CALL_SECONDS


def _sized(f: Figures, k: float) -> Figures:
    return replace(
        f,
        input_bytes=f.input_bytes * k,
        routed_bytes=f.routed_bytes * k,
        archive_entry_bytes=f.archive_entry_bytes * k,
        archive_gzip_bytes={n: b * k for n, b in f.archive_gzip_bytes.items()},
    )


ASSUMPTIONS = (
    Assumption(
        "per-call latency",
        lambda f, r, k: (replace(f, call_seconds=_latency(f) * k), r),
        lambda f, r, k: f"{_latency(f) * k * 1000:.3g} ms",
    ),
    Assumption("message size", lambda f, r, k: (_sized(f, k), r), lambda f, r, k: f"{f.input_bytes * k:,.0f} bytes"),
    Assumption(
        "rejected share",
        lambda f, r, k: (f, min(1.0, r * k)),
        lambda f, r, k: f"{min(1.0, r * k):.3g}",
    ),
    Assumption(
        "write units per claim",
        lambda f, r, k: (replace(f, claim_write_units=f.claim_write_units * k), r),
        lambda f, r, k: f"{f.claim_write_units * k:.3g}",
    ),
    Assumption(
        "broker CPU per message",
        lambda f, r, k: (replace(f, broker_cpu_per_message=f.broker_cpu_per_message * k), r),
        lambda f, r, k: f"{f.broker_cpu_per_message * k * 1000:.3g} ms",
    ),
)


#: The project's bill over a peer's under the figures and rejected share given (:func:`ratio`).
Ratio = Callable[[Figures, float], float]


def ratio(settings: EnvironmentConfig, rate: float, name: Peer, region: str | None = None) -> Ratio:
    """The project's bill over peer ``name``'s for ``settings`` at ``rate``, at ``region``'s prices,
    as a function of what an assumption scales: the figures and the rejected share."""

    def compared(figures: Figures, rejected: float) -> float:
        ours = project(settings, rate, figures=figures, rejected_share=rejected, region=region).total
        theirs = peer(name, settings, rate, figures=figures, rejected_share=rejected, region=region).total
        return ours / theirs

    return compared


def flip(
    compared: Ratio, assumption: Assumption, figures: Figures = MEASURED, rejected_share: float = REJECTED_SHARE
) -> float | None:
    """The factor nearest 1 (within 1/16x-16x) at which ``assumption``, scaled from ``figures``
    and ``rejected_share``, flips the ranking ``compared`` gives, or None."""

    def side(k: float) -> bool:
        return compared(*assumption.scaled(figures, rejected_share, k)) < 1

    base = side(1.0)
    steps = [LIMIT ** (i / (_STEPS // 2)) for i in range(1, _STEPS // 2 + 1)]
    candidates = sorted((k for s in steps for k in (s, 1 / s)), key=lambda k: abs(math.log(k)))
    for k in candidates:
        if side(k) != base:
            low, high = (1.0, k) if k > 1 else (k, 1.0)
            for _ in range(30):  # bisect on the log scale between 1 and k
                middle = math.sqrt(low * high)
                if (side(middle) != base) == (k > 1):
                    high = middle
                else:
                    low = middle
            return high if k > 1 else low
    return None


def line(
    settings: EnvironmentConfig,
    rate: float,
    name: Peer,
    *,
    figures: Figures = MEASURED,
    rejected_share: float = REJECTED_SHARE,
    region: str | None = None,
) -> str:
    """One line: the ratio, and what would flip the ranking against peer ``name``."""
    compared = ratio(settings, rate, name, region)
    base = compared(figures, rejected_share)
    cheaper = "rdss" if base < 1 else name
    flips, holds = [], []
    for assumption in ASSUMPTIONS:
        k = flip(compared, assumption, figures, rejected_share)
        if k is None:
            holds.append(assumption.name)
        else:
            flips.append(f"{assumption.name} x{k:.3g} ({assumption.shown(figures, rejected_share, k)})")
    said = f"vs {name}: rdss costs {base:.2f}x; {cheaper} stays the cheaper "
    said += "unless " + " or ".join(flips) if flips else "whatever one assumption is"
    if holds:
        said += f"; {', '.join(holds)} at 1/{LIMIT:g}x-{LIMIT:g}x would not flip it"
    return said
