"""``rdss adaptor oai-pmh URL --to CHANNEL``: the Channel Adaptor for repositories that speak OAI-PMH.

Harvests incrementally (``from=`` datestamps, resumption tokens), publishes MetadataCreate /
MetadataUpdate / MetadataDelete through the gateway, and keeps its position in a state file so a
restart continues where it stopped. Exit codes: 0 done or stopped; 1 a harvest or a send failed
(``--once``); 2 usage, a state file of another endpoint, the messaging system unreachable.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from botocore.exceptions import BotoCoreError, ClientError

from rdss.cli.common import (
    INVALID,
    USAGE,
    CommandError,
    _positive_float,
    add_command,
    add_sender_options,
    configure_service_logging,
    report,
    stop_on_signals,
)

_APPLICATION = "oai-pmh-adaptor"


def register(commands: Any) -> None:
    adaptor = commands.add_parser(
        "adaptor",
        help="publish a repository's records through a Channel Adaptor",
        description="Channel Adaptors publish RDSS messages for repositories that cannot embed a gateway.",
    )
    kinds = adaptor.add_subparsers(dest="adaptor", metavar="KIND", required=True)
    oai = add_command(kinds, "oai-pmh", run_oai_pmh, help="harvest an OAI-PMH endpoint (Dublin Core) into a channel")
    oai.add_argument("endpoint", metavar="URL", help="the repository's OAI-PMH base URL")
    add_sender_options(oai, _APPLICATION)
    oai.add_argument(
        "--state", type=Path, metavar="FILE", help="harvest position file (default: under ~/.local/state/rdss)"
    )
    oai.add_argument(
        "--profile", type=Path, metavar="FILE", help="JSON: the repository's organisation, licence, access"
    )
    oai.add_argument("--set", dest="set_spec", metavar="SPEC", help="harvest one set only")
    oai.add_argument("--metadata-prefix", default="oai_dc", help="default: oai_dc (the only one translated)")
    oai.add_argument("--from", dest="start_from", metavar="DATESTAMP", help="first harvest starts here (default: all)")
    oai.add_argument("--interval", type=_positive_float, default=300.0, metavar="S", help="seconds between harvests")
    oai.add_argument("--once", action="store_true", help="one complete harvest, then exit")
    oai.add_argument(
        "--retries",
        type=int,
        default=8,
        metavar="N",
        help="retries of a request the network or server fails (default 8)",
    )
    oai.add_argument("--json", action="store_true", help="one JSON line of figures per harvest")


def run_oai_pmh(args: argparse.Namespace) -> int:
    """Harvest URL (an OAI-PMH base URL) incrementally and publish each new record as MetadataCreate, each changed one
    as MetadataUpdate and each deleted one as MetadataDelete to CHANNEL.
    """
    from rdss.adaptors.oai_pmh import NETWORK_BACKOFF, HarvestError, OaiPmhAdaptor, OaiPmhClient, Profile
    from rdss.gateway import Gateway, GatewayError, SendFailed, TransportError, URLError

    configure_service_logging(args, args.application)
    if urlsplit(args.endpoint).scheme not in ("http", "https"):
        raise CommandError(f"{args.endpoint!r} is not an http(s) URL")
    if args.metadata_prefix != "oai_dc":
        raise CommandError("only oai_dc (Dublin Core) records are translated")
    try:
        profile = Profile.from_file(args.profile) if args.profile else Profile()
    except (OSError, ValueError, TypeError) as error:
        raise CommandError(f"--profile: {error}") from error
    state = args.state or _default_state(args.endpoint, args.set_spec)
    try:
        gateway = Gateway(args.url, application=args.application)
    except (URLError, TransportError) as error:
        raise CommandError(str(error), USAGE) from error
    stop = stop_on_signals()
    with gateway:
        try:
            adaptor = OaiPmhAdaptor(
                OaiPmhClient(args.endpoint, backoff=replace(NETWORK_BACKOFF, max_retries=max(0, args.retries))),
                lambda messages: gateway.send_all(messages, channel=args.channel),
                state,
                profile=profile,
                metadata_prefix=args.metadata_prefix,
                set_spec=args.set_spec,
                start_from=args.start_from,
            )
        except (OSError, ValueError) as error:
            raise CommandError(f"state file {state}: {error}") from error
        while not stop.is_set():
            try:
                stats = adaptor.harvest(stop)
            except (HarvestError, SendFailed, GatewayError, ClientError, BotoCoreError) as error:
                if args.once:
                    raise CommandError(str(error), INVALID) from error
                logging.getLogger(__name__).error("harvest failed: %s; next attempt in %g s", error, args.interval)
            else:
                _report(args, adaptor.state.harvests, stats.as_dict())
                if args.once and stats.complete:
                    break
            if args.once or stop.wait(args.interval):
                break
    return 0


def _report(args: argparse.Namespace, number: int, figures: dict[str, Any]) -> None:
    summary = (
        f"harvest {number} of {args.endpoint}: {figures['pages']} page(s), {figures['records']} record(s): "
        f"{figures['created']} created, {figures['updated']} updated, {figures['deleted']} deleted, "
        f"{figures['unchanged']} unchanged, {figures['invalid']} invalid"
        + ("" if figures["complete"] else " (stopped; resumes from here)")
    )
    report(args, {"harvest": number, **figures}, summary)


def _default_state(endpoint: str, set_spec: str | None) -> Path:
    home = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    host = urlsplit(endpoint).hostname or "repository"
    digest = hashlib.sha256(f"{endpoint}|{set_spec}".encode()).hexdigest()[:8]
    return home / "rdss" / f"oai-pmh-{host}-{digest}.json"
