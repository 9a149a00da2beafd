"""What every ``rdss bench`` command shares: its sizes checked, its figures printed as JSON, its
benchmark module imported when it runs."""

from __future__ import annotations

import argparse
import importlib
from types import ModuleType
from typing import Any

from rdss.cli.common import CommandError, print_json


def at_least_one(args: argparse.Namespace, *names: str) -> None:
    """The sizes a benchmark cannot run with less than one of (its counts of messages, rounds...)."""
    if any(getattr(args, name) < 1 for name in names):
        raise CommandError(" and ".join(f"--{name}" for name in names) + " must be at least 1")


def printed_as_json(args: argparse.Namespace, figures: Any) -> bool:
    """With --json, the figures (``as_dict()`` of a benchmark's result) as one JSON line (and True)."""
    if args.json:
        print_json(figures)
    return bool(args.json)


def bench_module(name: str) -> ModuleType:
    """A benchmark module, imported when its command runs (each pulls in what it measures)."""
    return importlib.import_module(f"rdss.bench.{name}")
