"""A consumer that dies holding a message: ``python -m tests.amqp.holder URL CHANNEL GROUP``.

Receives one message through the gateway, prints its messageId and waits to be killed (the
test sends SIGKILL: no ack, no clean close). Prints ``nothing`` and exits if no message comes
within a few seconds.
"""

from __future__ import annotations

import sys
import time

from rdss.gateway import Gateway


def main(url: str, channel: str, group: str) -> int:
    with Gateway(url, application=group) as gateway, gateway.receiver(channel, poll_interval=0.05) as inbox:
        received = inbox.receive(timeout=4)
        if received is None:
            print("nothing", flush=True)
            return 0
        print(received.message_id, flush=True)
        time.sleep(600)  # "processing": the test kills us here
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
