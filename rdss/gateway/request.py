"""Request-Reply with a Return Address and a Correlation Identifier (spec: Metadata Read).

``request(message, timeout)`` sends a request (MetadataRead, VocabularyRead) carrying
``returnAddress`` - a channel of the topology, ``responses`` unless the message or the caller
names another - and returns the reply: the message on that channel whose ``correlationId`` is
the request's messageId. In the deployed system the broker routes each reply to the
returnAddress its request named.

As the spec's sequence diagram has it: the reply channel's shards are listed, and each is
polled from its own thread, from the moment before the request is sent (so a fast reply cannot
be missed), sleeping the gateway's ``reply_poll_interval`` between empty polls; when one thread
finds the reply, all stop. A reply that travels as a sequence is reassembled first; an expired
or invalid one is not a reply. No reply in time raises :class:`RequestTimeout`; a failure reply
(the responder's ``reply_error``: errorCode and errorDescription in its header) raises
:class:`RequestFailed` as soon as it is found - within a poll interval of its arrival.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from rdss.deployment.topology import RDSS
from rdss.gateway.backend import Consumer, Delivery, Transport
from rdss.gateway.exceptions import NotARequest, RequestFailed, RequestTimeout
from rdss.gateway.send import Receipt, Sendable
from rdss.model import translation
from rdss.model.messages import Message
from rdss.model.sequences import Reassembler, SequenceError
from rdss.model.validation import validate, validate_message
from rdss.observability.outside import message_fields
from rdss.repository.entries import RECEIVED, Entry, Repository

_log = logging.getLogger(__name__)
#: Seconds a request waits for its reply unless told: a responder answers within seconds, and a
#: caller must not wait for ever on one that never will.
DEFAULT_TIMEOUT = 30.0


def request(
    message: Sendable,
    timeout: float = DEFAULT_TIMEOUT,
    *,
    transport: Transport,
    repository: Repository,
    send: Callable[[Sendable], Receipt],
    reply_to: str = "responses",
    interval: float = 1.0,
    clock: Callable[[], float] = time.monotonic,
    translate: Callable[[Message], Message] | None = None,
) -> Message:
    """Send ``message`` and wait up to ``timeout`` seconds for its reply (see the module docstring).

    Raises:
        NotARequest: ``message`` is not a Command that expects a reply; nothing is sent.
        RequestTimeout: no reply in time.
        RequestFailed: the reply is a failure reply (its errorCode and errorDescription).
        MessageRefused, SendFailed: from sending the request.
        Untranslatable: ``translate`` (the reply in the version the caller reads) found no form
            for the reply in that version (:mod:`rdss.model.translation`).
    """
    outgoing, address = _with_return_address(message, reply_to)
    consumer = transport.consumer(address, group=None, start="latest")
    try:
        receipt = send(outgoing)
        # the id the responder sees: the message's own, or its first part's if it was split
        request_id = receipt.parts[0]
        watch = _Watch(consumer, request_id, interval, clock)
        reply, parts = watch.wait(timeout)
    finally:
        consumer.close()
    if reply is None:
        raise RequestTimeout(request_id, address, timeout)
    written = reply["messageHeader"].get("version")
    untranslatable = None
    if translate is not None:
        try:
            reply = translate(reply)
        except translation.Untranslatable as error:
            untranslatable = error
    # received either way; a translated reply's entry names both versions (rdss trace's hop)
    delivered = reply["messageHeader"].get("version")
    versions = {} if delivered == written else {"translated_from": str(written), "delivered_as": str(delivered)}
    repository.record([Entry.of(header, RECEIVED, **versions) for header in parts])
    if untranslatable is not None:
        raise untranslatable
    header = reply["messageHeader"]
    _log.info("Message received", extra=message_fields(header, address, errorCode=header.get("errorCode")))
    if header.get("errorCode"):  # a failure reply: the responder could not answer, and says why
        raise RequestFailed(
            str(header["errorCode"]), str(header.get("errorDescription", "")), request_id=request_id, reply=reply
        )
    return reply


def _with_return_address(message: Sendable, reply_to: str) -> tuple[Sendable, str]:
    """The request to send, and the channel its reply will come to."""
    # bytes are read as the classifier reads them: what is not JSON, or names a member twice, has no
    # message to give a returnAddress (re-serialised it would lose the duplicate and pass), and is
    # sent as it is, for the classifier to refuse in its own words
    parsed: Any = (
        validate(message, check_expiry=False, size_limit=None).message
        if isinstance(message, bytes | bytearray)
        else message
    )
    header = parsed.get("messageHeader") if isinstance(parsed, Mapping) else None
    if not isinstance(header, Mapping):
        return message, reply_to  # the classifier refuses it when it is sent
    message_type, message_class = header.get("messageType"), header.get("messageClass")
    if (
        isinstance(message_type, str)
        and isinstance(message_class, str)
        and not _expects_reply(message_type, message_class)
    ):
        raise NotARequest(message_type, message_class)  # else no reply would come, and the caller wait its timeout
    address = header.get("returnAddress")
    if isinstance(address, str) and address:
        return message, address
    return {**parsed, "messageHeader": {**header, "returnAddress": reply_to}}, reply_to


class _Watch:
    """One thread per partition of the reply channel, until one finds the reply."""

    def __init__(self, consumer: Consumer, request_id: str, interval: float, clock: Callable[[], float]) -> None:
        self.consumer = consumer
        self.request_id = request_id
        self.interval = interval
        self.clock = clock
        self.done = threading.Event()
        self.reply: Message | None = None
        self.parts: list[Mapping[str, Any]] = []
        self._lock = threading.Lock()

    def wait(self, timeout: float) -> tuple[Message | None, list[Mapping[str, Any]]]:
        deadline = self.clock() + timeout
        threads: dict[str, threading.Thread] = {}
        try:
            while not self.done.is_set():
                for partition in self.consumer.partitions():  # new ones appear when a shard is resharded
                    if partition not in threads:
                        thread = threading.Thread(
                            target=self._poll, args=(partition,), daemon=True, name=f"reply-{partition}"
                        )
                        threads[partition] = thread
                        thread.start()
                remaining = deadline - self.clock()
                if remaining <= 0:
                    break
                self.done.wait(min(self.interval, remaining))
        finally:
            self.done.set()
            for thread in threads.values():
                thread.join(timeout=30)
        return self.reply, self.parts

    def _poll(self, partition: str) -> None:
        reassembler = Reassembler()
        while not self.done.is_set():
            try:
                deliveries = self.consumer.poll(partition=partition)
            except Exception as error:  # keep waiting: the network may come back before the timeout
                _log.warning("polling %s for a reply failed: %s", partition, error)
                deliveries = []
            for delivery in deliveries:
                if self._match(delivery, reassembler):
                    self.done.set()
                    return
            if not deliveries and partition not in self.consumer.partitions():
                return  # the shard was closed and read to its end
            if not deliveries:
                self.done.wait(self.interval)

    def _match(self, delivery: Delivery, reassembler: Reassembler) -> bool:
        verdict = validate(delivery.payload)
        header = verdict.header
        if header is None or header.get("correlationId") != self.request_id:
            return False
        if not verdict.valid or verdict.message is None:
            _log.warning(
                "a reply to %s was not accepted: %s %s", self.request_id, verdict.error_code, verdict.error_description
            )
            return False
        message: Message | None = verdict.message
        parts: list[Mapping[str, Any]] = [header]
        if verdict.is_part:
            try:
                message = reassembler.add(verdict.message)
            except SequenceError as error:
                _log.warning("a reply to %s could not be reassembled: %s", self.request_id, error)
                return False
            if message is None:
                return False
            check = validate_message(message)
            if not check.valid:
                _log.warning(
                    "the reply to %s is invalid: %s %s", self.request_id, check.error_code, check.error_description
                )
                return False
            parts = [message["messageHeader"]]
        with self._lock:
            if self.reply is None:
                self.reply, self.parts = message, parts
        return True


def _expects_reply(message_type: str, message_class: str) -> bool:
    """A Command whose Document the topology routes back to its returnAddress: a request."""
    answer = RDSS.route(message_type, "Document")
    return message_class == "Command" and answer is not None and answer.reply
