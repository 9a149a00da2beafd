"""``rdss bench validate`` and ``rdss bench translate``: the message model's benchmarks - the
classifier of each version beside its reference validator, and the translators between them."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import NamedTuple

from rdss.cli.benchkit import at_least_one, bench_module, printed_as_json


class _Schemas(NamedTuple):
    """The published schemas of a version, which its reference validator reads: not part of this
    package, so named by an option, else a variable, else found beside a checkout."""

    version: str
    option: str
    variable: str
    #: where one is found otherwise, in the help's words
    found: str
    #: the rdss.bench.reference function that finds one there
    locate: str

    @property
    def dest(self) -> str:
        return self.option.removeprefix("--").replace("-", "_")


#: The reference validators' schemas, 3.0.2's then 4.0.0's (validate.run's reference and reference_4).
REFERENCES = (
    _Schemas(
        "3.0.2",
        "--reference-schemas",
        "RDSS_REFERENCE_SCHEMAS",
        "beside the checkout, up to two levels below a directory it lies in",
        "default_location",
    ),
    _Schemas(
        "4.0.0", "--reference-schemas-4", "RDSS_REFERENCE_SCHEMAS_4", "as rdss-spec-3.0.2 is", "default_location_4"
    ),
)


def add_reference_options(parser: argparse.ArgumentParser) -> None:
    """``rdss bench validate``'s options naming each version's published schemas, and ``--no-reference``."""
    for schemas in REFERENCES:
        parser.add_argument(
            schemas.option,
            type=Path,
            metavar="DIR",
            help=f"the published rdss-spec-{schemas.version} directory (default: ${schemas.variable}, else one of "
            f"that name found {schemas.found})",
        )
    parser.add_argument("--no-reference", action="store_true", help="skip the (slow) reference validators")


def run_validate(args: argparse.Namespace) -> int:
    """Time the classifier (rdss.model.validation.validate) on realistic generated messages of each version it judges
    (3.0.2 and 4.0.0, side by side), beside orjson's parse alone and each version's reference validator (jsonschema
    with formats over the published schemas: Draft 4 for 3.0.2, Draft 6 for 4.0.0). The published schemas are not part
    of this package: --reference-schemas DIR and --reference-schemas-4 DIR, $RDSS_REFERENCE_SCHEMAS and
    $RDSS_REFERENCE_SCHEMAS_4, else directories of those names beside a checkout; a version without them is measured
    without its reference, as with --no-reference. Beside them, the translators to the other version (what a
    consumer reading another version pays on top, rdss bench translate). The median of --rounds passes.
    """
    from rdss.bench import reference, validate

    at_least_one(args, "messages")
    locations: list[Path | None] = [None, None]
    if not args.no_reference:
        for index, schemas in enumerate(REFERENCES):
            locations[index] = getattr(args, schemas.dest) or getattr(reference, schemas.locate)()
            if locations[index] is None:
                print(
                    f"rdss bench validate: the published {schemas.version} schemas are not here ({schemas.option} DIR "
                    f"or ${schemas.variable}): measuring {schemas.version} without its reference validator, as "
                    "--no-reference",
                    file=sys.stderr,
                )
    comparison = validate.run(
        args.messages, seed=args.seed, rounds=args.rounds, reference=locations[0], reference_4=locations[1]
    )
    # what a consumer reading the other version pays on top: the translators on the same sizes
    translation = bench_module("translate").run(args.messages, seed=args.seed, rounds=args.rounds)
    if printed_as_json(args, {**comparison.as_dict(), "translation": translation.as_dict()}):
        return 0
    three, four = comparison.versions["3.0.2"], comparison.versions["4.0.0"]
    print(
        f"{args.messages:,} realistic messages a version, {three.mean_bytes:,.0f} bytes on average (3.0.2), "
        f"{four.mean_bytes:,.0f} (4.0.0)"
    )
    print(f"  {'':<44}{'3.0.2':>12}{'4.0.0':>12}")
    classifier = "classifier (rdss.model.validation.validate)"
    print(f"  {classifier:<44}{three.classifier_per_s:>12,.0f}{four.classifier_per_s:>12,.0f}  msg/s")
    print(f"  {'orjson parse only':<44}{three.orjson_parse_per_s:>12,.0f}{four.orjson_parse_per_s:>12,.0f}  msg/s")
    print(f"  {'classifier / parse-only':<44}{three.fraction_of_parse:>12.0%}{four.fraction_of_parse:>12.0%}")
    if three.reference_per_s is not None or four.reference_per_s is not None:
        print(
            f"  {'reference (jsonschema Draft4 | Draft6 + formats)':<44}{_rate(three.reference_per_s):>12}"
            f"{_rate(four.reference_per_s):>12}  msg/s"
        )
        print(f"  {'classifier / reference':<44}{_times(three.times_reference):>12}{_times(four.times_reference):>12}")
    translator = "translator to the other version"
    print(f"  {translator:<44}{translation.up_per_s:>12,.0f}{translation.down_per_s:>12,.0f}  msg/s")
    if three.reference_per_s and four.reference_per_s:
        up, down = translation.up_per_s / three.reference_per_s, translation.down_per_s / four.reference_per_s
        print(f"  {'translator / reference':<44}{_times(up):>12}{_times(down):>12}")
    print(f"  a 4.0.0 message costs {comparison.cost_4_over_3:.2f}x a 3.0.2 one to judge")
    return 0


def run_translate(args: argparse.Namespace) -> int:
    """Time the Message Translators (rdss.model.translation.translate) both ways on realistic Metadata messages,
    beside the classifier on the same messages. The median of --rounds passes."""
    at_least_one(args, "messages")
    figures = bench_module("translate").run(args.messages, seed=args.seed, rounds=args.rounds)
    if printed_as_json(args, figures.as_dict()):
        return 0
    print(f"{figures.messages:,} realistic Metadata messages, {figures.mean_bytes:,.0f} bytes on average")
    print(f"  3.0.2 -> 4.0.0 (rdss.model.translation.translate)  {figures.up_per_s:>10,.0f} msg/s")
    print(f"  4.0.0 -> 3.0.2                                     {figures.down_per_s:>10,.0f} msg/s")
    print(f"  classifier on the 3.0.2 messages                   {figures.classifier_per_s:>10,.0f} msg/s")
    return 0


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _times(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}x"
