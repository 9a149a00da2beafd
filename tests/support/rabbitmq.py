"""RabbitMQ for the tests: the private node of :mod:`rdss.bench.rabbitmq_node` (one per
session, ``tests/amqp/conftest.py``) and a TCP proxy that cuts connections on demand.

``python -m tests.support.rabbitmq install`` installs Debian's ``rabbitmq-server`` when it is
missing (what ``make test`` runs first on a fresh machine); it needs root and apt-get, and says
so clearly when it cannot have them instead of letting the tests skip.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import threading

from rdss.bench.rabbitmq_node import RabbitMQ, RabbitMQUnavailable, free_port, install

__all__ = ["RabbitMQ", "RabbitMQUnavailable", "TcpProxy", "free_port", "install"]


class TcpProxy:
    """A TCP relay in front of the node, to cut connections the way a network does.

    ``cut()`` drops every relayed connection at once; ``cut_after(n)`` drops a connection once
    ``n`` more bytes went from client to server through it (the middle of a publish, say).
    Clients reconnecting through the proxy get through again.
    """

    def __init__(self, port: int, host: str = "127.0.0.1") -> None:
        self.target = (host, port)
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._server.getsockname()[1]
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._budget: int | None = None
        #: Connections dropped by the proxy so far.
        self.cuts = 0
        self._closed = False
        threading.Thread(target=self._accept, daemon=True, name="tcp-proxy").start()

    def url(self, amqp_url: str) -> str:
        """``amqp_url`` pointed at the proxy instead of the node."""
        return amqp_url.replace(f":{self.target[1]}/", f":{self.port}/", 1)

    def cut(self) -> None:
        with self._lock:
            pairs, self._pairs = self._pairs, []
            self.cuts += len(pairs)
        for client, server in pairs:
            for end in (client, server):
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)
                end.close()

    def cut_after(self, client_bytes: int) -> None:
        with self._lock:
            self._budget = client_bytes

    def close(self) -> None:
        self._closed = True
        self.cut()
        self._server.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._pairs.append((client, server))
            threading.Thread(target=self._pump, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, False), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, upstream: bool) -> None:
        while True:
            try:
                data = source.recv(65536)
            except OSError:
                return
            if not data:
                with contextlib.suppress(OSError):
                    sink.shutdown(socket.SHUT_WR)
                return
            cut = False
            if upstream:
                with self._lock:
                    if self._budget is not None:
                        if len(data) >= self._budget:
                            data, cut, self._budget = data[: self._budget], True, None
                        else:
                            self._budget -= len(data)
            try:
                sink.sendall(data)
            except OSError:
                return
            if cut:
                self.cut()
                return


def main(argv: list[str]) -> int:
    if argv[1:] != ["install"]:
        print("usage: python -m tests.support.rabbitmq install", file=sys.stderr)
        return 2
    try:
        install()
    except (RabbitMQUnavailable, subprocess.CalledProcessError) as error:
        print(f"rabbitmq: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
