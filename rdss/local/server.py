"""moto's server on loopback listeners that bind at once and take connections only when told.

A :class:`Listener` binds its port when it is made - so a port in use, or one a user may not
bind, is an error there and then - but does not listen: a client's connection is refused, as
from a server not yet started, until :meth:`Listener.open`. ``rdss local up`` binds its port
first, replays its journal and provisions the deployment through a private listener of its own,
and opens its port last, so nothing reaches it before its streams exist.
"""

from __future__ import annotations

import socket
import threading
from typing import Any

HOST = "127.0.0.1"


class PortUnavailable(OSError):
    """The port cannot be bound (in use, out of range, or reserved)."""


class Listener:
    """One loopback port serving a WSGI app on threads (moto's request handler)."""

    def __init__(self, app: Any, port: int = 0) -> None:
        from moto.moto_server.werkzeug_app import MotoRequestHandler
        from werkzeug.serving import ThreadedWSGIServer

        if not 0 <= port <= 65535:
            raise PortUnavailable(f"port {port} is out of range (0-65535)")
        bound = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        bound.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a port freed by a kill is free
        try:
            bound.bind((HOST, port))
        except OSError as error:
            bound.close()
            raise PortUnavailable(f"port {port}: {error.strerror or error}") from error
        try:
            # werkzeug takes a socket it is given as it is: bound, not listening
            self._server = ThreadedWSGIServer(HOST, port, app, handler=MotoRequestHandler, fd=bound.fileno())
        finally:
            bound.close()  # the server holds its own duplicate
        self.port: int = self._server.server_address[1]
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def open(self) -> None:
        """Listen, and serve on a background thread.

        Raises:
            PortUnavailable: another program bound the port too (it is free to, until one of
                them listens) and listens on it now.
        """
        if self._thread is not None:
            return
        try:
            self._server.server_activate()
        except OSError as error:
            raise PortUnavailable(f"port {self.port}: {error.strerror or error}") from error
        self._thread = threading.Thread(target=self._server.serve_forever, name=f"moto-{self.port}", daemon=True)
        self._thread.start()

    def close(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=30)
            self._thread = None
        self._server.server_close()
