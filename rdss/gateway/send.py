"""Sending (spec: Transactional Behaviour, Multi-Message Sequence, Network Failure Behaviour).

For each call, in order:

1. every message is classified with :func:`rdss.model.validation.validate` (the size stage aside: a
   message over the limit is split, not refused); if any is invalid nothing is sent and
   :class:`MessageRefused` names each one's error code;
2. the gateway's hop is appended to each message's messageHistory (:mod:`rdss.model.history`); where a
   broker routes by content (Kinesis) a message named for a routed channel is published on the
   transport's entry channel (``input``, archived by the Audit Log), and must be routed to the
   channel named (:class:`ChannelMismatch` otherwise);
3. a message over the limit becomes a sequence (:func:`rdss.model.sequences.split`) whose parts all
   carry the sequence id as partition key, so they land on one shard, in order;
4. the Local Data Repository records every message (every part) TO_SEND;
5. the transport publishes and blocks until each is acknowledged (PutRecords batches of 500,
   failed entries retried with the spec's backoff);
6. what was acknowledged is recorded SENT; anything the channel never acknowledged stays TO_SEND
   and :class:`SendFailed` reports it with GENERR005 (retries exhausted, logged) or GENERR006.

A send may carry Mosaic's ``auth_token`` (the JWT of the actor behind it) and ``context`` (a
JSON object to carry along): they travel *beside* the message, never inside its bytes (the RDSS
header admits no such members), as the ``authToken`` and ``messageContext`` headers of each
:class:`Outgoing` record. A transport with somewhere to put them carries them (``amqp://``: in
the Mosaic envelope); the others leave them behind (see docs/rabbitmq.md).

Large batches go through in windows of :data:`WINDOW` records, so memory stays bounded and each
window costs ten full PutRecords calls.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from rdss import MAX_MESSAGE_BYTES
from rdss.deployment.topology import RDSS
from rdss.gateway.backend import Outgoing, Transport
from rdss.gateway.exceptions import ChannelMismatch, MessageRefused, Refusal, SendFailed, Undelivered
from rdss.model import history
from rdss.model.conflicts import DIGEST_ATTRIBUTE, message_digest
from rdss.model.errors import ErrorCode
from rdss.model.sequences import split
from rdss.model.validation import validate
from rdss.observability.outside import message_fields
from rdss.repository.entries import SENT, TO_SEND, Entry, Repository

_log = logging.getLogger(__name__)

#: Channels a broker fills by content: where it routes, a send to them goes to the entry channel.
_BROKERED = frozenset(c.name for c in RDSS.channels if c.kind in ("routed", "sequence"))

#: Records per TO_SEND / publish / SENT round: ten PutRecords calls of 500.
WINDOW = 5_000

#: What callers may send: a message (the spec's JSON shape) or its serialised bytes.
Sendable = Mapping[str, Any] | bytes | bytearray


@dataclass(frozen=True)
class Receipt:
    """A message that is in the channel (every part acknowledged)."""

    #: The messageId the message was given. A split message travels as parts with ids of their
    #: own; receivers see it, reassembled, under the first part's id (``parts[0]``).
    message_id: str
    channel: str
    #: messageIds of the parts it travelled as, in position order (just ``message_id`` if whole).
    parts: tuple[str, ...]
    sequence: str

    @property
    def split(self) -> bool:
        """True when the message travelled as a multi-message sequence."""
        return len(self.parts) > 1


@dataclass
class _Prepared:
    receipt: Receipt
    #: (header, payload) per record to publish
    records: list[tuple[dict[str, Any], bytes]]
    key: str
    #: per record: the digest telling a resend from another message under its id (the inline
    #: broker's conflicts, rdss.model.conflicts), so that it need not parse the payload again
    digests: list[str]


class Sender:
    """Validates, splits, records and publishes messages for one gateway.

    Each message gains this gateway's hop in its messageHistory (``machine_id``, this host, now)
    before it is split or sent; no other byte of it changes.
    """

    def __init__(
        self,
        transport: Transport,
        repository: Repository,
        *,
        limit: int = MAX_MESSAGE_BYTES,
        machine_id: str = "gateway",
    ) -> None:
        self.transport = transport
        self.repository = repository
        self.limit = limit
        self.machine_id = machine_id

    def send(
        self,
        messages: Iterable[Sendable],
        channel: str,
        *,
        auth_token: str | None = None,
        context: Mapping[str, Any] | None = None,
    ) -> list[Receipt]:
        """Send every message to ``channel``; returns once all are acknowledged. ``auth_token``
        and ``context`` go with every one of them, beside its bytes (module docstring).

        Raises:
            MessageRefused: a message failed the classifier (nothing was sent).
            SendFailed: some were not acknowledged after every retry (they stay TO_SEND).
            TransportError: the channel is unknown or the messaging system unusable.
        """
        prepared = self.prepare(messages, channel)
        channel = self.entry(channel)
        extra = carried_headers(auth_token, context)
        receipts: list[Receipt] = []
        undelivered: list[Undelivered] = []
        exhausted = False
        window: list[_Prepared] = []
        size = 0
        for item in prepared:
            window.append(item)
            size += len(item.records)
            if size >= WINDOW:
                exhausted |= self._window(window, channel, receipts, undelivered, extra)
                window, size = [], 0
        if window:
            exhausted |= self._window(window, channel, receipts, undelivered, extra)
        if undelivered:
            code = ErrorCode.GENERR005 if exhausted else ErrorCode.GENERR006
            first = undelivered[0]
            raise SendFailed(
                f"{code}: {len(undelivered)} message(s) not sent, e.g. {first.message_id} "
                f"({first.error_code}: {first.error_message})",
                undelivered,
                error_code=code,
                sent=receipts,
            )
        return receipts

    def entry(self, channel: str) -> str:
        """The channel a message for ``channel`` is published on: the transport's entry channel
        (Kinesis: ``input``, where the broker routes by content and Firehose archives every
        record) for the routed and sequence channels; the channel itself otherwise."""
        entry = self.transport.entry_channel
        if entry is None or channel == entry or channel not in _BROKERED:
            return channel
        return entry

    def _digest(self, message: Mapping[str, Any]) -> str:
        """The digest an inline broker tells conflicts by (rdss.model.conflicts), computed
        here where the message is parsed already; "" where no inline broker checks them."""
        inline = self.transport.inline
        return message_digest(message) if inline is not None and inline.claims is not None else ""

    def prepare(self, messages: Iterable[Sendable], channel: str) -> list[_Prepared]:
        """Classify and split; raises :class:`MessageRefused` if any message is invalid, and
        :class:`ChannelMismatch` if one names a channel its content is not routed to where a
        broker routes by content."""
        prepared: list[_Prepared] = []
        refusals: list[Refusal] = []
        brokered = self.entry(channel) != channel
        hop = history.hop(self.machine_id)
        for index, message in enumerate(messages):
            payload = bytes(message) if isinstance(message, bytes | bytearray) else orjson.dumps(message)
            verdict = validate(payload, size_limit=None)
            if not verdict.valid or verdict.message is None:
                assert verdict.error_code is not None
                refusals.append(Refusal(index, verdict.error_code, verdict.error_description or ""))
                _log.warning(
                    "Message refused",
                    extra=message_fields(
                        verdict.header or {},
                        channel,
                        errorCode=verdict.error_code,
                        errorDescription=verdict.error_description,
                    ),
                )
                continue
            header = verdict.message["messageHeader"]
            if brokered:
                _check_route(index, header, channel, verdict.is_part, self.entry(channel))
            payload = history.append(payload, hop, header=header)
            if verdict.is_part or len(payload) <= self.limit:
                sequence = header["messageSequence"]["sequence"]
                key = sequence if verdict.is_part else header["messageId"]
                receipt = Receipt(header["messageId"], channel, (header["messageId"],), sequence)
                prepared.append(_Prepared(receipt, [(header, payload)], key, [self._digest(verdict.message)]))
                continue
            parts = split(orjson.loads(payload), self.limit)
            sequence = parts[0]["messageHeader"]["messageSequence"]["sequence"]
            records = [(part["messageHeader"], orjson.dumps(part)) for part in parts]
            receipt = Receipt(
                header["messageId"], channel, tuple(part["messageHeader"]["messageId"] for part in parts), sequence
            )
            prepared.append(_Prepared(receipt, records, sequence, [self._digest(part) for part in parts]))
        if refusals:
            raise MessageRefused(refusals)
        return prepared

    def _window(
        self,
        window: Sequence[_Prepared],
        channel: str,
        receipts: list[Receipt],
        undelivered: list[Undelivered],
        extra: Mapping[str, str],
    ) -> bool:
        """TO_SEND, publish, SENT for one window; returns True when retries ran out for any."""
        self.repository.record([Entry.of(header, TO_SEND) for item in window for header, _ in item.records])
        outgoing = [
            Outgoing(channel, payload, item.key, {**_routing_headers(header), **_digest_header(digest), **extra})
            for item in window
            for (header, payload), digest in zip(item.records, item.digests, strict=True)
        ]
        outcomes = self.transport.publish(outgoing)
        logging_sent = _log.isEnabledFor(logging.INFO)
        sent: list[Entry] = []
        exhausted = False
        position = 0
        for item in window:
            results = outcomes[position : position + len(item.records)]
            position += len(item.records)
            failed = [r for r in results if not r.ok]
            if not failed:
                receipts.append(item.receipt)
            for (header, _), result in zip(item.records, results, strict=True):
                if result.ok:
                    sent.append(Entry.of(header, SENT))
                    if logging_sent:
                        _log.info("Message sent", extra=message_fields(header, channel))
                else:
                    exhausted |= result.retries_exhausted
                    undelivered.append(Undelivered(header["messageId"], result.error_code or "", result.error_message))
                    code = ErrorCode.GENERR005 if result.retries_exhausted else ErrorCode.GENERR006
                    _log.error(
                        "Message not sent",
                        extra=message_fields(
                            header,
                            channel,
                            errorCode=code,
                            errorDescription=f"{result.error_code}: {result.error_message}",
                        ),
                    )
        self.repository.record(sent)
        return exhausted


def _check_route(index: int, header: Mapping[str, Any], channel: str, is_part: bool, entry: str) -> None:
    """A message named for a routed channel must be routed there by its content, since the
    broker, not the producer, puts it there.

    Raises:
        ChannelMismatch: it would end up elsewhere.
    """
    route = RDSS.route(header["messageType"], header["messageClass"])
    if route is None:  # pragma: no cover - the classifier refuses unroutable pairs first
        return
    if channel == "sequence":
        fits = is_part
    elif route.reply:  # goes to the returnAddress its request named: any routed channel
        fits = RDSS.channel(channel).kind == "routed"
    else:
        fits = route.channel == channel
    if not fits:
        raise ChannelMismatch(index, header["messageType"], header["messageClass"], channel, route.channel, entry)


def carried_headers(auth_token: str | None, context: Mapping[str, Any] | None) -> dict[str, str]:
    """The :class:`Outgoing` headers that carry a send's Mosaic auth token and context (the
    context as compact JSON: headers are text).

    Raises:
        TypeError: the context is not a JSON object, or the token not text.
    """
    headers: dict[str, str] = {}
    if auth_token is not None:
        if not isinstance(auth_token, str):
            raise TypeError(f"auth_token must be text, not {type(auth_token).__name__}")
        headers["authToken"] = auth_token
    if context is not None:
        if not isinstance(context, Mapping):
            raise TypeError(f"context must be a JSON object, not {type(context).__name__}")
        headers["messageContext"] = orjson.dumps(dict(context)).decode()
    return headers


def _digest_header(digest: str) -> dict[str, str]:
    return {DIGEST_ATTRIBUTE: digest} if digest else {}


def _routing_headers(header: Mapping[str, Any]) -> dict[str, str]:
    sequence = header.get("messageSequence") or {}
    headers = {
        "messageId": str(header.get("messageId", "")),
        "messageType": str(header.get("messageType", "")),
        "messageClass": str(header.get("messageClass", "")),
        "sequence": str(sequence.get("sequence", "")),
        "position": str(sequence.get("position", 1)),
        "total": str(sequence.get("total", 1)),
    }
    if header.get("correlationId"):
        headers["correlationId"] = str(header["correlationId"])
    if header.get("returnAddress"):
        headers["returnAddress"] = str(header["returnAddress"])
    return headers
