"""``rdss bench validate``: the classifier beside the reference validator and orjson parse-only."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import orjson

from rdss.validation import validate
from tools.bench import rate
from tools.bench.reference import reference_validator
from tools.workload import Workload


@dataclass(frozen=True)
class Figures:
    messages: int
    mean_bytes: float
    classifier_per_s: float
    orjson_parse_per_s: float
    reference_per_s: float | None

    @property
    def times_reference(self) -> float | None:
        return None if not self.reference_per_s else self.classifier_per_s / self.reference_per_s

    @property
    def fraction_of_parse(self) -> float:
        return self.classifier_per_s / self.orjson_parse_per_s

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "times_reference": self.times_reference, "fraction_of_parse": self.fraction_of_parse}


def run(count: int, *, seed: int = 7, rounds: int = 5, reference: Path | None = None) -> Figures:
    """Time the three on the same ``count`` realistic messages."""
    payloads = [orjson.dumps(message) for message in Workload(seed).mix(count)]
    invalid = [p for p in payloads if not validate(p, check_expiry=False).valid]
    if invalid:  # a benchmark of the fast path must not silently time the slow one
        raise AssertionError(f"{len(invalid)} generated messages are invalid")
    reference_rate = None
    if reference is not None:
        check = reference_validator(reference)
        if not all(check(p) for p in payloads[:50]):
            raise AssertionError("the reference validator rejects the generated messages")
        reference_rate = rate(payloads, check, rounds=1)
    parse_rates, classify_rates = [], []
    for _ in range(rounds):  # interleaved, so drift in machine load hits both alike
        parse_rates.append(rate(payloads, orjson.loads, rounds=1))
        classify_rates.append(rate(payloads, validate, rounds=1))
    parse_rates.sort()
    classify_rates.sort()
    return Figures(
        messages=count,
        mean_bytes=sum(map(len, payloads)) / count,
        classifier_per_s=classify_rates[rounds // 2],
        orjson_parse_per_s=parse_rates[rounds // 2],
        reference_per_s=reference_rate,
    )
