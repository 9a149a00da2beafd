"""What a receiver hands the application: a whole :class:`Received` message, the Message
Selector that chooses them, and the :class:`ReceiveStats` of what it did with the records."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypedDict

from rdss.gateway.backend import Delivery, StartPosition
from rdss.model.messages import Message
from rdss.repository.entries import Entry


class Rejecting(Protocol):
    """Where a :class:`Received` message goes back to be refused: the receiver that handed it
    out (:meth:`rdss.gateway.consumer.Receiver.reject`)."""

    def reject(self, received: Received, error_code: str, description: str) -> None: ...


#: A Message Selector: receives the messageHeader, returns True to deliver the message.
Selector = Callable[[Mapping[str, Any]], bool]


class ReceiveOptions(TypedDict, total=False):
    """What an application may choose of a receiver (:meth:`rdss.gateway.Gateway.receiver`):
    passed on as given, so the defaults are :class:`rdss.gateway.consumer.Receiver`'s alone."""

    selector: Selector | None
    throttle: float | None
    batch_size: int
    poll_interval: float
    sequence_timeout: float
    max_attempts: int | None


class ListenOptions(ReceiveOptions, total=False):
    """:meth:`rdss.gateway.Gateway.listen`'s options of the receiver it opens: those of
    :class:`ReceiveOptions`, and the consumer group and where it starts."""

    group: str | None
    start: StartPosition


def select(
    *, message_type: str | Sequence[str] | None = None, message_class: str | Sequence[str] | None = None
) -> Selector:
    """A selector accepting these message types and/or classes, e.g.
    ``select(message_type="MetadataCreate")``."""
    types = {message_type} if isinstance(message_type, str) else set(message_type or ())
    classes = {message_class} if isinstance(message_class, str) else set(message_class or ())

    def selector(header: Mapping[str, Any]) -> bool:
        return (not types or header.get("messageType") in types) and (
            not classes or header.get("messageClass") in classes
        )

    return selector


@dataclass(frozen=True)
class Received:
    """A whole message handed to the application, and the records it came in."""

    message: Message
    #: As it travelled for a whole message (byte for byte); re-serialised when reassembled.
    payload: bytes
    channel: str
    deliveries: tuple[Delivery, ...]
    #: The headers of those records (one per part), for the Local Data Repository.
    parts: tuple[Mapping[str, Any], ...]
    #: The receiver it came from (for :meth:`reject`).
    receiver: Rejecting | None = field(default=None, compare=False, repr=False)
    #: The version the producer wrote it in, when the receiver translated it into the one the
    #: application reads (its Local Data Repository entry records both: ``rdss trace``'s hop).
    translated_from: str | None = None

    def entry(self, header: Mapping[str, Any], status: str, *, error_code: str | None = None) -> Entry:
        """The Local Data Repository entry of one of its parts' ``header``."""
        if self.translated_from is None:
            return Entry.of(header, status, error_code=error_code)
        delivered_as = str(self.header.get("version"))
        return Entry.of(
            header, status, error_code=error_code, translated_from=self.translated_from, delivered_as=delivered_as
        )

    @property
    def header(self) -> Mapping[str, Any]:
        header: Mapping[str, Any] = self.message["messageHeader"]
        return header

    @property
    def message_id(self) -> str:
        return str(self.header["messageId"])

    @property
    def message_type(self) -> str:
        return str(self.header["messageType"])

    @property
    def message_class(self) -> str:
        return str(self.header["messageClass"])

    @property
    def body(self) -> Any:
        return self.message.get("messageBody")

    def reject(self, error_code: str, description: str) -> None:
        """Refuse the message with one of the spec's codes (an application's: APPERRMET001-004,
        APPERRVOC002; or any GENERR): it is moved, decorated, to that code's channel and
        acknowledged. See :meth:`Receiver.reject`."""
        if self.receiver is None:
            raise RuntimeError("this message was not handed out by a Receiver")
        self.receiver.reject(self, error_code, description)


@dataclass
class ReceiveStats:
    """What a receiver did with the records it read."""

    #: Whole messages handed to the application.
    delivered: int = 0
    #: Messages the application acknowledged (their records settled and checkpointed).
    acked: int = 0
    #: Times records were read again: a rewind after a failure, a lost lease, a nack.
    redelivered: int = 0
    #: Records of a messageId already received (or held, or just moved): settled, not delivered.
    duplicates: int = 0
    #: This application's own messages (TO_SEND or SENT in its repository) coming back.
    own: int = 0
    #: Messages the Message Selector turned down: settled, not delivered.
    filtered: int = 0
    #: Records the classifier refused (whole messages, and parts of invalid sequences): moved,
    #: decorated, to the invalid or error channel of their code.
    invalid: int = 0
    #: Expired messages (and parts of expired or timed-out sequences) moved to the error channel.
    expired: int = 0
    #: Messages the application refused with a code (:meth:`Received.reject`, ``Rejected``).
    rejected: int = 0
    #: Messages whose handler failed ``max_attempts`` times: moved to ``error`` (GENERR009).
    poison: int = 0
    #: Messages with no form in the version the application reads: moved to ``error`` (GENERR006).
    untranslatable: int = 0
    #: Records read from the channel.
    records: int = 0
    #: Seconds the throttle held deliveries back.
    throttled_seconds: float = 0.0

    def as_dict(self) -> dict[str, float]:
        return dict(self.__dict__)


def describe_failure(reason: BaseException | str | None) -> str:
    """An errorDescription naming what failed: the exception's type and message."""
    if isinstance(reason, BaseException):
        return f"{type(reason).__name__}: {reason}" if str(reason) else type(reason).__name__
    return reason or "nacked without a reason"
