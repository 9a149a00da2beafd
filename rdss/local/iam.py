"""IAM policies evaluated as AWS evaluates them, for the requests the local emulator serves
(:mod:`rdss.local.authorise` says which requests, and where the policies come from).

A request is an action (``kinesis:PutRecords``), a resource (an ARN, or ``*`` for an action on
none) and the condition keys it carries (``dynamodb:LeadingKeys``, ``sts:ExternalId``). It is
allowed when some statement allows it and none denies it: an explicit Deny wins, and with no
Allow it is denied implicitly. A statement may name ``Action`` or ``NotAction``, ``Resource``
or ``NotResource`` (``*`` and ``?`` wildcards; actions compared without regard to case),
``Principal`` (a trust policy's: ``*``, an account, its root or an ARN) and conditions with the
operators ``StringEquals``, ``StringNotEquals``, ``StringLike``, ``StringNotLike``, ``Null``,
each with ``IfExists`` and the ``ForAllValues:``/``ForAnyValue:`` set forms.

A statement using anything else (another operator, a malformed element) is not understood, and
fails closed: such an Allow allows nothing, such a Deny denies. What is enforced locally is
never more than AWS would allow.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

#: The condition operators understood (before ``IfExists`` and a set prefix).
_OPERATORS = frozenset({"StringEquals", "StringNotEquals", "StringLike", "StringNotLike", "Null"})
_ACCOUNT = re.compile(r"\d{12}\Z")


@dataclass(frozen=True)
class Request:
    """One authorisation: who does what to which resource, with which condition keys."""

    #: The caller's ARN (``arn:aws:sts::ACCOUNT:assumed-role/ROLE/SESSION``, an account's root).
    principal: str
    action: str
    resource: str
    #: Condition key -> its values (a single-valued key has one; an absent key is left out).
    context: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Decision:
    """Whether a request is allowed, and AWS's sentence when it is not."""

    allowed: bool
    #: True when a statement denied it explicitly (else: no statement allowed it).
    explicit: bool = False

    def explain(self, request: Request) -> str:
        """AWS's words for a refusal of ``request``."""
        reason = (
            "with an explicit deny in an identity-based policy"
            if self.explicit
            else f"because no identity-based policy allows the {request.action} action"
        )
        return (
            f"User: {request.principal} is not authorized to perform: {request.action} "
            f"on resource: {request.resource} {reason}"
        )


def statements(document: str | Mapping[str, Any]) -> list[dict[str, Any]]:
    """The statements of a policy document (JSON text, URL-encoded as IAM returns it, or parsed).

    Raises:
        ValueError: not a policy document.
    """
    if isinstance(document, str):
        try:
            parsed = json.loads(document)
        except ValueError:
            parsed = json.loads(unquote(document))
    else:
        parsed = document
    if not isinstance(parsed, Mapping):
        raise ValueError("a policy document is a JSON object")
    found = parsed.get("Statement", [])
    found = [found] if isinstance(found, Mapping) else found
    if not isinstance(found, list) or not all(isinstance(s, Mapping) for s in found):
        raise ValueError("a policy's Statement is an object or a list of objects")
    return [dict(s) for s in found]


def decide(policy: Iterable[Mapping[str, Any]], request: Request) -> Decision:
    """Evaluate ``request`` against every statement of ``policy`` (one or more documents'
    statements together): a Deny that applies wins; else an Allow that applies allows."""
    allowed = False
    for statement in policy:
        effect = statement.get("Effect")
        understood, applies = _applies(statement, request)
        if effect == "Deny" and (applies or not understood):
            return Decision(False, explicit=True)
        if effect == "Allow" and understood and applies:
            allowed = True
    return Decision(allowed)


def _applies(statement: Mapping[str, Any], request: Request) -> tuple[bool, bool]:
    """(understood, applies) of one statement to the request."""
    try:
        matches = (
            _element(statement, "Action", request.action, _action_matches)
            and _element(statement, "Resource", request.resource, _resource_matches, absent=True)
            and _principal(statement.get("Principal"), request.principal)
            and _conditions(statement.get("Condition", {}), request.context)
        )
    except _NotUnderstood:
        return False, False
    return True, matches


class _NotUnderstood(Exception):
    """A statement this evaluator does not understand (it then fails closed)."""


def _element(statement: Mapping[str, Any], name: str, value: str, match: Any, *, absent: bool = False) -> bool:
    """``Action``/``NotAction`` (or ``Resource``/``NotResource``) covers ``value``; with neither,
    ``absent`` (a trust policy names no resource)."""
    if name in statement and f"Not{name}" in statement:
        raise _NotUnderstood(f"{name} and Not{name} together")
    if name in statement:
        return any(match(pattern, value) for pattern in _strings(statement[name]))
    if f"Not{name}" in statement:
        return not any(match(pattern, value) for pattern in _strings(statement[f"Not{name}"]))
    if absent:
        return True
    raise _NotUnderstood(f"no {name}")


def _action_matches(pattern: str, action: str) -> bool:
    return _wildcard(pattern.lower(), action.lower())


def _resource_matches(pattern: str, resource: str) -> bool:
    return _wildcard(pattern, resource)


def _wildcard(pattern: str, value: str) -> bool:
    """IAM's wildcards: ``*`` any run of characters, ``?`` any one; nothing else is special."""
    return fnmatch.fnmatchcase(value, pattern.replace("[", "[[]"))


def _principal(element: Any, caller: str) -> bool:
    """A trust policy's ``Principal`` names the caller (no element: an identity policy's
    statement, about its own principal)."""
    if element is None:
        return True
    if element == "*":
        return True
    if not isinstance(element, Mapping):
        raise _NotUnderstood("Principal")
    names = _strings(element.get("AWS", []))
    account = _account_of(caller)
    for name in names:
        if name in ("*", caller):
            return True
        if account and name in (account, f"arn:aws:iam::{account}:root"):
            return True
        if name == _role_of(caller):
            return True
    return False


def _account_of(arn: str) -> str:
    parts = arn.split(":")
    return parts[4] if len(parts) > 5 and _ACCOUNT.match(parts[4]) else ""


def _role_of(caller: str) -> str:
    """The role ARN of an assumed-role session's ARN (``...:assumed-role/ROLE/SESSION``)."""
    match = re.fullmatch(r"arn:([\w-]+):sts::(\d{12}):assumed-role/(.+)/[^/]+", caller)
    return f"arn:{match[1]}:iam::{match[2]}:role/{match[3]}" if match else ""


def _conditions(block: Any, context: Mapping[str, tuple[str, ...]]) -> bool:
    """Every condition holds (conditions are ANDed; a key's values are ORed)."""
    if not isinstance(block, Mapping):
        raise _NotUnderstood("Condition")
    for operator, conditions in block.items():
        if not isinstance(conditions, Mapping):
            raise _NotUnderstood(f"Condition {operator}")
        for key, expected in conditions.items():
            if not _condition(str(operator), _strings(expected), context.get(str(key))):
                return False
    return True


def _condition(operator: str, expected: Sequence[str], actual: tuple[str, ...] | None) -> bool:
    set_form, _, name = operator.rpartition(":")
    if_exists = name.endswith("IfExists")
    name = name.removesuffix("IfExists")
    if name not in _OPERATORS or set_form not in ("", "ForAllValues", "ForAnyValue"):
        raise _NotUnderstood(operator)
    if name == "Null":
        return (not actual) == (expected == ["true"])
    negated = name.startswith("StringNot")
    like = name.endswith("Like")
    if not actual:
        # an absent key matches no value: a negated operator holds, and so do IfExists and
        # ForAllValues (no value fails them); the others fail
        return if_exists or set_form == "ForAllValues" or (negated and not set_form)

    def one(value: str) -> bool:
        found = any(_wildcard(e, value) if like else e == value for e in expected)
        return not found if negated else found

    if set_form == "ForAllValues":
        return all(one(value) for value in actual)
    return any(one(value) for value in actual)


def _strings(value: Any) -> list[str]:
    values = value if isinstance(value, list) else [value]
    if not all(isinstance(v, str | bool | int) for v in values):
        raise _NotUnderstood(f"{value!r}")
    return [str(v).lower() if isinstance(v, bool) else str(v) for v in values]
