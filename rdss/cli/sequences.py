"""``rdss split`` and ``rdss join``: multi-message sequences from the command line."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import orjson

from rdss import MAX_MESSAGE_BYTES
from rdss.cli.common import (
    INVALID,
    CommandError,
    describe_os_error,
    file_name,
    print_json,
    whole_number,
)
from rdss.cli.options import add_command, add_number_option
from rdss.host.display import printable
from rdss.host.inputs import read_input
from rdss.model.sequences import SequenceError, join, split
from rdss.model.validation import validate


def register(commands: Any) -> None:
    cut = add_command(commands, "split", run_split, help="split a message into a sequence of parts")
    cut.add_argument("file", metavar="FILE", type=file_name)
    cut.add_argument("--out", required=True, metavar="DIR", type=_directory)
    add_number_option(
        cut, "--limit", whole_number(1, MAX_MESSAGE_BYTES * 100), default=MAX_MESSAGE_BYTES, help="bytes per part"
    )

    glue = add_command(commands, "join", run_join, help="join the parts of a sequence")
    glue.add_argument("parts", nargs="+", metavar="PART", type=file_name)


def run_split(args: argparse.Namespace) -> int:
    """Split FILE into parts of at most LIMIT serialised bytes, written to DIR as part-N.json: each with a messageId
    of its own and messageSequence.sequence S, both derived from the message's messageId, which no part carries
    (consumers receive the whole under part 1's messageId; rdss join prints it so).
    """
    payload = _read(args.file)
    verdict = validate(payload, check_expiry=False, size_limit=None)
    if not verdict.valid or verdict.message is None:
        print(printable(f"rdss split: {args.file}: {verdict.error_code} {verdict.error_description}"), file=sys.stderr)
        return INVALID
    if verdict.is_part:
        raise CommandError(f"{args.file} is already part of a sequence", INVALID)
    try:
        parts = split(verdict.message, args.limit)
    except ValueError as error:
        raise CommandError(str(error)) from error
    try:
        args.out.mkdir(parents=True, exist_ok=True)
        width = len(str(len(parts)))
        sizes = []
        for position, part in enumerate(parts, 1):
            data = orjson.dumps(part)
            (args.out / f"part-{position:0{width}d}.json").write_bytes(data)
            sizes.append(len(data))
    except FileExistsError as error:  # mkdir(exist_ok=True) on a file, a device or a FIFO
        raise CommandError(f"cannot write parts to {error.filename}: it exists and is not a directory") from error
    except OSError as error:
        raise CommandError(f"cannot write {error.filename}: {error.strerror}") from error
    if len(parts) == 1:
        print(printable(f"{args.file}: {sizes[0]:,} bytes fits in one message; written to {args.out}"))
    else:
        sequence = parts[0]["messageHeader"]["messageSequence"]["sequence"]
        print(
            printable(
                f"{args.file}: {len(parts)} parts of sequence {sequence} written to {args.out} "
                f"(largest {max(sizes):,} bytes, limit {args.limit:,})"
            )
        )
    return 0


def run_join(args: argparse.Namespace) -> int:
    """Join PARTs (any order; the same part twice is taken once) and print the whole message, as
    consumers receive it: with part 1's header, so its messageId is part 1's and its
    messageSequence keeps the sequence id S (position 1 of 1). The messageId the message was sent
    as (rdss send prints it) is not in it: S is derived from it, and rdss trace finds the sequence
    by either. Exit 1, with one line saying why, when they are not one complete sequence: a part
    invalid (a total over 10,000 parts among them), positions missing, two different parts at one
    position, or fragments that do not join; exit 2 when a file cannot be read."""
    parts = []
    for name in args.parts:
        payload = _read(name)
        verdict = validate(payload, check_expiry=False)
        if not verdict.valid or verdict.message is None:
            raise CommandError(f"{name}: {verdict.error_code} {verdict.error_description}", INVALID)
        parts.append(verdict.message)
    try:
        whole = join(parts)
    except SequenceError as error:
        raise CommandError(str(error), INVALID) from error
    print_json(whole)
    return 0


def _directory(value: str) -> Path:
    """An argparse ``type``: the directory the parts go to. An empty name is refused: as a Path
    it is ``.``, and the parts would land in the working directory unasked."""
    if not value:
        raise argparse.ArgumentTypeError("an empty name is no directory (for the working directory, say .)")
    return Path(value)


def _read(name: str) -> bytes:
    try:
        return read_input(name)
    except OSError as error:
        raise CommandError(describe_os_error(error)) from error
