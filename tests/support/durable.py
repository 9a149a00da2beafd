"""The journalled emulator in this process, as a fresh ``rdss local up`` process would have it:
moto's real WSGI app behind :class:`rdss.local.durable.DurableApp` on a state directory, spoken to
with the requests boto3 makes (no HTTP), crashed (no snapshot, the files as they are) or stopped,
and started again after moto's state is emptied."""

from __future__ import annotations

import base64
import io
from pathlib import Path
from typing import Any

import orjson

from rdss.local.durable import DurableApp
from rdss.local.state import StateDirectory

REGION = "eu-west-2"
_TARGETS = {"kinesis": "Kinesis_20131202", "dynamodb": "DynamoDB_20120810", "firehose": "Firehose_20150804"}


def empty_moto() -> None:
    """moto with no state at all, as in a new process (its modules stay imported)."""
    from moto.core.base_backend import BackendDict

    for backends in list(vars(BackendDict)["_instances"]):
        dict.clear(backends)


class Emulated:
    """One start of the journalled emulator on ``path``."""

    def __init__(self, path: Path, *, compact_every: int = 5000, salvage: bool = False) -> None:
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

        empty_moto()
        self.state = StateDirectory(path)
        self.app = DurableApp(
            DomainDispatcherApplication(create_backend_app), self.state, compact_every=compact_every, salvage=salvage
        )
        try:
            self.recovery = self.app.recover()
        except BaseException:
            self.state.close()
            raise

    def call(self, service: str, operation: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        data = orjson.dumps(body)
        environ = {
            "REQUEST_METHOD": "POST",
            "PATH_INFO": "/",
            "QUERY_STRING": "",
            "SERVER_NAME": "127.0.0.1",
            "SERVER_PORT": "80",
            "HTTP_HOST": "127.0.0.1",
            "CONTENT_TYPE": "application/x-amz-json-1.1",
            "CONTENT_LENGTH": str(len(data)),
            "HTTP_X_AMZ_TARGET": f"{_TARGETS[service]}.{operation}",
            "HTTP_AUTHORIZATION": (
                f"AWS4-HMAC-SHA256 Credential=testing/20260101/{REGION}/{service}/aws4_request, "
                "SignedHeaders=host, Signature=0"
            ),
            "wsgi.input": io.BytesIO(data),
            "wsgi.url_scheme": "http",
        }
        answer: dict[str, str] = {}
        content = b"".join(self.app(environ, lambda status, headers, exc_info=None: answer.update(status=status)))
        return int(answer["status"].split()[0]), orjson.loads(content) if content.startswith(b"{") else {}

    def create_stream(self, name: str) -> None:
        status, body = self.call("kinesis", "CreateStream", {"StreamName": name, "ShardCount": 1})
        assert status == 200, body

    def put(self, stream: str, data: bytes) -> bool:
        """PutRecord; True when acknowledged (answered 200: synced to the journal)."""
        record = {"StreamName": stream, "Data": base64.b64encode(data).decode(), "PartitionKey": "k"}
        return self.call("kinesis", "PutRecord", record)[0] == 200

    def records(self, stream: str) -> list[bytes]:
        """Every record's data on ``stream``'s one shard, oldest first ([] when it does not exist)."""
        status, iterator = self.call(
            "kinesis",
            "GetShardIterator",
            {"StreamName": stream, "ShardId": "shardId-000000000000", "ShardIteratorType": "TRIM_HORIZON"},
        )
        if status != 200:
            return []
        found: list[bytes] = []
        position = iterator["ShardIterator"]
        while True:
            status, page = self.call("kinesis", "GetRecords", {"ShardIterator": position, "Limit": 10000})
            found += [base64.b64decode(r["Data"]) for r in page.get("Records", [])]
            if not page.get("Records"):
                return found
            position = page["NextShardIterator"]

    def crash(self) -> None:
        """Die without a snapshot: the files stay as the last write left them."""
        journal = self.app._journal
        self.app._closed = True
        self.app._compact_due.set()
        if journal is not None and journal._fd >= 0:
            import os

            os.close(journal._fd)
            os.close(journal._witness)
            journal._fd = -1
        self.state.close()

    def stop(self) -> None:
        """A clean stop: snapshot, close."""
        self.app.close()
        self.state.close()
