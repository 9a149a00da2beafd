"""Which store holds an application's Local Data Repository, by URL.

* ``dynamodb://TABLE`` - a DynamoDB table of the application's own (partition key
  ``messageId``, a string; TTL attribute ``expiresAt``), entries under ``gateway:<app>:``;
* ``sqlite:///absolute/path`` (or ``sqlite://relative/path``) - a SQLite file on this host;
* ``memory://`` - a dict in this process (tests).

Never the deployment's ``messages`` table: the broker claims bare messageIds there for
de-duplication, and only the broker and sequencer roles may write it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from rdss.repository.entries import Repository

SCHEMES = ("dynamodb", "sqlite", "memory")


def open_repository(url: str, application: str, *, dynamodb: Callable[[], Any]) -> Repository:
    """The store ``url`` names, for ``application``'s entries.

    Args:
        dynamodb: makes the DynamoDB client (called only for ``dynamodb://``).

    Raises:
        ValueError: not one of the forms above.
    """
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme == "dynamodb":
        table = parts.netloc or parts.path.strip("/")
        if not table or "/" in table:
            raise ValueError(f"ldr={url!r}: expected dynamodb://TABLE")
        from rdss.repository.dynamodb import DynamoRepository, LocalDataRepository

        return DynamoRepository(LocalDataRepository(dynamodb(), table), application)
    if scheme == "sqlite":
        path = parts.netloc + parts.path
        if not path or path == "/":
            raise ValueError(f"ldr={url!r}: expected sqlite:///absolute/path or sqlite://relative/path")
        from rdss.repository.sqlite import SqliteRepository

        return SqliteRepository(Path(path).expanduser(), application)
    if scheme == "memory":
        from rdss.repository.memory import MemoryRepository

        return MemoryRepository()
    raise ValueError(f"ldr={url!r}: expected {', '.join(s + '://...' for s in SCHEMES)}")
