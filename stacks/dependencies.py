"""Explicit dependencies a template does not need.

CDK makes a Lambda function (and a Glue job) ``DependsOn`` its role as well as the role's
policy; the role is already referenced by ``Fn::GetAtt`` in the ``Role`` property, so the
explicit entry only repeats it (cfn-lint W3005). Dropping it changes no deployment order.
"""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import jsii


@jsii.implements(cdk.IStableListProducer)
class _RemainingDependencies:
    def __init__(self, resource: cdk.CfnResource, referenced: cdk.CfnResource) -> None:
        self._resource = resource
        self._referenced = referenced.node.path

    def produce(self) -> list[str] | None:
        stack = cdk.Stack.of(self._resource)
        remaining = sorted(
            stack.resolve(stack.get_logical_id(dependency))
            for dependency in self._resource.obtain_dependencies()
            if isinstance(dependency, cdk.CfnElement) and dependency.node.path != self._referenced
        )
        return remaining or None


def drop_referenced_dependency(resource: Any, referenced: Any) -> None:
    """Removes ``referenced`` (a construct whose resource ``resource`` already references) from
    ``resource``'s ``DependsOn``, keeping every other dependency however it was added."""
    cfn = resource if isinstance(resource, cdk.CfnResource) else resource.node.default_child
    target = referenced if isinstance(referenced, cdk.CfnResource) else referenced.node.default_child
    if not isinstance(cfn, cdk.CfnResource) or not isinstance(target, cdk.CfnResource):
        raise TypeError("drop_referenced_dependency takes CloudFormation resources (or their L2 constructs)")
    cfn.add_override("DependsOn", cdk.Lazy.list(_RemainingDependencies(cfn, target), omit_empty=True))
