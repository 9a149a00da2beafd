"""The emulator authorises what a vendor's credentials may do, as AWS would: in front of moto's
server (and its journal), :class:`Authoriser` answers AccessDenied to a request its caller's
role does not allow, so a vendor's mistake - a produces-only vendor reading ``metadata``, a
consumes-only vendor putting on ``input``, a wrong external ID - shows locally on the first day,
not on the deployment.

* A request signed with the credentials of a role assumed in the emulator (a vendor's gateway,
  ``role=`` in its URL) is allowed only what that role's policies allow (inline and attached
  managed policies, :mod:`rdss.local.iam`): the action with its resource - a stream by its name,
  ARN or shard iterator; a table, with ``dynamodb:LeadingKeys`` from the items' partition keys
  (each item of a transaction as the single-item action it is); a bucket and key - and the
  condition keys the request carries. ``sts:GetCallerIdentity`` is always allowed, as in AWS.
* AssumeRole is allowed only on a role that exists, to a caller its trust policy names, with
  the ``sts:ExternalId`` it requires (moto assumes any role, existing or not).
* Every other request passes untouched: the runtime's own credentials (its processors,
  provisioning, the operator's commands) are the account's, as the deployment's own roles are.

Why not moto's own access control (``INITIAL_NO_AUTH_ACTION_COUNT``, ``/moto-api/reset-auth``):
it is one switch for the whole process, so the runtime's credentials would need users and
policies of their own; it authorises Kinesis and DynamoDB requests against the resource ``*``
only, so a policy naming a stream or table allows nothing; it knows no condition key a request
carries (``dynamodb:LeadingKeys``) and answers those services' refusals in a form boto3 does not
read as AccessDeniedException; and in a trust policy the account's root does not admit the
account's callers. It does check a trust policy's ``sts:ExternalId`` and S3's buckets and keys.

Not checked here: request signatures and session expiry (the point is a vendor's mistakes, not
an attacker; a gateway renews its session before it expires), resource-based policies (the
deployment has none a vendor relies on), and KMS's ``kms:ViaService`` grants (local streams are
not encrypted, so Kinesis makes no KMS call on a vendor's behalf: a vendor's direct KMS call is
refused, as in AWS).
"""

from __future__ import annotations

import logging
import re
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import orjson

from rdss.local import iam, limits
from rdss.local.durable import action as action_of
from rdss.local.durable import read_body

_log = logging.getLogger(__name__)

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

_CREDENTIAL = re.compile(r"Credential=([^/,\s]+)/\d{8}/([^/]+)/([^/]+)/aws4_request")
#: Access keys known not to be a session's (the runtime's own): bounded, cleared when full.
_MAX_KNOWN_OTHERS = 4096
#: IAM authorises each item of a transaction as the single-item action it is.
_TRANSACT = {"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem", "ConditionCheck": "ConditionCheckItem"}
_ITEM_ACTIONS = frozenset({"GetItem", "PutItem", "UpdateItem", "DeleteItem"})
_DENIED = ("x-amzn-ErrorType", "AccessDeniedException")


@dataclass(frozen=True)
class Session:
    """A role's credentials, assumed in the emulator."""

    account: str
    role_arn: str
    #: ``arn:aws:sts::ACCOUNT:assumed-role/ROLE/SESSION``: who the caller is.
    arn: str


class Authoriser:
    """moto's WSGI app (with its journal), behind the authorisation of the vendors' requests."""

    def __init__(self, app: WSGIApp) -> None:
        self.app = app
        self._sessions: dict[str, Session] = {}
        self._others: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        scope = _scope(environ)
        if scope is None:
            return self.app(environ, start_response)
        key, region, service = scope
        session = self.session(key)
        if session is None and service != "sts":
            return self.app(environ, start_response)
        if limits.too_large(environ) is not None:  # refused by the journal's app, unread
            return self.app(environ, start_response)
        body = read_body(environ)
        if body is None:  # a chunked body over the bound: refused as the journal's app would
            status, headers, content = limits.body_too_large(environ, None)
            start_response(status, headers)
            return [content]
        operation = action_of(environ, body) or ""
        refusal = None
        if service == "sts" and operation == "AssumeRole":
            refusal = _trust(environ, body, session, key)
        if refusal is None and session is not None:
            refusal = _identity(session, service, operation, environ, body, region)
        if refusal is None:
            return self.app(environ, start_response)
        _log.info("refused: %s", refusal)
        return _refuse(environ, start_response, service, refusal)

    def session(self, key: str) -> Session | None:
        """The assumed role whose credentials ``key`` is, if it is one."""
        found = self._sessions.get(key)
        if found is not None or key in self._others:
            return found
        found = _assumed(key)
        with self._lock:
            if found is not None:
                self._sessions[key] = found
            else:
                if len(self._others) >= _MAX_KNOWN_OTHERS:
                    self._others.clear()
                self._others.add(key)
        return found


def _scope(environ: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """(access key, region, service) of a SigV4-signed request, from its Authorization header
    or a presigned URL's ``X-Amz-Credential``; None when unsigned."""
    header = str(environ.get("HTTP_AUTHORIZATION", ""))
    start = header.find("Credential=")
    if start >= 0:  # every request of every client: string operations, no regular expression
        end = header.find(",", start)
        scope = header[start + len("Credential=") : end if end >= 0 else None].strip().split("/")
        return (scope[0], scope[2], scope[3]) if len(scope) == 5 and scope[4] == "aws4_request" else None
    if "X-Amz-Credential" not in str(environ.get("QUERY_STRING", "")):
        return None
    credential = parse_qs(str(environ.get("QUERY_STRING", ""))).get("X-Amz-Credential")
    found = _CREDENTIAL.search(f"Credential={unquote(credential[0])}") if credential else None
    return (found[1], found[2], found[3]) if found else None


def _assumed(key: str) -> Session | None:
    from moto.sts.models import sts_backends

    for account in list(sts_backends.keys()):
        for backend in list(sts_backends[account].values()):
            for role in list(backend.assumed_roles):
                if role.access_key_id == key:
                    return Session(role.account_id, role.role_arn, role.arn)
    return None


def _role(arn: str) -> Any:
    """moto's role of that ARN, or None."""
    from moto.iam.models import iam_backends

    match = re.fullmatch(r"arn:([\w-]+):iam::(\d{12}):role/(?:.*/)?([\w+=,.@-]+)", arn)
    if match is None:
        return None
    try:
        roles = iam_backends[match[2]][match[1]].get_roles()
    except KeyError:
        return None
    return next((role for role in roles if role.arn == arn), None)


def _policies(role: Any) -> list[dict[str, Any]]:
    """The statements of every identity policy of ``role``: inline and attached managed."""
    found: list[dict[str, Any]] = []
    documents = list(dict(role.policies).values())
    for policy in list(dict(role.managed_policies).values()):
        documents += [v.document for v in list(policy.versions) if v.is_default]
    for document in documents:
        try:
            found += iam.statements(document)
        except ValueError:  # a document not understood allows nothing, and denies
            found.append({"Effect": "Deny", "Action": "*", "Resource": "*"})
    return found


def _trust(environ: Mapping[str, Any], body: bytes, session: Session | None, key: str) -> str | None:
    """Why AssumeRole is refused (None: allowed): the role is not there, or its trust policy
    does not admit the caller with what it presents."""
    from moto.iam.models import get_account_id_from

    params = _form(environ, body)
    role_arn = params.get("RoleArn", "")
    caller = session.arn if session is not None else f"arn:aws:iam::{get_account_id_from(key)}:root"
    request = iam.Request(
        caller,
        "sts:AssumeRole",
        role_arn,
        {
            name: (params[parameter],)
            for name, parameter in (("sts:ExternalId", "ExternalId"), ("sts:RoleSessionName", "RoleSessionName"))
            if params.get(parameter)
        },
    )
    role = _role(role_arn)
    trusted = role is not None and iam.decide(iam.statements(role.assume_role_policy_document), request).allowed
    if trusted:
        return None
    return f"User: {caller} is not authorized to perform: sts:AssumeRole on resource: {role_arn}"


def _identity(
    session: Session, service: str, operation: str, environ: Mapping[str, Any], body: bytes, region: str
) -> str | None:
    """Why the session's role may not make this request (None: it may)."""
    if f"{service}:{operation}" == "sts:GetCallerIdentity":
        return None
    role = _role(session.role_arn)
    policy = _policies(role) if role is not None else []
    for action, resource, context in _requests(service, operation, environ, body, session.account, region):
        request = iam.Request(session.arn, action, resource, context)
        decision = iam.decide(policy, request)
        if not decision.allowed:
            return decision.explain(request)
    return None


Described = tuple[str, str, dict[str, tuple[str, ...]]]


def _requests(
    service: str, operation: str, environ: Mapping[str, Any], body: bytes, account: str, region: str
) -> list[Described]:
    """(action, resource, condition keys) of every authorisation one request needs."""
    if service == "s3":
        return [_s3(environ)]
    if environ.get("HTTP_X_AMZ_TARGET"):
        try:
            params = orjson.loads(body or b"{}")
        except orjson.JSONDecodeError:
            params = None
        if not isinstance(params, dict):  # nothing to tell the resource by: any Allow must cover all
            return [(f"{service}:{operation}", "*", {})]
    else:
        params = _form(environ, body)
    if service == "kinesis":
        return [(f"kinesis:{operation}", _stream(params, account, region), {})]
    if service == "dynamodb":
        return _dynamodb(operation, params, account, region)
    if service == "kms":
        return [(f"kms:{operation}", _key(params, account, region), {})]
    if service == "sts" and isinstance(params.get("RoleArn"), str):
        return [(f"sts:{operation}", params["RoleArn"], {})]
    return [(f"{service}:{operation}", "*", {})]


def _form(environ: Mapping[str, Any], body: bytes) -> dict[str, str]:
    """A query-protocol request's parameters (query string and form body)."""
    params = {k: v[0] for k, v in parse_qs(str(environ.get("QUERY_STRING", ""))).items()}
    if "x-www-form-urlencoded" in str(environ.get("CONTENT_TYPE", "")):
        params.update({k: v[0] for k, v in parse_qs(body.decode("utf-8", "replace")).items()})
    return params


def _stream(params: Mapping[str, Any], account: str, region: str) -> str:
    """The stream a Kinesis request names: by ARN, name or shard iterator; ``*`` for none."""
    if isinstance(params.get("StreamARN"), str):
        return str(params["StreamARN"])
    name = params.get("StreamName")
    if not isinstance(name, str) and isinstance(params.get("ShardIterator"), str):
        name = _iterator_stream(params["ShardIterator"])
    return f"arn:aws:kinesis:{region}:{account}:stream/{name}" if isinstance(name, str) and name else "*"


def _iterator_stream(iterator: str) -> str | None:
    """The stream of one of moto's shard iterators (``stream:shard:sequence``, encoded)."""
    from moto.kinesis.utils import decompose_shard_iterator

    try:
        return decompose_shard_iterator(iterator)[0] or None
    except Exception:  # not one of moto's: moto refuses it itself
        return None


def _dynamodb(operation: str, params: Mapping[str, Any], account: str, region: str) -> list[Described]:
    def table(name: Any) -> tuple[str, str]:
        name = str(name or "")
        if name.startswith("arn:"):
            return name, name.rsplit("/", 1)[-1]
        return f"arn:aws:dynamodb:{region}:{account}:table/{name}", name

    def keyed(action: str, name: Any, items: list[Any]) -> Described:
        arn, short = table(name)
        hash_key = _hash_key(account, region, short)
        values = [_key_value(item, hash_key) for item in items]
        known = tuple(v for v in values if v is not None)
        context = {"dynamodb:LeadingKeys": known} if known and len(known) == len(values) else {}
        return (f"dynamodb:{action}", arn, context)

    if operation in _ITEM_ACTIONS:
        return [keyed(operation, params.get("TableName"), [params.get("Item") or params.get("Key")])]
    if operation == "Query":
        arn, short = table(params.get("TableName"))
        value = _queried(params, _hash_key(account, region, short))
        return [("dynamodb:Query", arn, {"dynamodb:LeadingKeys": (value,)} if value is not None else {})]
    if operation in ("BatchGetItem", "BatchWriteItem"):
        found: list[Described] = []
        for name, request in dict(params.get("RequestItems") or {}).items():
            if operation == "BatchGetItem":
                items = list((request or {}).get("Keys") or [])
            else:
                items = [_written(r) for r in request or []]
            found.append(keyed(operation, name, items))
        return found or [(f"dynamodb:{operation}", "*", {})]
    if operation in ("TransactWriteItems", "TransactGetItems"):
        found = []
        for entry in list(params.get("TransactItems") or []):
            kind, details = next(iter(dict(entry).items()), ("", {}))
            single = "GetItem" if operation == "TransactGetItems" else _TRANSACT.get(kind, kind)
            details = dict(details or {})
            found.append(keyed(single, details.get("TableName"), [details.get("Item") or details.get("Key")]))
        return found or [(f"dynamodb:{operation}", "*", {})]
    if "TableName" in params:
        return [(f"dynamodb:{operation}", table(params["TableName"])[0], {})]
    return [(f"dynamodb:{operation}", "*", {})]


def _written(request: Any) -> Any:
    """The item (or key) of one request of a BatchWriteItem."""
    if not isinstance(request, Mapping):
        return None
    return (request.get("PutRequest") or {}).get("Item") or (request.get("DeleteRequest") or {}).get("Key")


def _hash_key(account: str, region: str, table: str) -> str | None:
    from moto.dynamodb.models import dynamodb_backends

    try:
        found = dynamodb_backends[account][region].tables.get(table)
    except KeyError:
        return None
    return str(found.hash_key_attr) if found is not None else None


def _key_value(item: Any, hash_key: str | None) -> str | None:
    """The partition key's value of an item or key, as IAM compares it (its text)."""
    if not isinstance(item, Mapping):
        return None
    if hash_key is None:  # the table is unknown: a key of one attribute is its partition key
        if len(item) != 1:
            return None
        hash_key = next(iter(item))
    return _scalar(item.get(hash_key))


def _scalar(value: Any) -> str | None:
    if isinstance(value, Mapping) and len(value) == 1:
        kind, text = next(iter(value.items()))
        if kind in ("S", "N", "B") and isinstance(text, str):
            return text
    return None


def _queried(params: Mapping[str, Any], hash_key: str | None) -> str | None:
    """The partition key value a Query names (its KeyConditionExpression or KeyConditions)."""
    if hash_key is None:
        return None
    legacy = (params.get("KeyConditions") or {}).get(hash_key)
    if isinstance(legacy, Mapping) and legacy.get("ComparisonOperator") == "EQ":
        values = legacy.get("AttributeValueList") or []
        return _scalar(values[0]) if len(values) == 1 else None
    expression = params.get("KeyConditionExpression")
    if not isinstance(expression, str):
        return None
    names = dict(params.get("ExpressionAttributeNames") or {})
    values = dict(params.get("ExpressionAttributeValues") or {})
    for left, right in re.findall(r"([#:]?[\w.]+)\s*=\s*([#:]?[\w.]+)", expression):
        name, placeholder = (left, right) if right.startswith(":") else (right, left)
        if placeholder.startswith(":") and names.get(name, name) == hash_key:
            return _scalar(values.get(placeholder))
    return None


def _key(params: Mapping[str, Any], account: str, region: str) -> str:
    key = params.get("KeyId")
    if not isinstance(key, str) or not key:
        return "*"
    if key.startswith("arn:"):
        return key
    kind = "alias" if key.startswith("alias/") else "key"
    return f"arn:aws:kms:{region}:{account}:{kind}/{key.removeprefix('alias/')}"


def _s3(environ: Mapping[str, Any]) -> Described:
    """S3's action and resource, from the method and a path-style path (an approximation: the
    sub-resources - ``?acl``, ``?tagging`` - are not told apart; none is allowed to a vendor)."""
    method = str(environ.get("REQUEST_METHOD", "GET"))
    bucket, _, key = unquote(urlsplit(str(environ.get("PATH_INFO", "/"))).path).lstrip("/").partition("/")
    if not bucket:
        return ("s3:ListAllMyBuckets", "*", {})
    if key:
        action = {"GET": "GetObject", "HEAD": "GetObject", "PUT": "PutObject", "DELETE": "DeleteObject"}.get(
            method, "PutObject"
        )
        return (f"s3:{action}", f"arn:aws:s3:::{bucket}/{key}", {})
    action = {"GET": "ListBucket", "HEAD": "ListBucket", "PUT": "CreateBucket", "DELETE": "DeleteBucket"}.get(
        method,
        "DeleteObject",  # POST ?delete: deleting objects
    )
    return (f"s3:{action}", f"arn:aws:s3:::{bucket}" + ("/*" if action == "DeleteObject" else ""), {})


def _refuse(environ: Mapping[str, Any], start_response: Callable[..., Any], service: str, message: str) -> list[bytes]:
    """AccessDenied in the form the service's protocol answers it, so boto3 raises it as such."""
    request_id = str(uuid.uuid4())
    if environ.get("HTTP_X_AMZ_TARGET"):  # the JSON protocols (Kinesis, DynamoDB, KMS...)
        body = orjson.dumps({"__type": "AccessDeniedException", "message": message})
        content_type = str(environ.get("CONTENT_TYPE") or "application/x-amz-json-1.1")
        status, headers = "400 Bad Request", [("Content-Type", content_type), _DENIED]
    elif service == "s3":
        body = (
            '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code>'
            f"<Message>{_xml(message)}</Message><RequestId>{request_id}</RequestId></Error>"
        ).encode()
        status, headers = "403 Forbidden", [("Content-Type", "application/xml")]
    elif "x-www-form-urlencoded" in str(environ.get("CONTENT_TYPE", "")) or "Action=" in str(
        environ.get("QUERY_STRING", "")
    ):  # the query protocol (STS, IAM, CloudFormation)
        body = (
            f"<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied</Code><Message>{_xml(message)}</Message>"
            f"</Error><RequestId>{request_id}</RequestId></ErrorResponse>"
        ).encode()
        status, headers = "403 Forbidden", [("Content-Type", "text/xml")]
    else:  # REST with JSON
        body = orjson.dumps({"message": message})
        status, headers = "403 Forbidden", [("Content-Type", "application/json"), _DENIED]
    start_response(status, [*headers, ("x-amzn-RequestId", request_id), ("Content-Length", str(len(body)))])
    return [body]


def _xml(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
