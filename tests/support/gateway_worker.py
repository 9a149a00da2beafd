"""A gateway consumer in its own process, for the crash/resume and lease take-over tests.

    python -m tests.support.gateway_worker URL CHANNEL OUTPUT [--lease S] [--idle S] [--crash-on-checkpoint]

Consumes CHANNEL as application ``worker`` (the consumer group), appending each processed
messageId to OUTPUT (one line each, flushed before the message is acknowledged: what the
application did survives a SIGKILL). ``--crash-on-checkpoint`` kills the process with SIGKILL
at its first checkpoint write - after processing and recording RECEIVED, before the position is
saved - by wrapping the real DynamoDB client. SIGTERM stops it cleanly (leases released).
At the end it prints its receive statistics as one JSON line. AWS settings come from the
environment (the test passes the emulator's).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from typing import Any

from rdss.gateway import Gateway, Received
from rdss.gateway.log.kinesis import GATEWAY_CLIENT_CONFIG
from tests.support.faults import Proxy


def _crash_on_checkpoint(update_item: Any, **kwargs: Any) -> Any:
    if "checkpoint = :p" in kwargs.get("UpdateExpression", ""):
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    return update_item(**kwargs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("channel")
    parser.add_argument("output")
    parser.add_argument("--lease", type=float, default=1.0)
    parser.add_argument("--idle", type=float, default=None)
    parser.add_argument("--crash-on-checkpoint", action="store_true")
    args = parser.parse_args(argv)

    import boto3

    clients: dict[str, Any] = {}
    if args.crash_on_checkpoint:
        dynamodb = boto3.client("dynamodb", config=GATEWAY_CLIENT_CONFIG)
        clients["dynamodb"] = Proxy(dynamodb, update_item=_crash_on_checkpoint)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with open(args.output, "a", encoding="utf-8") as output:

        def handle(received: Received) -> None:
            output.write(received.message_id + "\n")
            output.flush()

        with Gateway(args.url, application="worker", lease_duration=args.lease, clients=clients) as gateway:
            print("ready", flush=True)
            stats = gateway.listen(args.channel, handle, stop=stop, idle_timeout=args.idle, poll_interval=0.1)
    print(json.dumps(stats.as_dict()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
