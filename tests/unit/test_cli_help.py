"""Every subcommand says what it does: a description in its ``--help``, printed as written (no
``%%`` left by argparse's formatting), and ``--help`` itself exits 0 with no traceback."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest

from rdss.cli import build_parser, main


def subcommands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*path, name), sub
                yield from subcommands(sub, (*path, name))


COMMANDS = dict(subcommands(build_parser()))


def test_the_tree_is_walked() -> None:
    assert {("tour",), ("local", "up"), ("local", "demo"), ("vendor", "config"), ("bench", "coldstart")} <= set(
        COMMANDS
    )


@pytest.mark.parametrize("path", sorted(COMMANDS), ids=" ".join)
def test_every_subcommand_has_a_description(path: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    parser = COMMANDS[path]
    assert parser.description, f"rdss {' '.join(path)} has no description"
    assert len(parser.description.split()) >= 4, f"rdss {' '.join(path)}: {parser.description!r} says too little"
    with pytest.raises(SystemExit) as done:
        main([*path, "--help"])
    assert done.value.code == 0
    printed = capsys.readouterr().out
    assert "%%" not in printed
    assert printed.startswith(f"usage: rdss {' '.join(path)}")
