"""What the gateway raises. Each error names the spec's error code where one applies."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rdss.model.errors import ErrorCode, SendFailed

__all__ = ["GatewayError", "MessageRefused", "NotARequest", "Refusal", "RequestTimeout", "SendFailed", "Undelivered"]


class GatewayError(Exception):
    """Base of every error the gateway raises on purpose."""


class UnusableName(GatewayError, ValueError):
    """A name the messaging system cannot hold (an AMQP queue name over 255 bytes, made of a
    namespace, a consumer group, a channel and a messageType): a mistake to correct, not a
    connection to retry."""


@dataclass(frozen=True)
class Refusal:
    """Why one message was refused before anything was sent."""

    index: int
    error_code: ErrorCode
    error_description: str


class MessageRefused(GatewayError, ValueError):
    """One or more messages failed the classifier; nothing was sent.

    ``error_code`` is the first refusal's code (e.g. GENERR004); ``refusals`` lists them all, by
    the index of the message in the call.
    """

    def __init__(self, refusals: Sequence[Refusal]) -> None:
        self.refusals = list(refusals)
        first = self.refusals[0]
        self.error_code = first.error_code
        more = f" (and {len(self.refusals) - 1} more)" if len(self.refusals) > 1 else ""
        super().__init__(f"{first.error_code}: {first.error_description}{more}")


class ChannelMismatch(GatewayError, ValueError):
    """A message was sent to a channel its content is not routed to, on a messaging system
    where a broker routes by content (Kinesis: every message enters through ``input``, is
    archived there, and the broker puts it on the channel of its type and class). Nothing was
    sent."""

    def __init__(
        self, index: int, message_type: str, message_class: str, channel: str, routed_to: str, entry: str
    ) -> None:
        self.index = index
        self.channel = channel
        self.routed_to = routed_to
        super().__init__(
            f"a {message_type} {message_class} is routed to {routed_to}, not {channel}: every message enters "
            f"through {entry} and the broker routes it by its type and class (send it to {routed_to} or {entry})"
        )


@dataclass(frozen=True)
class Undelivered:
    """A message (or one part of it) the channel did not acknowledge."""

    message_id: str
    error_code: str
    error_message: str


class NotARequest(GatewayError, ValueError):
    """``request`` was given a message no reply answers: only a Command whose type has a reply
    (a Read: MetadataRead, VocabularyRead) is a request. Nothing was sent."""

    def __init__(self, message_type: str, message_class: str) -> None:
        self.message_type = message_type
        self.message_class = message_class
        super().__init__(
            f"a {message_type} {message_class} is not a request: no reply answers it (a request is a Command that "
            "expects a reply: MetadataRead or VocabularyRead); send it instead"
        )


class RequestTimeout(GatewayError, TimeoutError):
    """No reply with the request's messageId as correlationId arrived in time."""

    def __init__(self, request_id: str, channel: str, timeout: float) -> None:
        self.request_id = request_id
        self.channel = channel
        self.timeout = timeout
        super().__init__(f"no reply to {request_id} on {channel} within {timeout:g} s")


class RequestFailed(GatewayError):
    """The responder answered the request with a failure reply (``reply_error``): it could not
    answer, and says why with the spec's code (e.g. APPERRMET003, no such object).

    ``reply`` is the failure Reply itself (a Document whose header carries the correlationId,
    errorCode and errorDescription).
    """

    def __init__(self, error_code: str, error_description: str, *, request_id: str, reply: Mapping[str, Any]) -> None:
        self.error_code = error_code
        self.error_description = error_description
        self.request_id = request_id
        self.reply = reply
        super().__init__(f"{error_code}: {error_description} (the reply to {request_id})")


class Rejected(GatewayError):
    """Raised by a ``listen`` handler to refuse the message with one of the spec's codes
    (APPERRMET001-004, APPERRVOC002, or any GENERR): the gateway moves it, decorated with the
    code and description, to that code's channel and acknowledges it (no retry)."""

    def __init__(self, error_code: str, error_description: str) -> None:
        self.error_code = str(error_code)
        self.error_description = error_description
        super().__init__(f"{error_code}: {error_description}")
