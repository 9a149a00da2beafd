"""``rdss validate``, ``rdss new`` and ``rdss translate``."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from rdss.cli.common import INVALID, USAGE, CommandError, describe_os_error, file_name, print_json
from rdss.cli.options import add_command, add_json_option, add_tenant_options, tenant_jisc_id
from rdss.host.display import printable
from rdss.host.inputs import read_input
from rdss.model import canonical, schemas, skeletons
from rdss.model.validation import validate


def register(commands: Any) -> None:
    check = add_command(commands, "validate", run_validate, help="classify messages with the RDSS error codes")
    check.add_argument("files", nargs="+", metavar="FILE", type=file_name)
    add_json_option(check, "one JSON line per file")
    check.add_argument("--no-expiry", action="store_true", help="skip the expiry stage (GENERR003)")

    new = add_command(commands, "new", run_new, help="print a minimal valid message")
    types = tuple(dict.fromkeys(t for spec in schemas.SETS for t in spec.message_types))
    new.add_argument("message_type", metavar="TYPE", choices=types, help=", ".join(types))
    new.add_argument(
        "--class", dest="message_class", choices=schemas.MESSAGE_CLASSES, help="default: Command for reads, else Event"
    )
    new.add_argument(
        "--version",
        dest="spec_version",
        choices=schemas.VERSIONS,
        default=schemas.V3.version,
        help=f"the Message API version to write (default {schemas.V3.version})",
    )

    translate = add_command(
        commands, "translate", run_translate, help="print a message translated to another version of the Message API"
    )
    translate.add_argument("file", metavar="FILE", type=file_name, help="the message (- for standard input)")
    translate.add_argument("--to", required=True, metavar="VERSION", help=", ".join(canonical.VERSIONS))
    add_tenant_options(translate, of="going to 4.0.0", env="is used")


def run_validate(args: argparse.Namespace) -> int:
    """Classify each FILE (- for standard input) as one message. Exit 0 when all are valid, 1 when any is invalid, 2 on
    usage or I/O errors.
    """
    worst = 0
    for name in args.files:
        try:
            payload = read_input(name)
        except OSError as error:
            problem = describe_os_error(error)
            worst = USAGE
            if args.json:
                line = {"file": name, "valid": False, "errorCode": None, "errorDescription": problem, "version": None}
                print_json(line)
            print(f"rdss validate: {printable(problem)}", file=sys.stderr)
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
                "version": verdict.version,
            }
            print_json(line)
        elif verdict.valid:
            note = ""
            if verdict.is_part:
                sequence = verdict.message["messageHeader"]["messageSequence"]  # type: ignore[index]
                note = f" (part {sequence['position']} of {sequence['total']})"
            print(printable(f"{name}: valid{note}"))
        else:
            print(printable(f"{name}: {verdict.error_code} [{verdict.channel} channel] {verdict.error_description}"))
    return worst


def run_translate(args: argparse.Namespace) -> int:
    """Print FILE's message written in version --to (3.0.2 or 4.0.0), by the mappings listed in
    docs/vendors.md "Versions". A message with no form in that version (a Vocabulary message in
    4.0.0, a PreservationEvent in 3.0.2) is refused in one line, exit 1. Expiry is not judged.
    """
    from rdss.model import translation

    if args.to not in canonical.VERSIONS:
        raise CommandError(f"--to: expected one of {', '.join(canonical.VERSIONS)}, found {args.to!r}")
    tenant = tenant_jisc_id(args)
    try:
        payload = read_input(args.file)
    except OSError as error:
        raise CommandError(describe_os_error(error)) from error
    try:
        translated = translation.translate(payload, args.to, tenant_jisc_id=tenant)
    except translation.Untranslatable as error:
        print(printable(f"rdss translate: {args.file}: {error.code} {error.description}"), file=sys.stderr)
        return INVALID
    sys.stdout.buffer.write(translated + b"\n")
    return 0


def run_new(args: argparse.Namespace) -> int:
    """Print a minimal valid message."""
    try:
        message = skeletons.skeleton(args.message_type, args.message_class, version=args.spec_version)
    except ValueError as error:
        raise CommandError(str(error)) from error
    print_json(message, indent=True)
    return 0
