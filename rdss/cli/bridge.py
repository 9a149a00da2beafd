"""``rdss bridge [--url URL] --to OTHER_URL | --from OTHER_URL``: the Messaging Bridge between a
deployment and another messaging system.

Exit codes: 0 stopped (interrupted, idle, or the count reached); 2 a URL is malformed or a
messaging system unreachable at start. Once running, a side that drops is retried, not fatal.
"""

from __future__ import annotations

import argparse
from threading import Event
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from rdss.cli.common import (
    CommandError,
    configure_service_logging,
    deployment_url,
    group_name,
    run_service,
    seconds,
    unreachable_is_usage,
    whole_number,
)
from rdss.cli.options import add_consumer_group_option, add_number_option, add_service_options, deployment_command

if TYPE_CHECKING:
    from rdss.gateway.bridge import BridgeStats


def register(commands: Any) -> None:
    bridge = deployment_command(
        commands, "bridge", run_bridge, help="move messages between Kinesis and RabbitMQ (or memory)"
    )
    direction = bridge.add_mutually_exclusive_group(required=True)
    direction.add_argument("--to", dest="to_url", metavar="OTHER_URL", help="out of the deployment into OTHER_URL")
    direction.add_argument("--from", dest="from_url", metavar="OTHER_URL", help="from OTHER_URL into the deployment")
    bridge.add_argument(
        "--channel",
        dest="channels",
        action="append",
        metavar="CHANNEL",
        help="a channel to move (repeatable; default: metadata, vocabulary, responses)",
    )
    add_consumer_group_option(bridge, "bridge", "consumer group on the source")
    bridge.add_argument(
        "--declare",
        action="append",
        type=group_name,
        default=[],
        metavar="GROUP",
        help="create this consumer group's queues on a RabbitMQ target first (repeatable)",
    )
    add_number_option(bridge, "--batch", whole_number(1, 10_000), default=500, help="records per read")
    add_number_option(
        bridge,
        "--lease-duration",
        seconds(0, 3600),
        default=10.0,
        metavar="S",
        help="Kinesis source: seconds before a restarted bridge takes over a dead one's shards",
    )
    add_service_options(bridge, idle="with nothing to move")


def run_bridge(args: argparse.Namespace) -> int:
    """Read CHANNELs from one messaging system as a consumer group and send every message to the same channel of the
    other: out of the deployment (--url, else $RDSS_GATEWAY_URL, else the running local runtime's) into OTHER_URL
    with --to, or from OTHER_URL into the deployment with --from. At least once: messages the bridge already sent are
    dropped, a side that drops its connection is retried. E.g. rdss bridge --url kinesis://dev --to
    amqp://guest:guest@localhost/%2F
    """
    from rdss.gateway.bridge import DEFAULT_CHANNELS, open_bridge
    from rdss.gateway.exceptions import UnusableName

    configure_service_logging(args, args.group)
    channels = list(dict.fromkeys(args.channels or DEFAULT_CHANNELS))  # a channel named twice is moved once
    deployment = deployment_url(args.url)
    source, target = (deployment, args.to_url) if args.to_url is not None else (args.from_url, deployment)
    try:
        with unreachable_is_usage():
            bridge = open_bridge(
                source,
                target,
                channels,
                group=args.group,
                declare=list(dict.fromkeys(args.declare)),
                lease_duration=args.lease_duration,
                batch_size=args.batch,
            )
    except (ClientError, BotoCoreError) as error:
        raise CommandError(f"cannot reach the source or target: {error}") from error

    def move(stop: Event) -> BridgeStats:
        try:
            return bridge.run(stop=stop, idle_timeout=args.idle, max_messages=args.count)
        except UnusableName as error:
            raise CommandError(str(error)) from error

    return run_service(args, f"bridging {', '.join(channels)}: {source} -> {target}", move, _summary)


def _summary(stats: BridgeStats) -> str:
    return (
        f"read {stats.read}, forwarded {stats.forwarded}, duplicates dropped {stats.duplicates}, "
        f"moved to invalid/error {stats.rejected}, failures retried {stats.failures}"
    )
