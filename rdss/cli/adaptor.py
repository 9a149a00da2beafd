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
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from botocore.exceptions import BotoCoreError, ClientError

from rdss.aws.failures import describe
from rdss.cli.common import (
    INVALID,
    USAGE,
    CommandError,
    configure_service_logging,
    deployment_url,
    report,
    seconds,
    stop_on_signals,
    whole_number,
)
from rdss.cli.options import (
    add_command,
    add_group,
    add_json_option,
    add_number_option,
    add_sender_options,
    add_state_option,
    add_tenant_options,
    below_state_directory,
    tenant_jisc_id,
)
from rdss.host.display import redact
from rdss.host.statedir import creatable, state_directory

_APPLICATION = "oai-pmh-adaptor"
# the client's own defaults (rdss.adaptors.oai_pmh.fetch), spelt here so that ``rdss --help``
# does not import the adaptor (half a second); tests/amqp/test_oai_pmh.py checks they agree
DEFAULT_MAX_BYTES = 32 * 1024 * 1024
DEFAULT_DEADLINE = 120.0


def register(commands: Any) -> None:
    """Channel Adaptors publish RDSS messages for repositories that cannot embed a gateway."""
    kinds = add_group(
        commands, "adaptor", register, help="publish a repository's records through a Channel Adaptor", metavar="KIND"
    )
    oai = add_command(kinds, "oai-pmh", run_oai_pmh, help="harvest an OAI-PMH endpoint (Dublin Core) into a channel")
    oai.add_argument("endpoint", metavar="URL", help="the repository's OAI-PMH base URL")
    add_sender_options(oai, _APPLICATION)
    add_state_option(oai, metavar="FILE", help="harvest position file", default=f"under {below_state_directory()}")
    oai.add_argument(
        "--profile", type=Path, metavar="FILE", help="JSON: the repository's organisation, licence, access"
    )
    oai.add_argument("--set", dest="set_spec", metavar="SPEC", help="harvest one set only")
    oai.add_argument("--metadata-prefix", default="oai_dc", help="default: oai_dc (the only one translated)")
    oai.add_argument("--from", dest="start_from", metavar="DATESTAMP", help="first harvest starts here (default: all)")
    add_number_option(
        oai, "--interval", seconds(1), default=300.0, metavar="S", help="seconds between harvests (at least 1)"
    )
    oai.add_argument("--once", action="store_true", help="one complete harvest, then exit")
    add_number_option(
        oai, "--retries", whole_number(0, 20), default=8, help="retries of a request the network or server fails"
    )
    add_number_option(
        oai,
        "--max-bytes",
        whole_number(1024, 1024**3),
        default=DEFAULT_MAX_BYTES,
        help="the largest answer read from the repository; a larger one fails",
    )
    add_number_option(
        oai,
        "--deadline",
        seconds(0, 3600),
        default=DEFAULT_DEADLINE,
        metavar="S",
        help="the most one request to the repository may take, redirects included",
    )
    oai.add_argument(
        "--version",
        dest="message_version",
        choices=("3.0.2", "4.0.0"),
        default="3.0.2",
        help="the Message API version of the messages published (default 3.0.2)",
    )
    add_tenant_options(oai, of="of 4.0.0 messages", env="4.0.0 messages carry")
    add_json_option(oai, "one JSON line of figures per harvest")


def run_oai_pmh(args: argparse.Namespace) -> int:
    """Harvest URL (an OAI-PMH base URL) incrementally and publish each new record as MetadataCreate, each changed one
    as MetadataUpdate and each deleted one as MetadataDelete to CHANNEL.
    """
    from rdss.adaptors.oai_pmh import (
        NETWORK_BACKOFF,
        HarvestError,
        OaiPmhAdaptor,
        OaiPmhClient,
        Profile,
        interruptible,
    )
    from rdss.aws.putrecords import PutRecordsBatcher
    from rdss.gateway import Gateway, GatewayError, SendFailed, TransportError, URLError
    from rdss.model.errors import ChannelKind

    configure_service_logging(args, args.application)
    try:
        endpoint = urlsplit(args.endpoint)
        _ = endpoint.port  # a malformed port or IPv6 host raises here
    except ValueError as error:
        raise CommandError(f"{args.endpoint!r} is not a URL: {error}") from None
    if endpoint.scheme not in ("http", "https") or not endpoint.hostname:
        raise CommandError(f"{args.endpoint!r} is not an http(s) URL")
    if args.metadata_prefix != "oai_dc":
        raise CommandError("only oai_dc (Dublin Core) records are translated")
    if args.channel in {kind.value for kind in ChannelKind}:  # valid records there would be marked published
        raise CommandError(f"--to {args.channel}: an error channel; the adaptor publishes to a data channel (input)")
    try:
        profile = Profile.from_file(args.profile) if args.profile else Profile()
    except (OSError, ValueError, TypeError) as error:
        raise CommandError(f"--profile: {error}") from error
    tenant = _tenant(args)
    state = args.state or _default_state(args.endpoint, args.set_spec)
    try:
        creatable(state)  # where it will be saved after the first page: say now if it cannot be
    except ValueError as error:
        raise CommandError(f"state file {state}: {error}") from error
    try:
        gateway = Gateway(deployment_url(args.url), application=args.application)
        # a harvester runs for days: a deployment it cannot reach is said now, not at the first page
        check = getattr(gateway.transport, "check", None)
        if check is not None:
            try:
                check([gateway.sender.entry(args.channel)])
            except BaseException:
                gateway.close()
                raise
    except (URLError, TransportError) as error:
        raise CommandError(str(error), USAGE) from error
    except (ClientError, BotoCoreError) as error:
        raise CommandError(describe(error), USAGE) from error
    stop = stop_on_signals()
    # every wait ends when SIGTERM comes: the repository's Retry-After, a retry's backoff, and
    # PutRecords' backoff while Kinesis is down (a stop there leaves the page unsaved, to be sent
    # again, with the same message ids, by the next run)
    pause = interruptible(stop)
    batcher = getattr(gateway.transport, "batcher", None)
    if isinstance(batcher, PutRecordsBatcher):
        batcher.sleep = pause
    with gateway:
        try:
            adaptor = OaiPmhAdaptor(
                OaiPmhClient(
                    args.endpoint,
                    backoff=replace(NETWORK_BACKOFF, max_retries=args.retries),
                    max_bytes=args.max_bytes,
                    deadline=args.deadline,
                    sleep=pause,
                    stop=stop,
                ),
                lambda messages: gateway.send_all(messages, channel=args.channel),
                state,
                profile=profile,
                metadata_prefix=args.metadata_prefix,
                set_spec=args.set_spec,
                start_from=args.start_from,
                version=args.message_version,
                tenant_jisc_id=tenant,
            )
        except (OSError, ValueError) as error:
            raise CommandError(f"state file {state}: {getattr(error, 'strerror', None) or error}") from error
        while not stop.is_set():
            try:
                stats = adaptor.harvest(stop)
            except (HarvestError, SendFailed, GatewayError, ClientError, BotoCoreError) as error:
                if args.once:
                    text = describe(error) if isinstance(error, ClientError | BotoCoreError) else str(error)
                    raise CommandError(text, INVALID) from error
                logging.getLogger(__name__).error("harvest failed: %s; next attempt in %g s", error, args.interval)
            else:
                _report(args, adaptor.state.harvests, stats.as_dict())
                if args.once and stats.complete:
                    break
            if args.once or stop.wait(args.interval):
                break
    return 0


def _tenant(args: argparse.Namespace) -> int | None:
    """The tenantJiscID 4.0.0 messages carry: --tenant-jisc-id, else --env's tenant_jisc_id
    setting (as ``rdss translate``); a 4.0.0 harvest without one is refused before it starts."""
    tenant = tenant_jisc_id(args)
    if args.message_version == "4.0.0" and tenant is None:
        raise CommandError("--version 4.0.0: messages carry a tenantJiscID: give --tenant-jisc-id or --env")
    if tenant is not None and not 0 <= tenant <= 2**63 - 1:  # every message would be refused
        raise CommandError(f"--tenant-jisc-id: expected a Jisc ID, a whole number 0..2^63-1, found {tenant}")
    return tenant


def _report(args: argparse.Namespace, number: int, figures: dict[str, Any]) -> None:
    summary = (
        f"harvest {number} of {redact(args.endpoint)}: {figures['pages']} page(s), {figures['records']} record(s): "
        f"{figures['created']} created, {figures['updated']} updated, {figures['deleted']} deleted, "
        f"{figures['unchanged']} unchanged, {figures['invalid']} invalid"
        + ("" if figures["complete"] else " (stopped; resumes from here)")
    )
    report(args, {"harvest": number, **figures}, summary)


def _default_state(endpoint: str, set_spec: str | None) -> Path:
    host = urlsplit(endpoint).hostname or "repository"
    digest = hashlib.sha256(f"{endpoint}|{set_spec}".encode()).hexdigest()[:8]
    return state_directory() / f"oai-pmh-{host[:64]}-{digest}.json"
