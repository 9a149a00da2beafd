"""What a Local Data Repository holds (spec: Local Data Repository, Transactional Behaviour),
and the one place its keys are spelled.

An entry keeps the spec's fields - messageId, messageClass, messageType, sequence, position and
status - plus returnAddress and correlationId when the message has them. Statuses: TO_SEND
before a message goes out, SENT once the channel acknowledged it, RECEIVED once a message was
processed (a message already RECEIVED is a duplicate).

Key forms, all in the key attribute the topology declares for the ``messages`` table:

==========================  ========================================================
``<messageId>``             the broker's claim of a valid message (de-duplication)
``record#<shard>/<seq>``    the broker's claim of an invalid record (its id is untrusted)
``ledger#<uuid>``           a broker batch's ledger: the records whose outputs were sent
``attempts#<shard>/<seq>``  a processor's failed attempts at one record (:mod:`rdss.processors.attempts`)
``conflict#<shard>/<seq>``  a record reusing a claimed messageId with a different body
``redriven#<shard>/<seq>``  a parked record ``rdss redrive`` put back, naming its new record
``gateway:<app>:<id>``      an application's entry in a DynamoDB store a gateway uses
==========================  ========================================================

Only the broker and the sequencer write the deployment's ``messages`` table, and ``rdss redrive``
(:mod:`rdss.processors.redrive_claims`), run by an operator, which releases the claims of parked records
before it puts them back and notes where each went; a gateway keeps its entries in a store of its
own (:mod:`rdss.repository.stores`), and no vendor's role may write the table. Nothing a producer
writes - a record's bytes, its partition key - names a key here for the broker to trust: a
stream record's identity is the shard and sequence number Kinesis gave it.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, Protocol

import orjson

from rdss.deployment.topology import RDSS

#: The spec's statuses of a Local Data Repository entry.
RECEIVED, TO_SEND, SENT = "RECEIVED", "TO_SEND", "SENT"

#: The key attribute of a repository table: the one the topology declares for ``messages``.
KEY_ATTRIBUTE = RDSS.table("messages").partition_key

#: Entries outlive the channels' retention (a week by default, as the cost model prices it), so
#: any redelivery still finds them; `rdss redrive` matches a legacy archive's records through them.
RETENTION_SECONDS = 8 * 24 * 3600

_LEDGER = "ledger#"
_RECORD = "record#"
_ATTEMPTS = "attempts#"
_REDRIVEN = "redriven#"
#: The schema's UUID (schemas/model/types.json): the only messageIds the broker claims by.
_UUID = re.compile(r"\A[0-9a-f]{8}-[0-9a-f]{4}-[1-5][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}\Z")


def record_key(record: str) -> str:
    """The key under which the broker claims one stream record (``record#<shard>/<seq>``),
    given its :func:`record_id`."""
    return f"{_RECORD}{record}"


def attempts_key(record: str) -> str:
    """The key counting a processor's failed attempts at one record (``attempts#<shard>/<seq>``)."""
    return f"{_ATTEMPTS}{record}"


def record_id(shard: str, sequence_number: str) -> str:
    """One stream record's identity: ``<shard>/<sequence number>``."""
    return f"{shard}/{sequence_number}"


def redriven_key(record: str) -> str:
    """The key of the note ``rdss redrive`` leaves for a parked record it put back
    (``redriven#<shard>/<seq>``, given its :func:`record_id`); the note names the new record."""
    return f"{_REDRIVEN}{record}"


def claimable_id(payload: bytes) -> str | None:
    """The messageId the broker could have claimed ``payload`` by: its header's messageId if it is
    a UUID as the schema spells it (a message with any other id is invalid, claimed as its
    record); None otherwise - so that no id of a producer's choosing, of any length, is looked up."""
    try:
        value = orjson.loads(payload)["messageHeader"]["messageId"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return None
    return value if isinstance(value, str) and _UUID.match(value) else None


def new_ledger_key() -> str:
    """A fresh batch ledger's key (``ledger#<uuid>``)."""
    return f"{_LEDGER}{uuid.uuid4()}"


def application_prefix(application: str) -> str:
    """The prefix of an application's entries in a shared DynamoDB store (``gateway:<app>:``)."""
    return f"gateway:{application}:"


@dataclass(frozen=True, slots=True)
class Entry:
    """One Local Data Repository entry: the spec's minimum and the routing fields."""

    message_id: str
    message_class: str
    message_type: str
    sequence: str
    position: int
    status: str
    return_address: str | None = None
    correlation_id: str | None = None
    #: Set for a message received and moved to the invalid or error channel instead of being
    #: processed (the application refused it, or its handler failed too often: GENERR009).
    error_code: str | None = None
    #: Set for a message received in another version than it was written in: the version the
    #: producer wrote (``translatedFrom``) and the one the application was handed (``deliveredAs``,
    #: the version it reads), so that ``rdss trace`` shows the translation as a hop. Entries
    #: written before these existed have neither, and read back the same.
    translated_from: str | None = None
    delivered_as: str | None = None

    @classmethod
    def of(
        cls,
        header: Mapping[str, Any],
        status: str,
        *,
        error_code: str | None = None,
        translated_from: str | None = None,
        delivered_as: str | None = None,
    ) -> Entry:
        """The entry for a message with this header (the header as it travelled)."""
        sequence = header.get("messageSequence") or {}
        return cls(
            message_id=header["messageId"],
            message_class=header.get("messageClass", ""),
            message_type=header.get("messageType", ""),
            sequence=sequence.get("sequence", ""),
            position=int(sequence.get("position", 1)),
            status=status,
            return_address=header.get("returnAddress"),
            correlation_id=header.get("correlationId"),
            error_code=error_code,
            translated_from=translated_from,
            delivered_as=delivered_as,
        )

    def attributes(self) -> dict[str, Any]:
        """The entry as a store's item holds it: every field but the messageId, by its name in
        the spec (camelCase: ``returnAddress``)."""
        return {attribute: getattr(self, name) for name, attribute in _ATTRIBUTES}

    @classmethod
    def from_attributes(cls, message_id: str, item: Mapping[str, Any]) -> Entry:
        """The entry :meth:`attributes` gave ``item``. A field the item lacks (one written before
        the field existed) reads as empty, position 1; an optional one as None."""
        values: dict[str, Any] = {name: item.get(attribute) for name, attribute in _ATTRIBUTES}
        for name in ("message_class", "message_type", "sequence", "status"):
            values[name] = str(values[name] or "")
        values["position"] = int(values["position"] or 1)
        return cls(message_id, **values)


def _camel(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(word.capitalize() for word in rest)


#: (field, attribute) of every field of an entry but its messageId (the store's key), in order.
_ATTRIBUTES = tuple((f.name, _camel(f.name)) for f in fields(Entry) if f.name != "message_id")


class Repository(Protocol):
    """Where an application records what it sent and received."""

    def record(self, entries: Sequence[Entry]) -> None:
        """Write (or overwrite) these entries; returns once they are durable.

        Raises:
            Exception: the store could not be written (the caller must not treat the messages
                as recorded).
        """
        ...

    def statuses(self, message_ids: Sequence[str]) -> dict[str, str]:
        """The recorded status of each known messageId (unknown ids are absent)."""
        ...

    def entry(self, message_id: str) -> Entry | None:
        """The entry for one messageId, if any."""
        ...
