"""The spec's Local Data Repository: entries, statuses and key forms
(:mod:`~rdss.repository.entries`), and the stores that hold them - DynamoDB
(:mod:`~rdss.repository.dynamodb`: the broker's claims and ledgers in the deployment's
``messages`` table; an application's entries in a table of its own), SQLite on an
application's host (:mod:`~rdss.repository.sqlite`) and memory (:mod:`~rdss.repository.memory`).
:func:`~rdss.repository.stores.open_repository` picks a store by URL (a gateway's ``ldr=``).
"""

from rdss.repository.entries import (
    KEY_ATTRIBUTE,
    RECEIVED,
    RETENTION_SECONDS,
    SENT,
    TO_SEND,
    Entry,
    Repository,
)

__all__ = ["KEY_ATTRIBUTE", "RECEIVED", "RETENTION_SECONDS", "SENT", "TO_SEND", "Entry", "Repository"]
