"""The service limits the emulator enforces before a request reaches moto (or the journal).

moto takes some requests AWS refuses (a Kinesis record over 1 MiB through PutRecord, a partition
key of 300 characters), and any request's bytes were journalled before moto saw them - a 100 MB
garbage body too. Here each request is checked first, and one AWS would refuse is answered as AWS
answers it (the same HTTP status, error code and message, so boto3 raises what it raises against
AWS), and neither applied nor journalled:

* every request: its body at most :data:`MAX_BODY` bytes (the emulator's own bound: AWS's are per
  service and smaller, except S3's 5 GiB single PUT, which boto3 sends in parts above 8 MiB);
  a JSON-protocol request whose body is not a JSON object is a ``SerializationException``;
* Kinesis PutRecord and PutRecords: data at most 1 MiB, data and partition key together at most
  1 MiB, a partition key of 1 to 256 characters; PutRecords 1 to 500 records and at most 5 MiB
  with the partition keys;
* Firehose PutRecord and PutRecordBatch: a record at most 1,000 KiB; PutRecordBatch 1 to 500
  records and at most 4 MiB (:func:`firehose_batch` serves the runtime's local delivery streams
  too);
* DynamoDB PutItem, BatchWriteItem and TransactWriteItems: an item at most 400 KB, counted as
  DynamoDB counts (:func:`item_size`). UpdateItem's result depends on the stored item: moto
  refuses it as DynamoDB does, and that refusal is journalled like any answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

import orjson

#: The largest request body the emulator reads.
MAX_BODY = 64 * 1024 * 1024
KINESIS_RECORD = 1024 * 1024
KINESIS_RECORDS = 500
KINESIS_REQUEST = 5 * 1024 * 1024
PARTITION_KEY = 256
FIREHOSE_RECORD = 1000 * 1024
FIREHOSE_RECORDS = 500
FIREHOSE_REQUEST = 4 * 1024 * 1024
DYNAMODB_ITEM = 400 * 1024

Answer = tuple[str, list[tuple[str, str]], bytes]


class Refusal(Exception):
    """A request AWS refuses: its error code, message and HTTP status."""

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code, self.message, self.status = code, message, status


def too_large(environ: Mapping[str, Any]) -> Answer | None:
    """The answer to a request whose declared body is over :data:`MAX_BODY` (before reading it)."""
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return None
    return body_too_large(environ, length) if length > MAX_BODY else None


def body_too_large(environ: Mapping[str, Any], length: int | None) -> Answer:
    said = f"{length:,} bytes" if length is not None else "more bytes"
    message = f"the request body of {said} is over the {MAX_BODY:,} bytes the local emulator takes"
    if environ.get("HTTP_X_AMZ_TARGET"):
        return _json(Refusal("RequestEntityTooLarge", message, 413))
    if _query_protocol(environ):
        return _query_xml(Refusal("RequestEntityTooLarge", message, 413))
    # S3, the REST service that takes large bodies: as it answers an upload over its limit
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>EntityTooLarge</Code>'
        "<Message>Your proposed upload exceeds the maximum allowed size</Message>"
        f"<ProposedSize>{length or ''}</ProposedSize><MaxSizeAllowed>{MAX_BODY}</MaxSizeAllowed></Error>"
    )
    return "400 Bad Request", [("Content-Type", "application/xml")], body.encode()


def refusal(environ: Mapping[str, Any], body: bytes) -> Answer | None:
    """The answer AWS gives a request over a limit (None: within every limit)."""
    target = str(environ.get("HTTP_X_AMZ_TARGET") or "")
    if not target or "json" not in str(environ.get("CONTENT_TYPE", "")):
        return None
    service, _, operation = target.rpartition(".")
    try:
        request = orjson.loads(body) if body else {}
        if not isinstance(request, dict):
            raise Refusal("SerializationException", "the request body is not a JSON object")
        check = _CHECKS.get((service.split("_", 1)[0], operation))
        if check is not None:
            check(request)
    except orjson.JSONDecodeError:
        return _json(Refusal("SerializationException", "the request body is not JSON"))
    except Refusal as refused:
        return _json(refused)
    return None


# -- Kinesis ---------------------------------------------------------------------------------------
def _kinesis_put_record(request: dict[str, Any]) -> None:
    _validation(_kinesis_record(request, ""))  # the API's constraints on each member, all at once
    if _record_size(request) > KINESIS_RECORD:  # then the record size the service checks
        _validation([f"Value at 'data' failed to satisfy constraint: {_at_most(KINESIS_RECORD)}"])


def _kinesis_put_records(request: dict[str, Any]) -> None:
    records = request.get("Records")
    if not isinstance(records, list):
        return  # moto answers what is missing or malformed
    errors = _member_count(len(records), KINESIS_RECORDS)
    entries = [(position, r) for position, r in enumerate(records[:KINESIS_RECORDS], 1) if isinstance(r, dict)]
    for position, record in entries:
        errors += _kinesis_record(record, f"records.{position}.member.")
    _validation(errors)
    limit = _at_most(KINESIS_RECORD)
    _validation(
        [
            f"Value at 'records.{position}.member.data' failed to satisfy constraint: {limit}"
            for position, record in entries
            if _record_size(record) > KINESIS_RECORD
        ]
    )
    if sum(_record_size(record) for _, record in entries) > KINESIS_REQUEST:
        raise Refusal("InvalidArgumentException", "Records size exceeds 5 MB limit")


def _member_count(count: int, most: int) -> list[str]:
    """The API's constraint on the ``records`` of a batch put (Kinesis' and Firehose's alike):
    from one to ``most``."""
    if count > most:
        return [f"Value at 'records' failed to satisfy constraint: {_at_most(most)}"]
    if not count:
        return [f"Value at 'records' failed to satisfy constraint: {_AT_LEAST_ONE}"]
    return []


def _record_size(record: Mapping[str, Any]) -> int:
    """Data and partition key together, as the record size limit counts them."""
    return _blob_size(record.get("Data")) + _utf8(record.get("PartitionKey"))


def _kinesis_record(record: Mapping[str, Any], prefix: str) -> list[str]:
    errors = []
    if _blob_size(record.get("Data")) > KINESIS_RECORD:
        errors.append(f"Value at '{prefix}data' failed to satisfy constraint: {_at_most(KINESIS_RECORD)}")
    key = record.get("PartitionKey")
    if isinstance(key, str):
        where = f"'{prefix}partitionKey'"
        if len(key) > PARTITION_KEY:
            errors.append(f"Value '{key}' at {where} failed to satisfy constraint: {_at_most(PARTITION_KEY)}")
        elif not key:
            errors.append(f"Value '' at {where} failed to satisfy constraint: {_AT_LEAST_ONE}")
    return errors


# -- Firehose --------------------------------------------------------------------------------------
def firehose_batch(sizes: Sequence[int]) -> None:
    """Check a PutRecordBatch of records of ``sizes`` bytes (decoded).

    Raises:
        Refusal: as Firehose refuses it.
    """
    errors = _member_count(len(sizes), FIREHOSE_RECORDS)
    for position, size in enumerate(sizes[:FIREHOSE_RECORDS], 1):
        if size > FIREHOSE_RECORD:
            errors.append(
                f"Value at 'records.{position}.member.data' failed to satisfy constraint: {_at_most(FIREHOSE_RECORD)}"
            )
    _validation(errors)
    if sum(sizes) > FIREHOSE_REQUEST:
        raise Refusal("InvalidArgumentException", "Records size exceeds 4 MB limit")


def _firehose_put_record_batch(request: dict[str, Any]) -> None:
    records = request.get("Records")
    if isinstance(records, list):
        firehose_batch([_blob_size(r.get("Data")) if isinstance(r, dict) else 0 for r in records])


def _firehose_put_record(request: dict[str, Any]) -> None:
    record = request.get("Record")
    if isinstance(record, dict) and _blob_size(record.get("Data")) > FIREHOSE_RECORD:
        _validation([f"Value at 'record.data' failed to satisfy constraint: {_at_most(FIREHOSE_RECORD)}"])


# -- DynamoDB --------------------------------------------------------------------------------------
def item_size(item: Mapping[str, Any]) -> int:
    """An item's size as DynamoDB counts it: each attribute's name (UTF-8) and value."""
    return sum(_utf8(name) + _value_size(value) for name, value in item.items())


def _value_size(value: Any) -> int:
    if not isinstance(value, dict) or len(value) != 1:
        return 0
    kind, content = next(iter(value.items()))
    if kind == "S":
        return _utf8(content)
    if kind == "N":
        return _number_size(content)
    if kind == "B":
        return _blob_size(content)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS" and isinstance(content, list):
        return sum(_utf8(v) for v in content)
    if kind == "NS" and isinstance(content, list):
        return sum(_number_size(v) for v in content)
    if kind == "BS" and isinstance(content, list):
        return sum(_blob_size(v) for v in content)
    if kind == "L" and isinstance(content, list):
        return 3 + sum(1 + _value_size(v) for v in content)
    if kind == "M" and isinstance(content, dict):
        return 3 + sum(1 + _utf8(k) + _value_size(v) for k, v in content.items())
    return 0


def _number_size(text: Any) -> int:
    """About one byte per two significant digits, plus one (DynamoDB's rule)."""
    try:
        digits = Decimal(str(text)).normalize().as_tuple().digits
    except (InvalidOperation, ValueError):
        return 0
    return (len(digits) + 1) // 2 + 1


def _item_check(item: Any) -> None:
    if isinstance(item, dict) and item_size(item) > DYNAMODB_ITEM:
        raise Refusal("ValidationException", "Item size has exceeded the maximum allowed size")


def _dynamodb_put_item(request: dict[str, Any]) -> None:
    _item_check(request.get("Item"))


def _dynamodb_batch_write_item(request: dict[str, Any]) -> None:
    tables = request.get("RequestItems")
    for writes in tables.values() if isinstance(tables, dict) else ():
        for write in writes if isinstance(writes, list) else ():
            put = write.get("PutRequest") if isinstance(write, dict) else None
            if isinstance(put, dict):
                _item_check(put.get("Item"))


def _dynamodb_transact_write_items(request: dict[str, Any]) -> None:
    actions = request.get("TransactItems")
    for action in actions if isinstance(actions, list) else ():
        put = action.get("Put") if isinstance(action, dict) else None
        if isinstance(put, dict):
            _item_check(put.get("Item"))


_CHECKS = {
    ("Kinesis", "PutRecord"): _kinesis_put_record,
    ("Kinesis", "PutRecords"): _kinesis_put_records,
    ("Firehose", "PutRecordBatch"): _firehose_put_record_batch,
    ("Firehose", "PutRecord"): _firehose_put_record,
    ("DynamoDB", "PutItem"): _dynamodb_put_item,
    ("DynamoDB", "BatchWriteItem"): _dynamodb_batch_write_item,
    ("DynamoDB", "TransactWriteItems"): _dynamodb_transact_write_items,
}


# -- shared ----------------------------------------------------------------------------------------
def _at_most(limit: int) -> str:
    return f"Member must have length less than or equal to {limit}"


_AT_LEAST_ONE = "Member must have length greater than or equal to 1"


def _validation(errors: list[str]) -> None:
    """AWS's one ValidationException for every constraint a request breaks."""
    if errors:
        count = f"{len(errors)} validation error{'s' if len(errors) > 1 else ''} detected"
        raise Refusal("ValidationException", f"{count}: " + "; ".join(errors))


def _blob_size(blob: Any) -> int:
    """The decoded size of a base64 blob, from its length (nothing decoded: a PutRecords body
    holds up to 5 MiB of them); 0 when it is not a string (moto answers that)."""
    if not isinstance(blob, str):
        return 0
    return len(blob) * 3 // 4 - blob[-2:].count("=")


def _utf8(text: Any) -> int:
    return len(text.encode("utf-8", "surrogatepass")) if isinstance(text, str) else 0


def _query_protocol(environ: Mapping[str, Any]) -> bool:
    return "Action=" in str(environ.get("QUERY_STRING", "")) or "x-www-form-urlencoded" in str(
        environ.get("CONTENT_TYPE", "")
    )


def _json(refused: Refusal) -> Answer:
    status = {400: "400 Bad Request", 413: "413 Request Entity Too Large"}.get(
        refused.status, f"{refused.status} Error"
    )
    body = orjson.dumps({"__type": refused.code, "message": refused.message})
    return status, [("Content-Type", "application/x-amz-json-1.1"), ("x-amzn-ErrorType", refused.code)], body


def _query_xml(refused: Refusal) -> Answer:
    body = (
        "<ErrorResponse><Error><Type>Sender</Type>"
        f"<Code>{refused.code}</Code><Message>{refused.message}</Message></Error></ErrorResponse>"
    )
    return f"{refused.status} Request Entity Too Large", [("Content-Type", "text/xml")], body.encode()
