"""CloudFormation custom resources (``Custom::*``, ``AWS::CloudFormation::CustomResource``) for
LocalStack community, which otherwise accepts them without running anything.

Done as CloudFormation does it: the provider function named by ``ServiceToken`` is invoked
asynchronously with the custom resource request (``RequestType`` Create, Update or Delete,
``ResponseURL``, ``StackId``, ``RequestId``, ``LogicalResourceId``, ``PhysicalResourceId``,
``ResourceProperties``, ``OldResourceProperties``), and the resource's outcome is what the
function PUTs to the response URL: ``Status``, ``Reason``, ``PhysicalResourceId``, ``Data``.

The response URL: CloudFormation's is an HTTPS URL on port 443 (the CDK's provider framework
connects to its host name on 443 whatever the URL says), so the responses are received by
:class:`Responder`, an HTTPS endpoint on port 443 of a loopback address of this LocalStack's own
(``RDSS_CFN_RESPONSE_HOST``), with a certificate made for it at start; the Node runtimes trust
that certificate (``NODE_EXTRA_CA_CERTS``, :mod:`.executor`) as Lambda's trust AWS's.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import os
import ssl
import threading
import time
import uuid
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

from localstack import config
from localstack.services.cloudformation.resource_provider import (
    OperationStatus,
    ProgressEvent,
    ResourceProvider,
    ResourceRequest,
)

#: Where the model keeps the names of the provider's Data attributes.
_DATA_KEYS = "RdssCustomResourceDataKeys"
#: How long a provider function has to answer (CloudFormation's own limit is an hour).
RESPONSE_TIMEOUT_SECONDS = config.CFN_PER_RESOURCE_TIMEOUT
#: How long the end of a provider's invocation is awaited once it has responded (:func:`_await_log`).
LOG_TIMEOUT_SECONDS = 60.0


class Responder:
    """Receives custom resource responses: ``PUT https://<host>/<request id>``."""

    _instance: Responder | None = None
    _lock = threading.Lock()

    def __init__(self, host: str, certificate: Path) -> None:
        self.host = host
        self.responses: dict[str, dict[str, Any]] = {}
        self.arrived = threading.Condition()
        key_file = certificate.with_suffix(".key")
        _self_signed(host, certificate, key_file)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(certificate, key_file)
        server = ThreadingHTTPServer((host, 443), _ResponseHandler)
        server.daemon_threads = True
        server.responder = self  # type: ignore[attr-defined]
        server.socket = context.wrap_socket(server.socket, server_side=True)
        threading.Thread(target=server.serve_forever, name="cfn-custom-resource-responses", daemon=True).start()

    @classmethod
    def get(cls) -> Responder:
        with cls._lock:
            if cls._instance is None:
                host = os.environ.get("RDSS_CFN_RESPONSE_HOST", "127.0.0.1")
                certificate = Path(os.environ["RDSS_LAMBDA_EXTRA_CA_CERTS"])
                cls._instance = Responder(host, certificate)
            return cls._instance

    def url(self, request_id: str) -> str:
        return f"https://{self.host}/{request_id}"

    def deliver(self, request_id: str, response: dict[str, Any]) -> None:
        with self.arrived:
            self.responses[request_id] = response
            self.arrived.notify_all()

    def wait(self, request_id: str, timeout: float) -> dict[str, Any] | None:
        with self.arrived:
            self.arrived.wait_for(lambda: request_id in self.responses, timeout=timeout)
            return self.responses.pop(request_id, None)


class _ResponseHandler(BaseHTTPRequestHandler):
    server: ThreadingHTTPServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass

    def do_PUT(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        try:
            response = json.loads(self.rfile.read(length))
        except ValueError:
            self.send_response(HTTPStatus.BAD_REQUEST)
            self.end_headers()
            return
        request_id = self.path.strip("/").split("?", 1)[0]
        self.server.responder.deliver(request_id, response)  # type: ignore[attr-defined]
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Length", "0")
        self.end_headers()


def _self_signed(host: str, certificate: Path, key_file: Path) -> None:
    """A certificate for ``host`` (an IP address), signed by its own key."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(host))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    certificate.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


class CustomResourceProvider(ResourceProvider[dict[str, Any]]):
    TYPE = "AWS::CloudFormation::CustomResource"
    SCHEMA: ClassVar[dict[str, Any]] = {
        "typeName": TYPE,
        "properties": {"ServiceToken": {"type": "string"}, "PhysicalResourceId": {"type": "string"}},
        "primaryIdentifier": ["/properties/PhysicalResourceId"],
        "createOnlyProperties": ["/properties/ServiceToken"],
    }

    def create(self, request: ResourceRequest[dict[str, Any]]) -> ProgressEvent[dict[str, Any]]:
        return self._request("Create", request)

    def update(self, request: ResourceRequest[dict[str, Any]]) -> ProgressEvent[dict[str, Any]]:
        return self._request("Update", request)

    def delete(self, request: ResourceRequest[dict[str, Any]]) -> ProgressEvent[dict[str, Any]]:
        return self._request("Delete", request)

    def read(self, request: ResourceRequest[dict[str, Any]]) -> ProgressEvent[dict[str, Any]]:
        raise NotImplementedError

    def _request(self, request_type: str, request: ResourceRequest[dict[str, Any]]) -> ProgressEvent[dict[str, Any]]:
        desired = dict(request.desired_state or {})
        previous = dict(request.previous_state or {})
        # what the stack holds of the resource: its properties, physical id and Data (for GetAtt)
        state = desired if request_type == "Delete" else previous
        properties = _properties(desired)
        token = properties.get("ServiceToken", "")
        if ":lambda:" not in token:
            return _failed(f"ServiceToken {token!r}: only Lambda function providers are supported here")
        responder = Responder.get()
        request_id = str(uuid.uuid4())
        event = {
            "RequestType": request_type,
            "ServiceToken": token,
            "ResponseURL": responder.url(request_id),
            "StackId": request.stack_id,
            "RequestId": request_id,
            "LogicalResourceId": request.logical_resource_id,
            "ResourceType": request.resource_type,
            "ResourceProperties": properties,
        }
        if request_type != "Create":
            event["PhysicalResourceId"] = state.get("PhysicalResourceId", "")
        if request_type == "Update":
            event["OldResourceProperties"] = _properties(previous)
        lambda_ = request.aws_client_factory.lambda_
        invoked = lambda_.invoke(FunctionName=token, InvocationType="Event", Payload=json.dumps(event).encode())
        response = responder.wait(request_id, RESPONSE_TIMEOUT_SECONDS)
        _await_log(request.aws_client_factory.logs, token, invoked["ResponseMetadata"]["RequestId"])
        if response is None:
            return _failed(f"{token} sent no response within {RESPONSE_TIMEOUT_SECONDS} s")
        if response.get("Status") != "SUCCESS":
            return _failed(f"{token}: {response.get('Reason') or 'FAILED'}")
        if request_type == "Delete":
            return ProgressEvent(status=OperationStatus.SUCCESS, resource_model={})
        data = response.get("Data") or {}
        # Data's keys at the top of the model, where Fn::GetAtt looks; named, so that they are
        # not sent back to the provider as properties
        model = {**properties, **data, _DATA_KEYS: sorted(data)}
        model["PhysicalResourceId"] = response.get("PhysicalResourceId") or request_id
        return ProgressEvent(status=OperationStatus.SUCCESS, resource_model=model)


def _await_log(logs: Any, function_arn: str, invocation: str, timeout: float = LOG_TIMEOUT_SECONDS) -> bool:
    """Wait until the invocation ``invocation`` of ``function_arn`` has ended and its log is kept
    (its ``REPORT`` line is in the function's log group); False if not within ``timeout``.

    CloudFormation goes on as soon as the response is in, and the provider function may well
    still be running then (it responds before it returns). In Lambda that is harmless; in
    LocalStack, deleting a function (the stack's next step once its custom resources are
    deleted) cancels its invocations in flight and drops the log lines not yet stored
    (``ExecutorEndpoint.shutdown``, ``LogHandler.stop``): the Delete would have run and left no
    trace in the log group. So the stack goes on once this invocation's log is kept.
    """
    group = f"/aws/lambda/{function_arn.split(':')[6]}"
    report = f"REPORT RequestId: {invocation}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            for page in logs.get_paginator("filter_log_events").paginate(logGroupName=group):
                if any(event["message"].startswith(report) for event in page["events"]):
                    return True
        except logs.exceptions.ResourceNotFoundException:
            pass  # the group is made with the invocation's first log lines
        time.sleep(0.5)
    return False


def _properties(state: dict[str, Any]) -> dict[str, Any]:
    """The resource's own properties, without what this provider added to its state."""
    added = {"PhysicalResourceId", _DATA_KEYS, *state.get(_DATA_KEYS, [])}
    return {k: v for k, v in state.items() if k not in added}


def _failed(message: str) -> ProgressEvent[dict[str, Any]]:
    return ProgressEvent(status=OperationStatus.FAILED, resource_model={}, message=message)
