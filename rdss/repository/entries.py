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
``attempts#<shard>/<seq>``  a processor's failed attempts at one record (:mod:`rdss.attempts`)
``conflict#<shard>/<seq>``  a record reusing a claimed messageId with a different body
``gateway:<app>:<id>``      an application's entry in a DynamoDB store a gateway uses
==========================  ========================================================

Only the broker and the sequencer write the deployment's ``messages`` table; a gateway keeps
its entries in a store of its own (:mod:`rdss.repository.stores`).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from rdss.topology import RDSS

#: The spec's statuses of a Local Data Repository entry.
RECEIVED, TO_SEND, SENT = "RECEIVED", "TO_SEND", "SENT"

#: The key attribute of a repository table: the one the topology declares for ``messages``.
KEY_ATTRIBUTE = RDSS.table("messages").partition_key

#: Entries outlive the channels' 168-hour retention, so any redelivery still finds them.
RETENTION_SECONDS = 8 * 24 * 3600

_LEDGER = "ledger#"
_RECORD = "record#"
_ATTEMPTS = "attempts#"


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


#: A redriven record's partition key (:mod:`rdss.redrive`): this prefix, then the identity of
#: the record it repeats. Here, beside the identity, so the broker reads it without loading the
#: redrive tool.
REDRIVE_KEY_PREFIX = "rdss-redrive:"


def redrive_key(record: str) -> str:
    """The partition key of a record put back in place of ``record`` (``<shardId>/<sequence>``)."""
    return f"{REDRIVE_KEY_PREFIX}{record}"


def redriven_record(partition_key: str) -> str | None:
    """The identity a redriven record carries in its partition key, or None for any other record."""
    if partition_key.startswith(REDRIVE_KEY_PREFIX):
        record = partition_key[len(REDRIVE_KEY_PREFIX) :]
        shard, _, sequence = record.partition("/")
        if shard and sequence.isdigit():
            return record
    return None


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

    @classmethod
    def of(cls, header: Mapping[str, Any], status: str, *, error_code: str | None = None) -> Entry:
        """The entry for a message with this header."""
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
        )

    def attributes(self) -> dict[str, Any]:
        return {
            "messageClass": self.message_class,
            "messageType": self.message_type,
            "sequence": self.sequence,
            "position": self.position,
            "status": self.status,
            "returnAddress": self.return_address,
            "correlationId": self.correlation_id,
            "errorCode": self.error_code,
        }


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
