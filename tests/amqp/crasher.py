"""A consumer whose handler kills its own process: ``python -m tests.amqp.crasher URL CHANNEL GROUP``.

The handler prints the messageId and the broker's count of earlier returns (``redeliveries``),
then ``os._exit``: no ack, no nack, no clean close - what a segfault or the OOM killer does.
Prints ``nothing`` and exits 0 if no message comes within a few seconds.
"""

from __future__ import annotations

import os
import sys

from rdss.gateway import Gateway, Received


def main(url: str, channel: str, group: str) -> int:
    def handler(received: Received) -> None:
        attributes = received.deliveries[0].attributes
        print(received.message_id, attributes["redeliveries"], attributes["attempts"], flush=True)
        os._exit(3)

    with Gateway(url, application=group) as gateway:
        gateway.listen(channel, handler, idle_timeout=4, poll_interval=0.05)
    print("nothing", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
