"""A messageId seen before with a different message: a conflict, kept and visible, never a resend.

A producer that re-sends a message sends the same message again: the same messageType and
messageClass and the same messageBody, though its header may differ where hops and resends
change it (``messageHistory``, ``publishedTimestamp``, an ``expirationTimestamp``). So "the same
message" is decided on a digest of the type, the class and the body in a canonical form (members
sorted, no insignificant whitespace): a copy with the body indented differently or its members
in another order is a resend; one with any value changed is a different message under an id
already used. The first one claimed keeps the id; a conflicting one is never routed as if new:
it is moved to ``invalid`` (GENERR004, its messageId is not unique) and recorded with status
``CONFLICT`` naming the record whose id it reuses, and a WARNING names both records.

The digest is kept on the claim (:data:`DIGEST_ATTRIBUTE`), so :func:`conflicts` works on the
item a failed conditional write returns (``ReturnValuesOnConditionCheckFailure=ALL_OLD``),
whatever call made that write. A claim written before digests were kept has none: its
duplicates stay duplicates.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

import orjson

#: The claim's attribute holding :func:`message_digest`.
DIGEST_ATTRIBUTE = "bodyDigest"
#: The status of a record that reused a claimed messageId for a different message.
CONFLICT = "CONFLICT"


def message_digest(message: Mapping[str, Any]) -> str:
    """A digest of what makes a message the same message: messageType, messageClass and the
    messageBody in canonical JSON (sorted members, compact)."""
    header = message.get("messageHeader") or {}
    subject = {
        "messageType": header.get("messageType"),
        "messageClass": header.get("messageClass"),
        "messageBody": message.get("messageBody"),
    }
    try:
        canonical = orjson.dumps(subject, option=orjson.OPT_SORT_KEYS)
    except (orjson.JSONEncodeError, TypeError):  # integers beyond 64 bits: the slower encoder
        canonical = json.dumps(subject, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str).encode()
    return hashlib.sha256(canonical).hexdigest()[:32]  # SHA-256: the fastest hashlib digest here (CPU SHA extensions)


def conflicts(existing: Mapping[str, Any] | None, digest: str | None) -> bool:
    """Whether a claim found already (the item a failed conditional write returned, in plain
    values) is of a different message than the one with ``digest``. False when either digest
    is unknown: without both, a duplicate is taken for a resend, as before digests were kept."""
    if existing is None or digest is None:
        return False
    found = existing.get(DIGEST_ATTRIBUTE)
    return isinstance(found, str) and found != digest
