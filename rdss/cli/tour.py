"""``rdss tour``: the message model end to end, offline (``tools/tour.py`` of a checkout)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def register(commands: Any) -> None:
    tour = commands.add_parser("tour", help="walk through the message model offline (no AWS; from a checkout)")
    tour.add_argument(
        "--examples", type=Path, metavar="DIR", help="directory of example messages (default: the checkout's)"
    )
    tour.add_argument("--messages", type=int, default=5000, metavar="N", help="size of the generated workload")
    tour.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from rdss import tour

    return int(tour.run(args))
