"""The error codes of the RDSS Message API (section "Error Codes")."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any


class ErrorCode(enum.StrEnum):
    """Every error code the spec defines; the value is the code as it travels in ``errorCode``."""

    GENERR001 = "GENERR001"
    GENERR002 = "GENERR002"
    GENERR003 = "GENERR003"
    GENERR004 = "GENERR004"
    GENERR005 = "GENERR005"
    GENERR006 = "GENERR006"
    GENERR007 = "GENERR007"
    GENERR008 = "GENERR008"
    GENERR009 = "GENERR009"
    GENERR010 = "GENERR010"
    APPERRMET001 = "APPERRMET001"
    APPERRMET002 = "APPERRMET002"
    APPERRMET003 = "APPERRMET003"
    APPERRMET004 = "APPERRMET004"
    APPERRVOC002 = "APPERRVOC002"

    @property
    def description(self) -> str:
        """The spec's description of the code."""
        return DESCRIPTIONS[self]

    @property
    def channel(self) -> ChannelKind:
        """Where a message failing with this code goes: the invalid or the error channel."""
        return ChannelKind.ERROR if self in _ERROR_CHANNEL_CODES else ChannelKind.INVALID


class ChannelKind(enum.StrEnum):
    """The two channels for messages that cannot be processed (spec: Error Queues)."""

    #: The Invalid Message Queue: the message itself is wrong (malformed, missing fields...).
    INVALID = "invalid"
    #: The Error Message Queue: the message could not be processed (expiry, size, infrastructure).
    ERROR = "error"


DESCRIPTIONS: dict[ErrorCode, str] = {
    ErrorCode.GENERR001: "The Message Body is not in the expected format, for example mandatory fields are missing.",
    ErrorCode.GENERR002: "The provided messageType is not supported.",
    ErrorCode.GENERR003: "The expiration date of the Message had passed at the point at which delivery was attempted.",
    ErrorCode.GENERR004: "Invalid, missing or corrupt headers were detected on the Message.",
    ErrorCode.GENERR005: "Maximum number of connection retries exceeded when attempting to send the Message.",
    ErrorCode.GENERR006: "An error occurred interacting with the underlying system.",
    ErrorCode.GENERR007: "Malformed JSON was detected in the Message Body.",
    ErrorCode.GENERR008: "An attempt to roll back a transaction failed.",
    ErrorCode.GENERR009: "An unexpected or unknown error occurred.",
    ErrorCode.GENERR010: "Received an invalid / malformed UUID.",
    ErrorCode.APPERRMET001: "Received a Metadata UPDATE with a datasetUuid that does not exist.",
    ErrorCode.APPERRMET002: "Received a Metadata DELETE with a datasetUuid that does not exist.",
    ErrorCode.APPERRMET003: "Received a Metadata READ with a datasetUuid that does not exist.",
    ErrorCode.APPERRMET004: "Received an invalid checksum for a file provided within the payload.",
    ErrorCode.APPERRVOC002: "Received a Vocabulary READ with a vocabularyId that does not exist.",
}

# The spec sends infrastructure trouble, oversize and expired messages to the Error Message
# Queue and malformed ones to the Invalid Message Queue; application codes describe bad content.
_ERROR_CHANNEL_CODES = frozenset(
    {
        ErrorCode.GENERR003,
        ErrorCode.GENERR005,
        ErrorCode.GENERR006,
        ErrorCode.GENERR008,
        ErrorCode.GENERR009,
    }
)


class SendFailed(OSError):
    """Messages that were not delivered to their channel after every retry.

    Raised by the gateway's send (``failed`` lists :class:`rdss.gateway.exceptions.Undelivered`
    records, ``sent`` the receipts of the messages that did go) and by the AMGI servers'
    ``message.send.flush`` (``failed`` holds the application's own ``message.send`` events; the
    AMGI spec asks for an OSError). ``error_code`` is GENERR005 when retries ran out (throttling,
    the network), GENERR006 when the messaging system refused outright.
    """

    def __init__(
        self,
        message: str,
        failed: Sequence[Any] = (),
        *,
        error_code: ErrorCode = ErrorCode.GENERR005,
        sent: Sequence[object] = (),
    ) -> None:
        super().__init__(message)
        self.failed = list(failed)
        self.error_code = error_code
        self.sent = list(sent)

    @property
    def undelivered(self) -> list[Any]:
        """What was not delivered (the gateway's name for :attr:`failed`)."""
        return self.failed
