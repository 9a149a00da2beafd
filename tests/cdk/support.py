"""Reading IAM policies and references out of a synthesised template."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any


def references(value: Any) -> set[str]:
    """Logical ids a CloudFormation value refers to (``Ref`` and ``Fn::GetAtt``), at any depth."""
    found: set[str] = set()
    if isinstance(value, dict):
        if "Ref" in value and isinstance(value["Ref"], str):
            found.add(value["Ref"])
        if "Fn::GetAtt" in value:
            found.add(value["Fn::GetAtt"][0])
        for item in value.values():
            found |= references(item)
    elif isinstance(value, list):
        for item in value:
            found |= references(item)
    return found


def _listify(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


@dataclass(frozen=True)
class Statement:
    effect: str
    actions: frozenset[str]
    resources: tuple[Any, ...]

    @property
    def referenced(self) -> set[str]:
        return references(list(self.resources))


def statements(document: dict[str, Any]) -> Iterator[Statement]:
    for statement in document.get("Statement", []):
        yield Statement(
            effect=statement["Effect"],
            actions=frozenset(_listify(statement.get("Action", []))),
            resources=tuple(_listify(statement.get("Resource", []))),
        )


def identity_statements(template: dict[str, Any]) -> Iterator[tuple[str, Statement]]:
    """Every statement of every identity-based policy: (policy or role logical id, statement)."""
    for logical_id, resource in template["Resources"].items():
        properties = resource.get("Properties", {})
        if resource["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
            for statement in statements(properties["PolicyDocument"]):
                yield logical_id, statement
        if resource["Type"] == "AWS::IAM::Role":
            for policy in properties.get("Policies", []):
                for statement in statements(policy["PolicyDocument"]):
                    yield logical_id, statement


def role_statements(template: dict[str, Any], role: str) -> list[Statement]:
    """The statements of the policies attached to role ``role`` (a logical id)."""
    found: list[Statement] = []
    for resource in template["Resources"].values():
        if resource["Type"] != "AWS::IAM::Policy":
            continue
        if {"Ref": role} in resource["Properties"].get("Roles", []):
            found.extend(statements(resource["Properties"]["PolicyDocument"]))
    return found


def granted(template: dict[str, Any], role: str, action: str) -> set[str]:
    """Logical ids of the resources ``role`` may perform ``action`` on."""
    return {
        logical_id
        for statement in role_statements(template, role)
        if statement.effect == "Allow" and action in statement.actions
        for logical_id in statement.referenced
    }


def literal_tail(value: Any) -> str:
    """The literal end of a string that may be an ``Fn::Join`` (``s3://<bucket>/a/b/`` -> ``/a/b/``)."""
    if isinstance(value, str):
        return value
    parts = value["Fn::Join"][1]
    return literal_tail(parts[-1])
