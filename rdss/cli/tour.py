"""``rdss tour``: the message model end to end, offline (``tools/tour.py`` of a checkout)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rdss.cli.common import CommandError, whole_number


def register(commands: Any) -> None:
    tour = commands.add_parser("tour", help="walk through the message model offline (no AWS; from a checkout)")
    tour.add_argument(
        "--examples", type=Path, metavar="DIR", help="directory of example messages (default: the checkout's)"
    )
    tour.add_argument(
        "--messages", type=whole_number(1, 10_000_000), default=5000, metavar="N", help="size of the generated workload"
    )
    tour.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from rdss import tour

    if args.examples is not None and not args.examples.is_dir():
        raise CommandError(f"--examples {args.examples}: not a directory")
    return int(tour.run(args))
