"""``rdss bench validate``: the classifier beside the reference validator and orjson parse-only."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

import orjson

from rdss.bench import rate
from rdss.bench.figures import Measured
from rdss.bench.reference import reference_validator
from rdss.model.validation import validate
from rdss.model.workload import Workload


@dataclass(frozen=True)
class Figures(Measured):
    messages: int
    mean_bytes: float
    classifier_per_s: float
    orjson_parse_per_s: float
    reference_per_s: float | None
    #: Median over the rounds of each round's classifier / parse-only and classifier / reference
    #: (paired within a round, so a change in machine load between rounds cancels out).
    fraction_of_parse: float
    times_reference: float | None


def run(count: int, *, seed: int = 7, rounds: int = 5, reference: Path | None = None) -> Figures:
    """Time the three on the same ``count`` realistic messages, interleaved round by round:
    all messages through orjson and through the classifier, and a different ``count / rounds``
    of them through the (slow) reference validator."""
    payloads = [orjson.dumps(message) for message in Workload(seed).mix(count)]
    invalid = [p for p in payloads if not validate(p, check_expiry=False).valid]
    if invalid:  # a benchmark of the valid path must not silently time the staged walk
        raise AssertionError(f"{len(invalid)} generated messages are invalid")
    check = None
    if reference is not None:
        check = reference_validator(reference)
        if not all(check(p) for p in payloads[:50]):
            raise AssertionError("the reference validator rejects the generated messages")
    share = max(1, count // rounds)
    parse_rates, classify_rates, reference_rates = [], [], []
    for index in range(rounds):
        parse_rates.append(rate(payloads, orjson.loads, rounds=1))
        classify_rates.append(rate(payloads, validate, rounds=1))
        if check is not None:
            start = index * share % count
            reference_rates.append(rate(payloads[start : start + share], check, rounds=1))
    return Figures(
        messages=count,
        mean_bytes=sum(map(len, payloads)) / count,
        classifier_per_s=statistics.median(classify_rates),
        orjson_parse_per_s=statistics.median(parse_rates),
        reference_per_s=statistics.median(reference_rates) if reference_rates else None,
        fraction_of_parse=statistics.median(c / p for c, p in zip(classify_rates, parse_rates, strict=True)),
        times_reference=(
            statistics.median(c / r for c, r in zip(classify_rates, reference_rates, strict=True))
            if reference_rates
            else None
        ),
    )
