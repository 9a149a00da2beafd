"""The ``rdss`` command line: one sub-command per module, each registering its own parser.

Exit codes are uniform: 0 success, 1 the input was understood and found wanting (an invalid
message, an incomplete sequence), 2 usage or I/O errors, 130 interrupted.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

import rdss.cli._startup  # noqa: F401 - first, so that Ctrl-C while the rest loads prints no traceback

# isort: split
from botocore.exceptions import NoCredentialsError

from rdss import __version__
from rdss.cli import (
    adaptor,
    analytics,
    archive,
    bench,
    bridge,
    console,
    gateway,
    local,
    messages,
    redrive,
    replay,
    sequences,
    status,
    tour,
    trace,
    vendor,
)
from rdss.cli.common import USAGE, CommandError, describe_os_error, file_name, text
from rdss.host.display import printable, safe, shorten
from rdss.host.extras import missing_extra

_COMMANDS = (
    messages,
    sequences,
    tour,
    local,
    bench,
    gateway,
    trace,
    status,
    console,
    bridge,
    adaptor,
    redrive,
    replay,
    archive,
    vendor,
    analytics,
)


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose usage errors are one line (the usage itself is ``--help``'s),
    secrets and control characters in the arguments it quotes made safe to print, and whose
    arguments are text (:func:`rdss.cli.common.text`) unless their type says otherwise: a name,
    a channel or a URL holding bytes that are not UTF-8 is refused here, not half-way through
    sending it (file names, which may hold any bytes, are typed :func:`rdss.cli.common.file_name`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.register("type", None, text)

    def add_subparsers(self, **kwargs: Any) -> Any:
        commands = super().add_subparsers(**kwargs)
        commands.type = file_name  # a sub-command's own arguments: its own parser types them
        return commands

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE, f"{self.prog}: {safe(message)} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="rdss", description="RDSS Message API 3.0.2: validate, build, split and move messages.")
    parser.add_argument("--version", action="version", version=f"rdss {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in _COMMANDS:
        module.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command ``argv`` names; None: this process's own command line (``rdss``, ``python
    -m rdss``), after which the process ends - so a ``memory://`` bus, which lives in the process,
    ends with the command, and ``rdss send``/``tail``/``request`` refuse one (a program calling main with
    its arguments holds the bus on)."""
    if sys.stdout is None:  # started with standard output closed (>&-): Python gives None, not a file
        print("rdss: standard output is closed: give it somewhere to go (e.g. >/dev/null)", file=sys.stderr)
        return USAGE
    parser = build_parser()
    args = parser.parse_args(argv)
    args.one_shot = argv is None
    if getattr(args, "local_runtime", None):  # --local: which local runtime, for this command and its SDK calls
        os.environ["RDSS_LOCAL"] = args.local_runtime
    try:
        return int(args.run(args))
    except CommandError as error:
        print(f"rdss {args.command}: {safe(str(error))}", file=sys.stderr)
        return error.exit_code
    except ModuleNotFoundError as error:
        needs = missing_extra(error)
        if needs is None:
            raise
        print(f"rdss {args.command}: this {needs}", file=sys.stderr)
        return USAGE
    except UnicodeEncodeError as error:
        # Python reads an argument, a file name or a variable that is not UTF-8 into lone
        # surrogates (byte 0xff becomes U+DCFF); where it must be sent as text it cannot be
        wrong = error.object[error.start : error.end] if isinstance(error.object, str) else ""
        if not wrong or not all("\ud800" <= char <= "\udfff" for char in wrong):
            raise
        said = f"{safe(shorten(error.object))}: {printable(wrong)} is not UTF-8 text"
        print(f"rdss {args.command}: {said}", file=sys.stderr)
        return USAGE
    except NoCredentialsError:
        # boto3 found no credentials (no variables, profile or role): one line, not botocore's traceback
        endpoint = os.environ.get("AWS_ENDPOINT_URL")
        where = f" for AWS_ENDPOINT_URL={safe(endpoint)}" if endpoint else ""
        print(
            f"rdss {args.command}: no AWS credentials{where}: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or "
            "AWS_PROFILE (an emulator such as `rdss local up` or LocalStack accepts any)",
            file=sys.stderr,
        )
        return USAGE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # output piped into a reader that stopped early (e.g. head): not an error of ours
        sys.stderr.close()
        return 0
    except OSError as error:  # a file or socket the user named, failing where no command expected it
        said = describe_os_error(error) if error.filename is not None else f"{error.strerror or error}"
        print(f"rdss {args.command}: {safe(said)}", file=sys.stderr)
        return USAGE
