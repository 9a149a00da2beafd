"""``rdss validate`` and ``rdss new``."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import orjson

from rdss import schemas, skeletons
from rdss.cli.common import INVALID, USAGE, CommandError, describe_os_error, read_input
from rdss.validation import validate


def register(commands: Any) -> None:
    check = commands.add_parser(
        "validate",
        help="classify messages with the RDSS error codes",
        description="Classify each FILE (- for standard input) as one message. Exit 0 when all are valid, "
        "1 when any is invalid, 2 on usage or I/O errors.",
    )
    check.add_argument("files", nargs="+", metavar="FILE")
    check.add_argument("--json", action="store_true", help="one JSON line per file")
    check.add_argument("--no-expiry", action="store_true", help="skip the expiry stage (GENERR003)")
    check.set_defaults(run=run_validate)

    new = commands.add_parser("new", help="print a minimal valid message", description="Print a minimal valid message.")
    new.add_argument(
        "message_type", metavar="TYPE", choices=schemas.MESSAGE_TYPES, help=", ".join(schemas.MESSAGE_TYPES)
    )
    new.add_argument(
        "--class", dest="message_class", choices=schemas.MESSAGE_CLASSES, help="default: Command for reads, else Event"
    )
    new.set_defaults(run=run_new)


def run_validate(args: argparse.Namespace) -> int:
    worst = 0
    for name in args.files:
        try:
            payload = read_input(name)
        except OSError as error:
            problem = describe_os_error(error)
            worst = USAGE
            if args.json:
                _emit({"file": name, "valid": False, "errorCode": None, "errorDescription": problem})
            print(f"rdss validate: {problem}", file=sys.stderr)
            continue
        verdict = validate(payload, check_expiry=not args.no_expiry)
        if not verdict.valid:
            worst = max(worst, INVALID)
        if args.json:
            line = {
                "file": name,
                "valid": verdict.valid,
                "errorCode": None if verdict.error_code is None else str(verdict.error_code),
                "errorDescription": verdict.error_description,
            }
            _emit(line)
        elif verdict.valid:
            note = ""
            if verdict.is_part:
                sequence = verdict.message["messageHeader"]["messageSequence"]  # type: ignore[index]
                note = f" (part {sequence['position']} of {sequence['total']})"
            print(f"{name}: valid{note}")
        else:
            print(f"{name}: {verdict.error_code} [{verdict.channel} channel] {verdict.error_description}")
    return worst


def run_new(args: argparse.Namespace) -> int:
    try:
        message = skeletons.skeleton(args.message_type, args.message_class)
    except ValueError as error:
        raise CommandError(str(error)) from error
    sys.stdout.buffer.write(orjson.dumps(message, option=orjson.OPT_INDENT_2) + b"\n")
    return 0


def _emit(line: dict[str, Any]) -> None:
    sys.stdout.buffer.write(orjson.dumps(line) + b"\n")
    sys.stdout.flush()
