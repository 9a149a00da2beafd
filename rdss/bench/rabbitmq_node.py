"""A private RabbitMQ node: Debian's ``rabbitmq-server``, started as a subprocess, for
``rdss bench amqp`` when no broker is named (and for the amqp test suite, through
``tests/support/rabbitmq.py``).

Nothing is shared with a system RabbitMQ (if one runs): the node has its own name, AMQP port,
distribution port, epmd port, data, log and config directories, all under a temporary
directory, and the systemd service is never touched. :func:`install` installs the package when
it is missing (``make test`` runs it first on a fresh machine); it needs root and apt-get, and
says so clearly when it cannot have them.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import pika

BIN = Path("/usr/lib/rabbitmq/bin")
SERVER = BIN / "rabbitmq-server"
CTL = BIN / "rabbitmqctl"


class RabbitMQUnavailable(RuntimeError):
    """RabbitMQ is not installed and cannot be installed here, or the node did not start."""


def install() -> None:
    """Install Debian's ``rabbitmq-server`` unless it is there already (idempotent)."""
    if SERVER.exists():
        return
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise RabbitMQUnavailable(
            f"{SERVER} is missing and cannot be installed without root and apt-get: "
            "install it with `sudo apt-get install --no-install-recommends rabbitmq-server` (the tests start their own "
            "node; the system service is not needed)"
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    command = ["apt-get", "install", "-y", "--no-install-recommends", "rabbitmq-server"]
    if subprocess.run(command, env=env, check=False).returncode != 0:
        # a fresh machine may not have package lists yet
        subprocess.run(["apt-get", "update"], env=env, check=True)
        subprocess.run(command, env=env, check=True)
    if not SERVER.exists():
        raise RabbitMQUnavailable(f"apt-get installed rabbitmq-server but {SERVER} is not there")
    if Path("/run/systemd/system").is_dir() and shutil.which("systemctl"):
        # Debian starts and enables the service it just installed; the tests run their own node
        subprocess.run(["systemctl", "disable", "--now", "rabbitmq-server"], check=False)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class RabbitMQ:
    """One private node: :meth:`start`, use :attr:`url`, :meth:`stop`."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root or Path(tempfile.mkdtemp(prefix="rdss-rabbitmq-"))
        self.port = free_port()
        self.dist_port = free_port()
        self.epmd_port = free_port()
        self.node = f"rdss-test-{uuid.uuid4().hex[:8]}@localhost"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The AMQP URL of the node (guest is allowed from loopback)."""
        return f"amqp://guest:guest@127.0.0.1:{self.port}/%2F"

    def environment(self) -> dict[str, str]:
        """What both the server and rabbitmqctl need to find this node and only this node."""
        return {
            **os.environ,
            # the Erlang cookie lives in $HOME: a private home keeps it private too
            "HOME": str(self.root),
            "RABBITMQ_NODENAME": self.node,
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(self.dist_port),
            "ERL_EPMD_PORT": str(self.epmd_port),
            "ERL_EPMD_ADDRESS": "127.0.0.1",
            "RABBITMQ_MNESIA_BASE": str(self.root / "mnesia"),
            "RABBITMQ_LOG_BASE": str(self.root / "log"),
            "RABBITMQ_CONFIG_FILE": str(self.root / "rabbitmq.conf"),
            "RABBITMQ_ADVANCED_CONFIG_FILE": str(self.root / "advanced.config"),
            "RABBITMQ_CONF_ENV_FILE": str(self.root / "rabbitmq-env.conf"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(self.root / "enabled_plugins"),
        }

    def start(self, timeout: float = 90.0) -> None:
        """Boot the node and return once it accepts AMQP connections.

        Raises:
            RabbitMQUnavailable: not installed, or not up within ``timeout`` (the log's tail says why).
        """
        if not SERVER.exists():
            raise RabbitMQUnavailable(f"{SERVER} is missing: run `python -m tests.support.rabbitmq install` as root")
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "rabbitmq.conf").write_text(
            "\n".join(
                [
                    f"listeners.tcp.default = 127.0.0.1:{self.port}",
                    "log.console = false",
                    "log.file.level = warning",
                    # tests fill queues quickly on small machines; do not block publishers for it
                    "disk_free_limit.absolute = 50MB",
                    "",
                ]
            )
        )
        (self.root / "rabbitmq-env.conf").write_text("")
        (self.root / "enabled_plugins").write_text("[].\n")  # no management or other listeners
        self.process = subprocess.Popen(
            [str(SERVER)],
            env=self.environment(),
            stdout=open(self.root / "server.out", "wb"),  # noqa: SIM115 - the node outlives this call
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        quiet = logging.getLogger("pika")
        level, quiet.level = quiet.level, logging.CRITICAL  # refused connections while it boots are expected
        try:
            self._wait(deadline, timeout)
        finally:
            quiet.setLevel(level)

    def _wait(self, deadline: float, timeout: float) -> None:
        assert self.process is not None
        while True:
            if self.process.poll() is not None:
                raise RabbitMQUnavailable(f"rabbitmq-server exited with {self.process.returncode}: {self._tail()}")
            try:
                pika.BlockingConnection(
                    pika.URLParameters(self.url + "?connection_attempts=1&socket_timeout=2")
                ).close()
                return
            except pika.exceptions.AMQPError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RabbitMQUnavailable(f"RabbitMQ did not start within {timeout:g} s: {self._tail()}") from None
                time.sleep(0.2)

    def ctl(self, *args: str, timeout: float = 60.0) -> str:
        """``rabbitmqctl -n <node> ARGS``; its standard output."""
        result = subprocess.run(
            [str(CTL), "-n", self.node, *args],
            env=self.environment(),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(f"rabbitmqctl {' '.join(args)}: {result.stderr.strip() or result.stdout.strip()}")
        return result.stdout

    def drain(self, queue: str) -> list[bytes]:
        """Every message on ``queue`` now, taken off it (acknowledged), in order."""
        found: list[bytes] = []
        with pika.BlockingConnection(pika.URLParameters(self.url)) as connection:
            channel = connection.channel()
            while True:
                method, _, body = channel.basic_get(queue, auto_ack=True)
                if method is None:
                    return found
                found.append(body)

    def queue_depths(self) -> dict[str, int]:
        """Messages ready in each queue of the default virtual host."""
        out = self.ctl("list_queues", "-q", "--no-table-headers", "name", "messages_ready")
        depths: dict[str, int] = {}
        for line in out.splitlines():
            name, _, count = line.rpartition("\t")
            if name:
                depths[name] = int(count)
        return depths

    def stop(self) -> None:
        """Stop the node (SIGTERM is RabbitMQ's graceful shutdown), then its private epmd."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
        epmd = shutil.which("epmd")
        if epmd is not None:
            subprocess.run([epmd, "-kill"], env=self.environment(), capture_output=True, timeout=10, check=False)
        shutil.rmtree(self.root, ignore_errors=True)

    def _tail(self) -> str:
        lines: list[str] = []
        for path in [self.root / "server.out", *sorted((self.root / "log").glob("*.log"))]:
            with contextlib.suppress(OSError):
                lines.extend(path.read_text(errors="replace").splitlines()[-10:])
        return " | ".join(line.strip() for line in lines if line.strip())[-2000:] or "no output"
