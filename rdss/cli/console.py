"""``rdss console``: the deployment's state as a web page on this machine, with charts."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from rdss.aws.failures import describe
from rdss.cli.common import CommandError, aws_deployment, file_name, whole_number
from rdss.cli.options import add_number_option, add_record_limit_option, deployment_command


def register(commands: Any) -> None:
    parser = deployment_command(
        commands,
        "console",
        run,
        help="a web page on this machine: the status, charts, message search, redrive, replays",
    )
    add_number_option(
        parser, "--port", whole_number(0, 65535), default=0, help="listen on 127.0.0.1:N", stated="a free port"
    )
    parser.add_argument(
        "--allow-actions",
        action="store_true",
        help="let the pages redrive parked batches and cancel replays (default: read-only)",
    )
    parser.add_argument(
        "--report", type=file_name, metavar="DIR", help="an analytics report's output directory, shown as charts"
    )
    add_record_limit_option(parser, "for the counts and charts (as rdss status)")


def run(args: argparse.Namespace) -> int:
    """Serves the deployment's state as web pages on 127.0.0.1 until interrupted: the overview
    (what rdss status shows), charts (records per channel, errors by code over time, latency
    from input to each routed channel), a message search that opens rdss trace's timeline, the
    parked batches with their redrive, the replays (rdss replay) with their cancel, and the
    analytics report's tables as charts (--report).
    It prints a URL holding a random token, as Jupyter does: nothing is served without it. The
    pages are read-only unless started with --allow-actions; an action needs the token and is
    refused from another site. Everything a message holds is shown as text."""
    from rdss.status.console import serve, url
    from rdss.status.sources import ConsoleSource

    report = Path(args.report) if args.report else None
    if report is not None and not (report / "summary.json").is_file():
        raise CommandError(f"--report {args.report}: no summary.json there (give the report job's output directory)")
    target = aws_deployment(args.url, "console")
    source = ConsoleSource(target.deployment, target.client, limit=args.limit, report=report)
    try:  # a deployment that is not there (or cannot be reached) is said now, not on every page
        target.client("kinesis").describe_stream_summary(StreamName=target.deployment.stream("input"))
    except (ClientError, BotoCoreError) as error:
        raise CommandError(f"cannot read deployment {target.deployment.environment}: {describe(error)}") from error
    try:
        server, settings = serve(source, allow_actions=args.allow_actions, port=args.port)
    except OSError as error:
        raise CommandError(f"cannot listen on 127.0.0.1:{args.port}: {error.strerror or error}") from error
    mode = "actions allowed" if args.allow_actions else "read-only"
    print(f"rdss console ({mode}) for deployment {target.deployment.environment}: open", flush=True)
    print(f"    {url(settings)}", flush=True)
    print("Ctrl-C stops it.", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
