"""``rdss bench validate``: the classifier beside the reference validator and orjson parse-only,
for each version of the Message API it judges (3.0.2 and 4.0.0), side by side."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from rdss.bench import rate
from rdss.bench.figures import Measured
from rdss.bench.reference import reference_validator, reference_validator_4
from rdss.model import schemas
from rdss.model.validation import validate
from rdss.model.workload import Workload, Workload4


@dataclass(frozen=True)
class Figures(Measured):
    """One version's figures."""

    version: str
    messages: int
    mean_bytes: float
    classifier_per_s: float
    orjson_parse_per_s: float
    reference_per_s: float | None
    #: Median over the rounds of each round's classifier / parse-only and classifier / reference
    #: (paired within a round, so a change in machine load between rounds cancels out).
    fraction_of_parse: float
    times_reference: float | None


@dataclass(frozen=True)
class Comparison:
    """Both versions' figures, measured in the same rounds."""

    versions: dict[str, Figures]
    #: Median over the rounds of the time to judge a 4.0.0 message over a 3.0.2 one's (1.05: 5 %
    #: dearer), each round timing both alike.
    cost_4_over_3: float

    def as_dict(self) -> dict[str, Any]:
        return {"versions": {v: f.as_dict() for v, f in self.versions.items()}, "cost_4_over_3": self.cost_4_over_3}


def run(
    count: int,
    *,
    seed: int = 7,
    rounds: int = 5,
    reference: Path | None = None,
    reference_4: Path | None = None,
) -> Comparison:
    """Time the three on ``count`` realistic messages of each version, interleaved round by round
    and version by version: all messages through orjson and through the classifier, and a different
    ``count / rounds`` of them through the (slow) reference validator of their version."""
    workloads = {schemas.V3.version: Workload(seed), schemas.V4.version: Workload4(seed)}
    payloads = {v: [orjson.dumps(m) for m in w.mix(count)] for v, w in workloads.items()}
    for version, batch in payloads.items():
        invalid = [p for p in batch if not validate(p, check_expiry=False).valid]
        if invalid:  # a benchmark of the valid path must not silently time the staged walk
            raise AssertionError(f"{len(invalid)} generated {version} messages are invalid")
    checks: dict[str, Callable[[bytes], bool]] = {}
    for version, location, build in (
        (schemas.V3.version, reference, reference_validator),
        (schemas.V4.version, reference_4, reference_validator_4),
    ):
        if location is not None:
            checks[version] = build(location)
            if not all(checks[version](p) for p in payloads[version][:50]):
                raise AssertionError(f"the {version} reference validator rejects the generated messages")
    share = max(1, count // rounds)
    parse_rates: dict[str, list[float]] = {v: [] for v in payloads}
    classify_rates: dict[str, list[float]] = {v: [] for v in payloads}
    reference_rates: dict[str, list[float]] = {v: [] for v in payloads}
    for index in range(rounds):
        for version, measured in _paired(payloads, orjson.loads).items():
            parse_rates[version].append(measured)
        for version, measured in _paired(payloads, validate).items():
            classify_rates[version].append(measured)
        for version, batch in payloads.items():
            if version in checks:
                start = index * share % count
                reference_rates[version].append(rate(batch[start : start + share], checks[version], rounds=1))
    figures = {
        version: Figures(
            version=version,
            messages=count,
            mean_bytes=sum(map(len, batch)) / count,
            classifier_per_s=statistics.median(classify_rates[version]),
            orjson_parse_per_s=statistics.median(parse_rates[version]),
            reference_per_s=statistics.median(reference_rates[version]) if reference_rates[version] else None,
            fraction_of_parse=statistics.median(
                c / p for c, p in zip(classify_rates[version], parse_rates[version], strict=True)
            ),
            times_reference=(
                statistics.median(c / r for c, r in zip(classify_rates[version], reference_rates[version], strict=True))
                if reference_rates[version]
                else None
            ),
        )
        for version, batch in payloads.items()
    }
    three, four = classify_rates[schemas.V3.version], classify_rates[schemas.V4.version]
    return Comparison(figures, statistics.median(t / f for t, f in zip(three, four, strict=True)))


def _paired(batches: dict[str, list[bytes]], work: Callable[[bytes], object], chunk: int = 50) -> dict[str, float]:
    """Items per second of ``work`` over each version's batch, the versions taking turns a
    ``chunk`` at a time: a change in the machine's load (shared, a few seconds at a time) falls
    on both alike, so their ratio holds where two back-to-back passes would not."""
    spent = dict.fromkeys(batches, 0.0)
    longest = max(map(len, batches.values()))
    for start in range(0, longest, chunk):
        for version, batch in batches.items():
            part = batch[start : start + chunk]
            began = time.perf_counter()
            for item in part:
                work(item)
            spent[version] += time.perf_counter() - began
    return {version: len(batch) / max(spent[version], 1e-9) for version, batch in batches.items()}
