"""The broker function for messaging systems with no broker in front of them (RabbitMQ, memory).

On Kinesis the broker - an AMGI app behind the ``input`` stream - classifies every message,
moves an invalid one, decorated, to ``invalid`` or ``error`` and routes a valid one by content
to its Data Type Channel (EIP Content-Based Router). A backend without that function does the
same here, at the two points it has: when a message is published to ``input``
(:meth:`InlineBroker.route`), and when a record is consumed (:meth:`InlineBroker.screen`). The
backends themselves stay transports: they call these two methods and move bytes.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from rdss.deployment.topology import RDSS, Topology
from rdss.gateway.backend import Outgoing
from rdss.gateway.claims import MessageClaims
from rdss.model import timestamps
from rdss.model.conflicts import DIGEST_ATTRIBUTE, message_digest
from rdss.model.errors import ErrorCode
from rdss.model.rejection import Rejection, Rejector, rejected_key
from rdss.model.validation import validate

#: Where producers publish; the broker function routes what arrives there.
INPUT = "input"

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class InlineBroker:
    """Classify, decorate and route by content, for one backend."""

    topology: Topology = RDSS
    rejector: Rejector = field(default_factory=Rejector)
    #: Which message each messageId published to ``input`` named first (None: not checked).
    claims: MessageClaims | None = None

    def route(self, message: Outgoing) -> Outgoing:
        """The message as it travels on: one sent to ``input`` goes to the channel the topology's
        content-based routes name for it (MetadataCreate -> metadata, a Document answering a
        Read -> responses), an invalid one decorated to ``invalid`` or ``error``; a message
        sent to any other channel goes there as it is. Only the classifier judges: a valid
        message whose header carries errorCode and errorDescription is routed like any other
        (a consumer's move is published to ``invalid`` or ``error`` itself, not to ``input``).

        The gateway's sender classified what it sends and says its messageType and messageClass
        in the headers; only a message without them is classified here.
        """
        if message.channel != INPUT:
            return message
        message_type, message_class = message.headers.get("messageType"), message.headers.get("messageClass")
        headers: Mapping[str, str] = message.headers
        digest = headers.get(DIGEST_ATTRIBUTE)
        if not message_type or not message_class or (self.claims is not None and not digest):
            verdict = validate(message.payload, check_expiry=False, size_limit=None)
            if not verdict.valid or verdict.header is None or verdict.message is None:
                rejection = self.rejector.reject(message.payload, verdict)
                key = rejected_key(message.key, f"input:{message.key}")
                return Outgoing(rejection.channel, rejection.record, key, rejection.headers)
            message_type, message_class = verdict.header["messageType"], verdict.header["messageClass"]
            digest = message_digest(verdict.message)
            message_id = str(verdict.header.get("messageId"))
            headers = {**headers, "messageType": message_type, "messageClass": message_class, "messageId": message_id}
        if self.claims is not None and digest:
            conflict = self._conflict(message, str(headers.get("messageId", "")), digest)
            if conflict is not None:
                return conflict
        found = self.topology.route(message_type, message_class)
        if found is None:  # not a pair the system supports: consumers' classifiers judge it
            return message
        return Outgoing(found.channel, message.payload, message.key, headers)

    def _conflict(self, message: Outgoing, message_id: str, digest: str) -> Outgoing | None:
        """A message under an id that named another message first: moved to ``invalid``
        (GENERR004) and recorded as a CONFLICT (:mod:`rdss.model.conflicts`); None for a new
        message or a resend."""
        assert self.claims is not None
        first = self.claims.claim(message_id, digest)
        if first is None or first.digest == digest:
            return None
        published = timestamps.format(datetime.fromtimestamp(first.at, UTC))
        description = (
            f"messageHeader.messageId: {message_id} was published at {published} for a different message "
            "(its messageType, messageClass or messageBody differ); a messageId names one message"
        )
        _log.warning(
            "messageId %s reused for a different message: this one (digest %s) conflicts with the one published "
            "at %s (digest %s); moved to invalid (GENERR004)",
            message_id,
            digest,
            published,
            first.digest,
            extra={"messageId": message_id, "errorCode": str(ErrorCode.GENERR004)},
        )
        rejection = self.rejector.reject(message.payload, ErrorCode.GENERR004, description)
        key = rejected_key(message.key, f"input:{message.key}")
        return Outgoing(rejection.channel, rejection.record, key, rejection.headers)

    def describe(self, payload: bytes) -> tuple[str | None, str | None]:
        """messageType and messageClass read from a payload whose sender gave no headers (None
        where the header has no such string)."""
        header = validate(payload, check_expiry=False, size_limit=None).header or {}
        message_type, message_class = header.get("messageType"), header.get("messageClass")
        return (
            message_type if isinstance(message_type, str) else None,
            message_class if isinstance(message_class, str) else None,
        )

    def screen(self, payload: bytes) -> Rejection | None:
        """None for a message a consumer may be handed; else what to publish instead (invalid by
        the classifier; expiry is the receiver's to judge, at delivery time)."""
        verdict = validate(payload, check_expiry=False)
        return None if verdict.valid else self.rejector.reject(payload, verdict)
