"""``rdss tour``: the message model end to end, offline (:mod:`rdss.local.tour`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rdss.cli.common import CommandError, whole_number
from rdss.cli.options import add_command


def register(commands: Any) -> None:
    tour = add_command(commands, "tour", run, help="walk through the message model offline (no AWS)")
    tour.add_argument(
        "--examples",
        type=Path,
        metavar="DIR",
        help="directory of example messages, valid/ and invalid/ (default: the ones rdss ships)",
    )
    tour.add_argument(
        "--messages", type=whole_number(1, 10_000_000), default=5000, metavar="N", help="size of the generated workload"
    )


def run(args: argparse.Namespace) -> int:
    """The message model end to end, offline: classify the example messages (each invalid one must
    get the code its name says), a realistic generated workload (its rate), split a large deposit
    into a multi-message sequence and reassemble it out of order, and decorate an invalid message
    for the invalid channel and restore it byte for byte. Exit 1 on any unexpected result."""
    from rdss.local import tour

    if args.examples is not None and not args.examples.is_dir():
        raise CommandError(f"--examples {args.examples}: not a directory")
    return int(tour.run(args))
