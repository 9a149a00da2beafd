"""Embedded AWS: moto's server in this process, on a free loopback port, spoken to over HTTP.

Everything talks to it with ordinary boto3 clients (``AWS_ENDPOINT_URL``), so code under test
makes the same API calls it makes in AWS, and a role assumed in it is held to its policies
(:mod:`rdss.local.authorise`), so a vendor's gateway is refused here what AWS would refuse it.
:class:`Emulator` keeps its state in memory, or on disk in a state directory
(:mod:`rdss.local.durable`), and takes connections only once told to.
:func:`provision` creates the topology's streams, tables and buckets for one deployment - the
same description the CDK app deploys.

When ``AWS_ENDPOINT_URL`` is already set (LocalStack, or a real account with an endpoint of
its own), :func:`connect` uses that endpoint instead of starting moto.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import boto3
from botocore.config import Config

from rdss.deployment.topology import Deployment
from rdss.local.authorise import Authoriser
from rdss.local.durable import Changes, DurableApp, Recovery
from rdss.local.server import Listener
from rdss.local.state import StateDirectory

DEFAULT_REGION = "eu-west-2"
_CONFIG = Config(retries={"mode": "standard", "max_attempts": 4}, connect_timeout=5, read_timeout=30)


@dataclass
class Endpoint:
    """Where AWS is, and the environment that points boto3 (in any process) at it."""

    url: str | None
    region: str = DEFAULT_REGION
    credentials: Mapping[str, str] = field(default_factory=dict)
    _server: Any = None
    #: The embedded emulator's change counter (None elsewhere): what an idle runtime waits on.
    changes: Changes | None = None

    def environment(self) -> dict[str, str]:
        env = {"AWS_DEFAULT_REGION": self.region, "AWS_REGION": self.region, **self.credentials}
        if self.url:
            env["AWS_ENDPOINT_URL"] = self.url
        return env

    def client(self, service: str, *, config: Config | None = None) -> Any:
        """A boto3 client of ``service`` here; ``config`` in place of the emulator's own (a caller
        measuring a client configured as it is elsewhere, e.g. the gateway's)."""
        kwargs: dict[str, Any] = {"region_name": self.region, "config": config or _CONFIG}
        if self.url:
            kwargs["endpoint_url"] = self.url
        if self.credentials:
            kwargs["aws_access_key_id"] = self.credentials["AWS_ACCESS_KEY_ID"]
            kwargs["aws_secret_access_key"] = self.credentials["AWS_SECRET_ACCESS_KEY"]
        return boto3.client(service, **kwargs)

    @property
    def embedded(self) -> bool:
        return self._server is not None

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None


_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing"}


class Emulator:
    """moto's server in this process: its WSGI app behind the journal (:mod:`rdss.local.durable`;
    in memory without a state directory), a public port bound at once and opened by
    :meth:`open`, and a private port for the runtime's own clients (:meth:`private_endpoint`)."""

    def __init__(
        self,
        region: str = DEFAULT_REGION,
        *,
        port: int = 0,
        state: StateDirectory | None = None,
        compact_every: int = 5000,
        salvage: bool = False,
    ) -> None:
        """Bind ``port`` (0: a free one) without taking connections yet; ``salvage``: start from
        what is intact of damaged state (:mod:`rdss.local.damage`) rather than refuse.

        Raises:
            PortUnavailable: the port is out of range, in use, or reserved.
        """
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

        _item_level_transaction_rollback()
        _records_go_to_open_shards()
        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
        self.region = region
        self.app = DurableApp(
            DomainDispatcherApplication(create_backend_app), state, compact_every=compact_every, salvage=salvage
        )
        # what a vendor's role may not do is refused before moto (and the journal) sees it
        self.served = Authoriser(self.app)
        self.public = Listener(self.served, port)
        self._private: Listener | None = None

    def recover(self) -> Recovery:
        """Rebuild the state the state directory holds (before any connection is taken)."""
        return self.app.recover()

    def private_endpoint(self) -> Endpoint:
        """An endpoint on a port of its own, open now, for the runtime's clients while the public
        port stays closed (provisioning) and after."""
        if self._private is None:
            self._private = Listener(self.served)
            self._private.open()
        return Endpoint(self._private.url, self.region, dict(_CREDENTIALS), self, self.app.changes)

    def open(self) -> Endpoint:
        """Take connections on the public port; its endpoint."""
        self.public.open()
        return Endpoint(self.public.url, self.region, dict(_CREDENTIALS), self, self.app.changes)

    def stop(self, *, snapshot: bool = True) -> None:
        """Close the public port, snapshot the state (when kept on disk) and close the rest."""
        self.public.close()
        self.app.close(snapshot_state=snapshot)
        if self._private is not None:
            self._private.close()
            self._private = None


def start_embedded(region: str = DEFAULT_REGION, *, port: int = 0) -> Endpoint:
    """Start moto's server on 127.0.0.1 and ``port`` (0: a free one), state in memory."""
    return Emulator(region, port=port).open()


def _item_level_transaction_rollback() -> None:
    """Make moto's TransactWriteItems cost what DynamoDB's does: proportional to the items in
    the transaction, not to the size of the table.

    moto snapshots every table a transaction touches with ``copy.deepcopy`` - once per item -
    so that it can restore the table if the transaction is cancelled; with the Local Data
    Repository's 100-item claims that grows with every message ever recorded (0.05 s per call on
    an empty table, 0.5 s after a few hundred claims). Here the touched items are snapshotted
    instead, through the backend's own get/put/delete, and restored the same way; moto's table
    copies become no-ops. Semantics are unchanged: a cancelled transaction leaves no trace.
    """
    import copy as stdlib_copy

    from moto.dynamodb import models
    from moto.dynamodb.models.table import Table

    if getattr(models.DynamoDBBackend.transact_write_items, "_rdss_item_level", False):
        return

    class _TablesAreNotCopied:
        @staticmethod
        def deepcopy(value: Any, memo: Any = None) -> Any:
            return value if isinstance(value, Table) else stdlib_copy.deepcopy(value, memo)

        def __getattr__(self, name: str) -> Any:
            return getattr(stdlib_copy, name)

    models.copy = _TablesAreNotCopied()  # type: ignore[assignment,attr-defined]
    original = models.DynamoDBBackend.transact_write_items

    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        touched: list[tuple[str, dict[str, Any], dict[str, Any] | None]] = []
        for entry in transact_items:
            operation, details = next(iter(entry.items()))
            table = self.tables.get(details.get("TableName"))
            if table is None:
                continue
            if operation == "Put":
                names = [table.hash_key_attr] + ([table.range_key_attr] if table.range_key_attr else [])
                key = {name: details["Item"][name] for name in names if name in details["Item"]}
            else:
                key = details.get("Key", {})
            try:
                current = self.get_item(details["TableName"], key)
            except Exception:  # malformed keys: moto reports them itself
                current = None
            touched.append((details["TableName"], key, current.to_json()["Attributes"] if current else None))
        try:
            original(self, transact_items)
        except Exception:
            for table_name, key, attributes in reversed(touched):
                try:
                    if attributes is None:
                        self.delete_item(table_name, key)
                    else:
                        self.put_item(table_name, attributes)
                except Exception:  # the item was never written
                    pass
            raise

    transact_write_items._rdss_item_level = True  # type: ignore[attr-defined]
    models.DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]


def _records_go_to_open_shards() -> None:
    """Route records the way Kinesis does after a split or a merge: to open shards only.

    moto 5.2 picks a shard by hash range over every shard of the stream, so once a shard is
    closed by resharding it keeps receiving records; real Kinesis writes only to open shards,
    and consumers rely on a closed parent ending (they drain it, then move to its children).
    """
    import hashlib

    from moto.kinesis.models import Stream

    if getattr(Stream.get_shard_for_key, "_rdss_open_shards", False):
        return

    def get_shard_for_key(self: Any, partition_key: str, explicit_hash_key: str | None) -> Any:
        if explicit_hash_key:
            key = int(explicit_hash_key)
        else:
            key = int(hashlib.md5(partition_key.encode("utf-8"), usedforsecurity=False).hexdigest(), 16)
        for shard in list(self.shards.values()):
            if shard.is_open and shard.starting_hash <= key <= shard.ending_hash:
                return shard
        return None

    get_shard_for_key._rdss_open_shards = True  # type: ignore[attr-defined]
    Stream.get_shard_for_key = get_shard_for_key  # type: ignore[method-assign]


def connect(region: str | None = None) -> Endpoint:
    """The endpoint given by ``AWS_ENDPOINT_URL`` if set, else a new embedded moto server."""
    url = os.environ.get("AWS_ENDPOINT_URL")
    region = region or os.environ.get("AWS_DEFAULT_REGION") or DEFAULT_REGION
    if url:
        return Endpoint(url, region)
    return start_embedded(region)


def provision(endpoint: Endpoint, deployment: Deployment, *, shards: int = 1) -> None:
    """Create every stream, table and bucket of the deployment (idempotent).

    Waits for what a real account makes callers wait for: streams ACTIVE (Kinesis creates at
    most five at a time per account, and refuses a stream that would pass the shard quota
    while older streams are still being deleted), tables ACTIVE.
    """
    kinesis, dynamodb, s3 = endpoint.client("kinesis"), endpoint.client("dynamodb"), endpoint.client("s3")
    topology = deployment.topology
    existing = set(_stream_names(kinesis))
    for channel in topology.channels:
        name = deployment.stream(channel.name)
        if name not in existing:
            _create_stream(kinesis, name, shards)
    tables = set(dynamodb.list_tables().get("TableNames", []))
    for table in topology.tables:
        name = deployment.table(table.name)
        if name in tables:
            continue
        keys = [{"AttributeName": table.partition_key, "KeyType": "HASH"}]
        attributes = [{"AttributeName": table.partition_key, "AttributeType": "S"}]
        if table.sort_key:
            keys.append({"AttributeName": table.sort_key, "KeyType": "RANGE"})
            attributes.append({"AttributeName": table.sort_key, "AttributeType": "S"})
        dynamodb.create_table(
            TableName=name, KeySchema=keys, AttributeDefinitions=attributes, BillingMode="PAY_PER_REQUEST"
        )
    buckets = {b["Name"] for b in s3.list_buckets().get("Buckets", [])}
    for bucket in topology.buckets:
        name = deployment.bucket(bucket.name)
        if name not in buckets:
            s3.create_bucket(Bucket=name, CreateBucketConfiguration={"LocationConstraint": endpoint.region})
    for channel in topology.channels:
        wait_active(kinesis, deployment.stream(channel.name))
    for table in topology.tables:
        dynamodb.get_waiter("table_exists").wait(TableName=deployment.table(table.name))


def deprovision(endpoint: Endpoint, deployment: Deployment) -> None:
    """Delete the deployment's streams, tables and buckets (objects and versions first).

    What tests and demos run against a shared endpoint (LocalStack, an account with quotas)
    must not outlive them. Deletion is asked for, not waited for; what is already gone is fine.
    """
    kinesis, dynamodb, s3 = endpoint.client("kinesis"), endpoint.client("dynamodb"), endpoint.client("s3")
    topology = deployment.topology
    for channel in topology.channels:
        with contextlib.suppress(kinesis.exceptions.ResourceNotFoundException):
            kinesis.delete_stream(StreamName=deployment.stream(channel.name), EnforceConsumerDeletion=True)
    for table in topology.tables:
        with contextlib.suppress(dynamodb.exceptions.ResourceNotFoundException):
            dynamodb.delete_table(TableName=deployment.table(table.name))
    for bucket in topology.buckets:
        empty_bucket(s3, deployment.bucket(bucket.name), delete=True)


@contextlib.contextmanager
def provisioned(
    endpoint: Endpoint, deployment: Deployment, *, shards: int = 1, tables: Sequence[str] = ()
) -> Iterator[Deployment]:
    """A deployment for one run (a benchmark's): provisioned on entry. On exit, passed or failed,
    on an endpoint someone else runs (LocalStack, an account: what is left there holds quota and
    costs money) it is deprovisioned, and ``tables`` made beside it are deleted; the embedded
    server's state goes with the server."""
    try:
        provision(endpoint, deployment, shards=shards)
        yield deployment
    finally:
        if not endpoint.embedded:
            deprovision(endpoint, deployment)
            dynamodb = endpoint.client("dynamodb")
            for table in tables:
                with contextlib.suppress(dynamodb.exceptions.ResourceNotFoundException):
                    dynamodb.delete_table(TableName=table)


def empty_bucket(s3: Any, bucket: str, *, delete: bool = False) -> None:
    """Remove every object version and delete marker of ``bucket`` (and the bucket itself)."""
    try:
        for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket):
            doomed = [
                {"Key": o["Key"], "VersionId": o["VersionId"]}
                for o in page.get("Versions", []) + page.get("DeleteMarkers", [])
            ]
            for start in range(0, len(doomed), 1000):
                s3.delete_objects(Bucket=bucket, Delete={"Objects": doomed[start : start + 1000], "Quiet": True})
        if delete:
            s3.delete_bucket(Bucket=bucket)
    except s3.exceptions.NoSuchBucket:
        return


def _stream_names(kinesis: Any) -> list[str]:
    names: list[str] = []
    for page in kinesis.get_paginator("list_streams").paginate():
        names += page.get("StreamNames", [])
    return names


def _create_stream(kinesis: Any, name: str, shards: int, timeout: float = 120) -> None:
    """CreateStream, waiting out LimitExceededException: five streams CREATING at once, or the
    shard quota until streams being deleted are gone."""
    deadline = time.monotonic() + timeout
    delay = 0.2
    while True:
        try:
            kinesis.create_stream(StreamName=name, ShardCount=shards)
            return
        except kinesis.exceptions.ResourceInUseException:
            # there already: made since the listing, or by this very call when its first answer
            # was lost and botocore asked again (seen on a loaded machine) - provisioning is idempotent
            return
        except kinesis.exceptions.LimitExceededException:
            if time.monotonic() > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 2.0)


def wait_active(kinesis: Any, stream: str, timeout: float = 60) -> None:
    """Until ``stream`` is ACTIVE: after creation, and after a reshard (it is UPDATING meanwhile)."""
    deadline = time.monotonic() + timeout
    while True:
        status = kinesis.describe_stream_summary(StreamName=stream)["StreamDescriptionSummary"]["StreamStatus"]
        if status == "ACTIVE":
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"stream {stream} is still {status}")
        time.sleep(0.2)
