"""The Message Gateway SDK: send, receive and request RDSS messages (spec: Message Gateway).

``Gateway("kinesis://dev")`` talks to a deployment's Kinesis streams; ``Gateway("memory://x")``
to an in-process bus (the spec's Mock, for application tests). See :class:`Gateway`.
"""

from rdss.gateway.backend import Consumer, Delivery, Outcome, Outgoing, Transport, TransportError
from rdss.gateway.consumer import Receiver
from rdss.gateway.exceptions import (
    ChannelMismatch,
    GatewayError,
    MessageRefused,
    NotARequest,
    Rejected,
    RequestFailed,
    RequestTimeout,
    SendFailed,
)
from rdss.gateway.gateway import Gateway
from rdss.gateway.received import Received, ReceiveStats, Selector, select
from rdss.gateway.send import Receipt
from rdss.gateway.url import URLError

__all__ = [
    "ChannelMismatch",
    "Consumer",
    "Delivery",
    "Gateway",
    "GatewayError",
    "MessageRefused",
    "NotARequest",
    "Outcome",
    "Outgoing",
    "Receipt",
    "ReceiveStats",
    "Received",
    "Receiver",
    "Rejected",
    "RequestFailed",
    "RequestTimeout",
    "Selector",
    "SendFailed",
    "Transport",
    "TransportError",
    "URLError",
    "select",
]
