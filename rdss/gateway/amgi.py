"""The event-driven consumer for AMGI applications: the gateway as an AMGI server.

The same processors that run behind the Kinesis event-source-mapping adaptor in Lambda run here
against any gateway backend. Each batch of messages from one partition is one ``message``
scope: ``address`` is the channel's physical address, ``receive()`` yields one
``message.receive`` per whole message (sequences already reassembled, duplicates, expired and
unselected messages already removed), with headers ``messageId``, ``messageType``,
``messageClass`` and bindings ``{"gateway": {"channel", "partition", "positions"}}``.

``message.ack`` means processed (RECEIVED, then checkpointed); ``message.nack``, or no answer,
is a failed attempt: delivered again after the spec's backoff, and after the receiver's
``max_attempts`` moved to ``error`` (GENERR009, the nack's message or the app's exception named)
so the partition moves on. A nack carrying ``error_code`` (the ``message.nack.error_code``
extension, advertised in the scope) refuses the message with that code: it is moved, decorated,
to the code's channel and acknowledged. ``message.send`` publishes through the gateway (validated,
recorded TO_SEND/SENT): sends are buffered and delivered before an ack is accepted, and the
``message.send.flush`` extension reports undelivered sends as :class:`rdss.amgi.SendFailed`.
Lifespan startup and shutdown run once around the whole run.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from typing import Any

from rdss.amgi.server import Lifespan, run_scope
from rdss.amgi.types import Application, MessageSendEvent, SendFailed
from rdss.gateway.consumer import Receiver
from rdss.gateway.exceptions import GatewayError
from rdss.gateway.listen import Run, receive_or_wait, settle_failure
from rdss.gateway.received import Received, ReceiveStats

_log = logging.getLogger(__name__)

#: Publishes the payloads of buffered ``message.send`` events: [(address, payload)] -> the
#: indexes of those that were not delivered, with the reason.
Deliver = Callable[[list[tuple[str, bytes]]], dict[int, str]]


def serve(receiver: Receiver, app: Application, run: Run | None, *, address: str, deliver: Deliver) -> ReceiveStats:
    """Run ``app`` on the receiver's channel for as long as ``run`` says (None: until the
    process ends)."""
    run = run or Run(receiver.clock)
    loop = asyncio.new_event_loop()
    state: dict[str, Any] = {}
    lifespan = Lifespan(app, state, _log)
    try:
        loop.run_until_complete(lifespan.startup())
        while run.going():
            batch = receive_batch_or_wait(receiver, run.room(receiver.batch_size), run.stop)
            if run.arrived(bool(batch)):
                break
            for group in _by_partition(batch):
                result = loop.run_until_complete(
                    run_scope(
                        app,
                        _events(group),
                        address=address,
                        state=state,
                        outbox=_Outbox(deliver),
                        log=_log,
                        nack_error_codes=True,
                    )
                )
                acked = result.settled
                run.settled(len(acked))
                receiver.ack([r for r in group if r.message_id in acked])
                retrying = 0
                for received in group:
                    if received.message_id in acked:
                        continue
                    code, why = result.nacked.get(received.message_id, (None, result.why_unacknowledged()))
                    attempts = settle_failure(receiver, received, why, code, why or None)
                    if attempts is None:
                        run.settled()  # refused, or given up on: moved
                    else:
                        retrying = max(retrying, attempts, 1)
                if retrying:  # the spec's backoff before the failed messages come again
                    run.failed(retrying)
                else:
                    run.steady()
        receiver.commit()
        loop.run_until_complete(lifespan.shutdown())
    finally:
        loop.close()
    return receiver.stats


def receive_batch_or_wait(receiver: Receiver, limit: int, stop: threading.Event) -> list[Received]:
    """A batch for the next scope: the first message as :func:`receive_or_wait` (transient
    failures waited out), then what is already read."""
    first = receive_or_wait(receiver, stop)
    return [] if first is None else [first, *receiver.take_ready(limit - 1)]


def _by_partition(batch: list[Received]) -> list[list[Received]]:
    groups: dict[str, list[Received]] = {}
    for received in batch:
        groups.setdefault(received.deliveries[0].partition, []).append(received)
    return list(groups.values())


def _events(batch: list[Received]) -> list[dict[str, Any]]:
    return [
        {
            "type": "message.receive",
            "id": received.message_id,
            "headers": [
                (b"messageId", received.message_id.encode()),
                (b"messageType", received.message_type.encode()),
                (b"messageClass", received.message_class.encode()),
            ],
            "payload": received.payload,
            "bindings": {
                "gateway": {
                    "channel": received.channel,
                    "partition": received.deliveries[0].partition,
                    "positions": [d.position for d in received.deliveries],
                }
            },
        }
        for received in batch
    ]


class _Outbox:
    """A scope's ``message.send`` events, sent through the gateway on flush."""

    def __init__(self, deliver: Deliver) -> None:
        self.deliver = deliver
        self.pending: list[MessageSendEvent] = []

    def add(self, message: MessageSendEvent) -> None:
        self.pending.append(message)

    def flush(self) -> None:
        pending, self.pending = self.pending, []
        if not pending:
            return
        try:
            failures = self.deliver([(m["address"], m.get("payload") or b"") for m in pending])
        except GatewayError as error:
            failures = dict.fromkeys(range(len(pending)), str(error))
        if failures:
            failed = [pending[i] for i in sorted(failures)]
            first = failures[min(failures)]
            raise SendFailed(f"{len(failed)} of {len(pending)} message(s) not delivered: {first}", failed)
