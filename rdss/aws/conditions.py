"""The DynamoDB request idioms every table's store shares: conditional writes and paged reads.

The stores (sequences, checkpoints) guard each write with a condition that says what the writer
last saw; a failed condition is an answer ("someone else got there first"), not an error.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from botocore.exceptions import ClientError

from rdss.aws.failures import aws_code

#: The error code of a single write whose ConditionExpression did not hold.
CONDITION_FAILED = "ConditionalCheckFailedException"


def conditional(call: Callable[..., dict[str, Any]], **request: Any) -> dict[str, Any] | None:
    """``call(**request)`` (``put_item`` or ``update_item``): its response, or None when the
    request's condition did not hold. Any other failure is raised."""
    try:
        return call(**request)
    except ClientError as error:
        if aws_code(error) == CONDITION_FAILED:
            return None
        raise


def equal(attribute: str, value: str, *, clause: str) -> dict[str, Any]:
    """A request's ``clause`` (a query's ``KeyConditionExpression``, a scan's ``FilterExpression``)
    saying that one string attribute equals ``value``. The attribute is named through
    ExpressionAttributeNames because it may be a reserved word (``status``)."""
    return {
        clause: "#a = :v",
        "ExpressionAttributeNames": {"#a": attribute},
        "ExpressionAttributeValues": {":v": {"S": value}},
    }


def items(call: Callable[..., dict[str, Any]], **request: Any) -> Iterator[dict[str, Any]]:
    """Every item a ``query`` or ``scan`` finds, reading page after page."""
    while True:
        response = call(**request)
        yield from response.get("Items", [])
        last = response.get("LastEvaluatedKey")
        if not last:
            return
        request = {**request, "ExclusiveStartKey": last}
