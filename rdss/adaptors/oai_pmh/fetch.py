"""One HTTP GET of a partner's server, contained: redirects only to the same scheme and host, at
most ``max_bytes`` read, and a deadline for the whole request whatever the server does.

The answer is read whatever its status: some repositories carry an OAI-PMH error in the body of a
400 or a 404, and only the body says which one it is.

A per-read timeout alone does not bound a request: a server that sends one byte every few
seconds never lets a read time out. So a timer shuts the request's sockets down when the
deadline passes, which ends a blocked read at once, and the answer is read in pieces so that the
size cap stops it as soon as it is passed (a 400 MB answer is never held in memory).
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from email.message import Message
from typing import Any
from urllib.parse import SplitResult, urljoin, urlsplit

from rdss import __version__
from rdss.host.display import shorten

#: The largest answer read by default: a ListRecords page of a few hundred Dublin Core records
#: is a few MB; 32 MiB leaves room for generous pages and none for a flood.
DEFAULT_MAX_BYTES = 32 * 1024 * 1024
#: The most one request may take by default (redirects included).
DEFAULT_DEADLINE = 120.0
_PIECE = 64 * 1024
_DEFAULT_PORTS = {"http": 80, "https": 443}


class Refused(Exception):
    """An answer the harvester will not take (asking again would get the same): a redirect to
    another scheme or host, an answer over the size cap. ``code`` names which."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Answer:
    """An HTTP answer, whatever its status, with its body read within the limits."""

    status: int
    #: The status line's reason phrase (the server's to choose).
    reason: str
    headers: Message
    body: bytes


class DeadlineExceeded(TimeoutError):
    """No complete answer within the deadline: a timeout, so worth another attempt."""


class Stopped(Exception):
    """A stop was asked for during a wait (a request, a ``Retry-After``, a retry's backoff, a
    send's): the harvest ends where it is, its position that of the last page published."""


class _Watch:
    """Shuts the request's sockets down at the deadline, or at once when ``stop`` is set."""

    #: How often a watch with a stop event looks at it: a stop ends a request within this.
    POLL = 0.1

    def __init__(self, seconds: float, stop: threading.Event | None = None) -> None:
        self.expired = False
        #: True when ``stop`` (not the deadline) shut the sockets.
        self.stopped = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._stop = stop
        self._done = threading.Event()
        self._ends = time.monotonic() + seconds
        self._thread = threading.Thread(target=self._watch, daemon=True, name="oai-pmh-deadline")
        self._thread.start()

    def add(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            if self.expired:
                _shut(sock)

    def cancel(self) -> None:
        self._done.set()

    def _watch(self) -> None:
        while True:
            left = self._ends - time.monotonic()
            if left <= 0:
                break
            if self._done.wait(left if self._stop is None else min(left, self.POLL)):
                return
            if self._stop is not None and self._stop.is_set():
                self.stopped = True
                break
        self._expire()

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._sockets:
                _shut(sock)


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


def _watched(base: type[http.client.HTTPConnection], watch: _Watch) -> type[http.client.HTTPConnection]:
    """``base`` whose sockets ``watch`` shuts at the deadline."""

    class Connection(base):  # type: ignore[valid-type,misc]
        def connect(self) -> None:
            super().connect()
            watch.add(self.sock)

    return Connection


class _HTTP(urllib.request.HTTPHandler):
    def __init__(self, watch: _Watch) -> None:
        super().__init__()
        self.watch = watch

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_watched(http.client.HTTPConnection, self.watch), req)


class _HTTPS(urllib.request.HTTPSHandler):
    def __init__(self, watch: _Watch) -> None:
        super().__init__()
        self.watch = watch

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_watched(http.client.HTTPSConnection, self.watch), req, context=self._context)  # type: ignore[attr-defined]


class _SameHost(urllib.request.HTTPRedirectHandler):
    """Follows a redirect only to the scheme, host and port of the base URL."""

    def __init__(self, origin: SplitResult) -> None:
        super().__init__()
        self.origin = _place(origin)

    def http_error_302(self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any) -> Any:
        # checked before urllib's own handling, which has its own idea of the schemes it follows
        location = headers.get("location") or headers.get("uri")
        if location is not None:
            self._check(req, fp, location)
        return super().http_error_302(req, fp, code, msg, headers)

    http_error_301 = http_error_303 = http_error_307 = http_error_308 = http_error_302

    def redirect_request(
        self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any, newurl: str
    ) -> urllib.request.Request | None:
        self._check(req, fp, newurl)
        return super().redirect_request(req, fp, code, msg, headers, newurl)

    def _check(self, req: urllib.request.Request, fp: Any, newurl: str) -> None:
        target = urlsplit(urljoin(req.full_url, newurl))
        try:
            place = _place(target)
        except ValueError:
            place = None
        if place != self.origin:
            fp.close()
            scheme, host, port = self.origin
            raise Refused(
                f"redirected to {shorten(target.geturl(), 200)}: "
                f"only redirects to {scheme}://{host}:{port} are followed",
                "redirectRefused",
            )


def _place(parts: SplitResult) -> tuple[str, str, int]:
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), parts.port or _DEFAULT_PORTS.get(scheme, 0)


class Fetcher:
    """GETs URLs of one OAI-PMH base URL within the limits."""

    def __init__(
        self,
        base_url: str,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        deadline: float = DEFAULT_DEADLINE,
        timeout: float = 60.0,
        stop: threading.Event | None = None,
    ) -> None:
        """
        Args:
            stop: when set, a request in progress ends at once, raising :class:`Stopped`.
        """
        self.origin = urlsplit(base_url)
        if self.origin.scheme.lower() not in _DEFAULT_PORTS or not self.origin.hostname:
            raise ValueError(f"{base_url!r} is not an http(s) URL")
        self.max_bytes = max_bytes
        self.deadline = deadline
        self.timeout = timeout
        self.stop = stop

    def get(self, url: str) -> Answer:
        """The answer to GET ``url`` (after same-host redirects), whatever its status.

        Raises:
            Refused: a redirect elsewhere, or an answer over ``max_bytes``.
            DeadlineExceeded: no complete answer within ``deadline`` seconds.
            Stopped: ``stop`` was set before the answer was complete.
            OSError: the network (connection refused, reset, a name that does not resolve...).
        """
        if self.stop is not None and self.stop.is_set():
            raise Stopped("stopped before a request")
        watch = _Watch(self.deadline, self.stop)
        opener = urllib.request.build_opener(_HTTP(watch), _HTTPS(watch), _SameHost(self.origin))
        request = urllib.request.Request(url, headers={"User-Agent": f"rdss-oai-pmh-adaptor/{__version__}"})
        try:
            try:
                response = opener.open(request, timeout=min(self.timeout, self.deadline))
                status, reason = response.status, response.reason
            except urllib.error.HTTPError as error:  # not 2xx: the body may still say why
                response, status, reason = error, error.code, str(error.msg or "")
            with response:
                body = self._read(response)
                headers = response.headers
        except (OSError, http.client.HTTPException) as error:
            if watch.stopped:
                raise Stopped("stopped during a request") from None
            if watch.expired:
                raise self._late() from None
            if isinstance(error, http.client.HTTPException) and not isinstance(error, OSError):
                # an answer cut short or malformed (IncompleteRead, BadStatusLine): the connection
                raise ConnectionResetError(f"{type(error).__name__}: {shorten(str(error), 200)}") from None
            raise
        finally:
            watch.cancel()
        if watch.stopped:
            raise Stopped("stopped during a request")
        if watch.expired:  # the shut socket ended the read early: the body is not whole
            raise self._late()
        return Answer(status, reason, headers, body)

    def _read(self, response: Any) -> bytes:
        """The body of an answer (an HTTPResponse, or the HTTPError that wraps one)."""
        declared = response.headers.get("Content-Length", "").strip()
        # ASCII digits only ("²" is a digit to str.isdigit, not to int), and not thousands of them
        if declared.isascii() and declared.isdigit() and (len(declared) > 18 or int(declared) > self.max_bytes):
            raise self._too_large(
                f"{int(declared):,} bytes" if len(declared) <= 18 else f"a {len(declared)}-digit number of bytes"
            )
        pieces: list[bytes] = []
        size = 0
        while True:
            piece = response.read1(_PIECE)  # what has arrived, not a full piece: the deadline is checked often
            if not piece:
                return b"".join(pieces)
            size += len(piece)
            if size > self.max_bytes:
                raise self._too_large(f"more than {self.max_bytes:,} bytes")
            pieces.append(piece)

    def _too_large(self, what: str) -> Refused:
        return Refused(
            f"the answer is {what}, over the {self.max_bytes:,} read (--max-bytes); it was not read further",
            "tooLarge",
        )

    def _late(self) -> DeadlineExceeded:
        return DeadlineExceeded(f"no complete answer within {self.deadline:g} s (--deadline)")


__all__ = ["DEFAULT_DEADLINE", "DEFAULT_MAX_BYTES", "Answer", "DeadlineExceeded", "Fetcher", "Refused", "Stopped"]
