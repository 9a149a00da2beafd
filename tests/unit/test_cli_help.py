"""Every subcommand says what it does: a description in its ``--help``, printed as written (no
``%%`` left by argparse's formatting), and ``--help`` itself exits 0 with no traceback."""

from __future__ import annotations

import argparse
import re
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


def _texts(parser: argparse.ArgumentParser) -> Iterator[str]:
    """What ``--help`` shows of ``parser``: its description and every argument's help."""
    yield parser.description or ""
    for action in parser._actions:
        if action.help and action.help != argparse.SUPPRESS:
            yield action.help


#: "rdss" in a sentence, not a command line: the rdss context of a cdk.json, the examples rdss ships.
PROSE = {"rdss context", "rdss ships"}


def _exists(words: tuple[str, ...]) -> bool:
    """Whether ``rdss WORDS...`` names a command: its first word one of ``rdss``'s, its second one
    of that command's actions when it has any (else an argument)."""
    if words[:1] not in COMMANDS:
        return False
    has_actions = any(len(path) == 2 and path[0] == words[0] for path in COMMANDS)
    return len(words) == 1 or not has_actions or words[:2] in COMMANDS


@pytest.mark.parametrize("path", sorted(COMMANDS), ids=" ".join)
def test_help_names_only_commands_that_exist(path: tuple[str, ...]) -> None:
    """Every ``rdss COMMAND [ACTION]`` a help text names is a command of the parser."""
    for text in _texts(COMMANDS[path]):
        for match in re.finditer(r"\brdss ([a-z][a-z-]*)(?: ([a-z][a-z-]*))?", text):
            words = tuple(w for w in match.groups() if w)
            if match.group() not in PROSE:
                assert _exists(words), (path, match.group(), text)


def test_local_up_lists_only_commands_that_exist() -> None:
    """``rdss local up --help`` lists the commands that use the running runtime: each one exists."""
    description = " ".join((COMMANDS[("local", "up")].description or "").split())  # as --help folds it
    listed = re.search(r"the commands that talk to a deployment \(([^)]*)\)", description)
    assert listed, description
    for name in listed.group(1).split(", "):
        assert _exists(tuple(name.split())), name


def test_archive_says_it_works_on_kinesis(capsys: pytest.CaptureFixture[str]) -> None:
    """``rdss archive`` reads any deployment's input channel, Kinesis included (the package suite runs it on
    the local runtime): its line in ``rdss --help`` and its own help say so."""
    with pytest.raises(SystemExit):
        main(["--help"])
    [line] = [line for line in capsys.readouterr().out.splitlines() if line.strip().startswith("archive ")]
    assert "Kinesis" in line, line
    assert "kinesis://" in (COMMANDS[("archive",)].description or "")
