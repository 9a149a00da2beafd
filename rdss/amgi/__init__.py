"""AMGI: the interface the processors implement, and servers that adapt transports to it."""

from rdss.amgi.types import (
    AMGI_VERSION,
    MESSAGE_SPEC_VERSION,
    SEND_FLUSH_EXTENSION,
    Application,
    LifespanScope,
    MessageAckEvent,
    MessageNackEvent,
    MessageReceiveEvent,
    MessageScope,
    MessageSendEvent,
    Receive,
    Scope,
    Send,
    SendFailed,
)

__all__ = [
    "AMGI_VERSION",
    "MESSAGE_SPEC_VERSION",
    "SEND_FLUSH_EXTENSION",
    "Application",
    "LifespanScope",
    "MessageAckEvent",
    "MessageNackEvent",
    "MessageReceiveEvent",
    "MessageScope",
    "MessageSendEvent",
    "Receive",
    "Scope",
    "Send",
    "SendFailed",
]
