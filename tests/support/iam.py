"""Which AWS calls a client makes, and whether an identity policy allows each of them.

An endpoint need not evaluate IAM (LocalStack's community edition does not; the embedded
emulator does, rdss.local.authorise), so tests that want to know whether a role is *enough* for
what a component does record the component's calls (botocore's ``before-call`` event) and
evaluate them here against the role's statements: the action, the resource (streams and tables
by ARN), and the conditions the vendor policies use (``dynamodb:LeadingKeys``). Deliberately
small: it knows the shapes of the calls the gateway makes, and says so when it meets another.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Call:
    action: str  # "kinesis:PutRecords"
    resource: str | None  # an ARN; None when the request names none (GetRecords: an iterator)
    leading_keys: tuple[str, ...] = ()


class CallRecorder:
    """Records every call the clients it is attached to make."""

    def __init__(self, account: str, region: str) -> None:
        self.account = account
        self.region = region
        self.calls: list[Call] = []

    def attach(self, client: Any) -> None:
        client.meta.events.register("before-call.*.*", self._record)

    def _record(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        service = model.service_model.endpoint_prefix
        body = params.get("body") or {}
        if isinstance(body, (bytes, str)):
            body = json.loads(body or "{}")
        action = f"{service}:{model.name}"
        if service == "kinesis":
            stream = body.get("StreamName") or (body.get("StreamARN") or "").rsplit("/", 1)[-1] or None
            arn = f"arn:aws:kinesis:{self.region}:{self.account}:stream/{stream}" if stream else None
            self.calls.append(Call(action, arn))
        elif service == "dynamodb":
            for table, operation, keys in _dynamodb_requests(model.name, body):
                arn = f"arn:aws:dynamodb:{self.region}:{self.account}:table/{table}"
                self.calls.append(Call(f"dynamodb:{operation}", arn, keys))
        else:
            raise AssertionError(f"unexpected call {action}")


#: IAM authorises each item of a transaction as the single-item action it is.
_TRANSACT = {"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem", "ConditionCheck": "ConditionCheckItem"}


def _dynamodb_requests(operation: str, body: dict[str, Any]) -> list[tuple[str, str, tuple[str, ...]]]:
    """(table, action, partition-key values) of each request in a DynamoDB call."""
    if operation == "PutItem":
        return [(body["TableName"], operation, (_first(body["Item"]),))]
    if operation in ("GetItem", "UpdateItem", "DeleteItem"):
        return [(body["TableName"], operation, (_first(body["Key"]),))]
    if operation == "Query":
        values = [v["S"] for v in body.get("ExpressionAttributeValues", {}).values() if "S" in v]
        return [(body["TableName"], operation, tuple(values[:1]))]
    if operation == "BatchGetItem":
        return [
            (table, operation, tuple(_first(key) for key in request["Keys"]))
            for table, request in body["RequestItems"].items()
        ]
    if operation == "BatchWriteItem":
        return [
            (
                table,
                operation,
                tuple(_first(r.get("PutRequest", {}).get("Item") or r["DeleteRequest"]["Key"]) for r in requests),
            )
            for table, requests in body["RequestItems"].items()
        ]
    if operation == "TransactWriteItems":
        found = []
        for entry in body["TransactItems"]:
            kind, details = next(iter(entry.items()))
            found.append((details["TableName"], _TRANSACT[kind], (_first(details.get("Item") or details["Key"]),)))
        return found
    raise AssertionError(f"unexpected DynamoDB call {operation}")


def _first(item: dict[str, Any]) -> str:
    for name in ("lease", "messageId", "sequence"):
        if name in item:
            return str(next(iter(item[name].values())))
    raise AssertionError(f"no known partition key in {sorted(item)}")


def allowed(statements: list[dict[str, Any]], call: Call) -> bool:
    """Whether some Allow statement (the policies have no Deny) covers ``call``."""
    return any(_covers(statement, call) for statement in statements)


def _covers(statement: dict[str, Any], call: Call) -> bool:
    actions = _list(statement["Action"])
    if statement["Effect"] != "Allow" or call.action not in actions:
        return False
    resources = _list(statement["Resource"])
    if call.resource is not None and call.resource not in resources:
        return False
    for operator, conditions in statement.get("Condition", {}).items():
        for key, expected in conditions.items():
            if key == "dynamodb:LeadingKeys":
                if operator == "Null":
                    if (expected == "false") != bool(call.leading_keys):
                        return False
                elif operator == "ForAllValues:StringEquals":
                    if not set(call.leading_keys) <= set(_list(expected)):
                        return False
                else:
                    raise AssertionError(f"condition {operator} {key} not understood")
            elif key.startswith("kms:"):
                raise AssertionError(f"a {call.action} call cannot be checked against {key}")
            else:
                raise AssertionError(f"condition {operator} {key} not understood")
    return True


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]
