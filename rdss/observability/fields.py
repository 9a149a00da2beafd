"""The fields of a log line about one message, whoever logs it: the processors' Powertools
logger in Lambda (JSON keys) and :mod:`rdss.observability.outside`' formats outside it (``key=value``, JSON
members, syslog structured data).

A module of its own, importing nothing: a processor's handler names a message's fields in its
lines without loading the logging set-up it never uses (syslog, the formatters).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def message_fields(header: Mapping[str, Any], channel: str | None = None, **more: Any) -> dict[str, Any]:
    """The ``extra`` of a log line about one message: messageId, messageType, messageClass,
    channel, the sequence position of a part, and ``more`` (e.g. errorCode=...)."""
    fields: dict[str, Any] = {
        "messageId": header.get("messageId"),
        "messageType": header.get("messageType"),
        "messageClass": header.get("messageClass"),
    }
    if channel is not None:
        fields["channel"] = channel
    sequence = header.get("messageSequence")
    if isinstance(sequence, Mapping) and sequence.get("total", 1) != 1:
        fields.update(sequence=sequence.get("sequence"), position=sequence.get("position"), total=sequence.get("total"))
    fields.update({k: str(v) for k, v in more.items() if v is not None})
    return fields
