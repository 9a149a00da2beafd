"""The AMGI message specification 1.0 (and its lifespan protocol) as typed definitions.

An AMGI application is ``async def app(scope, receive, send)``. A server calls it once per
batch with a ``message`` scope; the application calls ``receive()`` until an event says
``more_messages`` is false and answers each message with ``message.ack`` or ``message.nack``;
it may ``message.send`` to any address. Servers adapt a transport to this interface and know
nothing about applications.
"""

# No ``from __future__ import annotations`` here: a TypedDict turns each string annotation into
# a ForwardRef, compiling it, when the class is made - at every processor's cold start.
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Literal, NotRequired, TypedDict

from rdss.model import errors

#: Version of the AMGI spec and of its message sub-specification this server implements.
AMGI_VERSION = "1.0"
MESSAGE_SPEC_VERSION = "1.0"

Headers = Iterable[tuple[bytes, bytes]]
Bindings = dict[str, dict[str, Any]]


class AMGIVersions(TypedDict):
    version: Literal["1.0"]
    spec_version: str


class MessageScope(TypedDict):
    """One batch of messages from one address (e.g. one Kinesis shard of one stream)."""

    type: Literal["message"]
    amgi: AMGIVersions
    address: str
    state: NotRequired[dict[str, Any]]
    extensions: NotRequired[dict[str, dict[str, Any]]]


class LifespanScope(TypedDict):
    type: Literal["lifespan"]
    amgi: AMGIVersions
    state: NotRequired[dict[str, Any]]


Scope = MessageScope | LifespanScope


class MessageReceiveEvent(TypedDict):
    type: Literal["message.receive"]
    id: str
    headers: Headers
    payload: NotRequired[bytes | None]
    bindings: NotRequired[Bindings]
    more_messages: NotRequired[bool]


class MessageAckEvent(TypedDict):
    type: Literal["message.ack"]
    id: str


class MessageNackEvent(TypedDict):
    type: Literal["message.nack"]
    id: str
    message: str


class MessageSendEvent(TypedDict):
    type: Literal["message.send"]
    address: str
    headers: Headers
    payload: NotRequired[bytes | None]
    bindings: NotRequired[Bindings]


class MessageSendFlushEvent(TypedDict):
    """Extension ``message.send.flush``: deliver every send made so far before returning.

    Servers that buffer sends (as the Kinesis server does, to batch them) advertise
    ``scope["extensions"]["message.send.flush"]``. A failed flush raises :class:`SendFailed`
    naming the sends that were not delivered, so an application can nack exactly the messages
    they belonged to.
    """

    type: Literal["message.send.flush"]


class LifespanStartupEvent(TypedDict):
    type: Literal["lifespan.startup"]


class LifespanShutdownEvent(TypedDict):
    type: Literal["lifespan.shutdown"]


class LifespanCompleteEvent(TypedDict):
    type: Literal["lifespan.startup.complete", "lifespan.shutdown.complete"]


class LifespanFailedEvent(TypedDict):
    type: Literal["lifespan.startup.failed", "lifespan.shutdown.failed"]
    message: str


ReceiveEvent = MessageReceiveEvent | LifespanStartupEvent | LifespanShutdownEvent
SendEvent = (
    MessageAckEvent
    | MessageNackEvent
    | MessageSendEvent
    | MessageSendFlushEvent
    | LifespanCompleteEvent
    | LifespanFailedEvent
)

Receive = Callable[[], Awaitable[Any]]
Send = Callable[[Any], Awaitable[None]]
Application = Callable[[Any, Receive, Send], Awaitable[None]]

#: The extension a server advertises when it buffers sends and honours ``message.send.flush``.
SEND_FLUSH_EXTENSION = "message.send.flush"

#: The extension a server advertises when a ``message.nack`` may carry ``error_code`` (one of the
#: RDSS spec's codes, e.g. APPERRMET002) with ``message`` as its description: the message is then
#: refused, moved decorated to that code's invalid or error channel, instead of delivered again.
NACK_ERROR_CODE_EXTENSION = "message.nack.error_code"


#: Some ``message.send`` events could not be delivered: ``failed`` holds them (the same objects
#: the application sent). The one exception for undelivered messages, shared with the gateway.
SendFailed = errors.SendFailed
