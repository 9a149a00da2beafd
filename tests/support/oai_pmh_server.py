"""A small OAI-PMH 2.0 repository on loopback, for the Channel Adaptor's tests.

Real HTTP (the standard library's ``http.server``), real XML: ``Identify`` and ``ListRecords``
with ``oai_dc`` records, ``from``/``until`` datestamps (inclusive, as the protocol says),
``set``, resumption tokens (``completeListSize``, ``cursor``, an empty token on the last page),
deleted records (``status="deleted"``, no metadata), and the protocol's errors
(``noRecordsMatch``, ``badResumptionToken``, ``cannotDisseminateFormat``, ``badArgument``,
``badVerb``). Tests change the records while it serves, expire tokens, and make it answer
``503 Retry-After`` (how OAI-PMH servers apply flow control) - or behave as real repositories
do: answer OAI-PMH errors with a 4xx (:attr:`OaiPmhServer.error_status`), answer any error on
demand (:meth:`OaiPmhServer.fail`), hand out resumption tokens that loop
(:meth:`OaiPmhServer.cycle`) or fresh ones without end (:meth:`OaiPmhServer.unending`), write
anything in ``completeListSize`` and ``cursor``
(:attr:`OaiPmhServer.resumption_attributes`) or ``Retry-After`` - or as a hostile peer
(:meth:`OaiPmhServer.hostile`): redirect elsewhere, answer without end, drip an answer, answer a
status with a body that is not OAI-PMH.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit
from xml.sax.saxutils import escape, quoteattr

OAI = "http://www.openarchives.org/OAI/2.0/"
OAI_DC = "http://www.openarchives.org/OAI/2.0/oai_dc/"
DC = "http://purl.org/dc/elements/1.1/"


@dataclass
class Record:
    """One item of the repository: its header and its Dublin Core (element -> values)."""

    identifier: str
    datestamp: str
    dc: dict[str, list[str]] = field(default_factory=dict)
    deleted: bool = False
    sets: tuple[str, ...] = ()


@dataclass
class _Token:
    identifiers: list[str]
    offset: int


class OaiPmhServer:
    """Serves :attr:`records` at :attr:`url` until :meth:`stop`."""

    def __init__(self, records: list[Record] | None = None, *, page_size: int = 10) -> None:
        self.records: dict[str, Record] = {r.identifier: r for r in records or []}
        self.page_size = page_size
        self.requests: list[dict[str, str]] = []
        #: The HTTP status OAI-PMH errors are answered with (some repositories answer 400 or 404).
        self.error_status = 200
        #: ``completeListSize`` and ``cursor`` written as these strings instead of the counts.
        self.resumption_attributes: dict[str, str] = {}
        self._tokens: dict[str, _Token] = {}
        self._lock = threading.Lock()
        self._busy = 0
        self._retry_after: str | None = "1"
        self._failures: list[tuple[str, str]] = []
        self._cycle: tuple[int, int] | None = None
        self._unending: bool | None = None
        self._hostile: Callable[[BaseHTTPRequestHandler], None] | None = None
        self._stopping = threading.Event()
        handler = type("Handler", (_Handler,), {"repository": self})
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(
            target=self._http.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True, name="oai-pmh"
        )
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}/oai"

    def put(self, record: Record) -> None:
        """Add or replace a record (a new datestamp makes it show in later incremental harvests)."""
        with self._lock:
            self.records[record.identifier] = record

    def delete(self, identifier: str, datestamp: str) -> None:
        with self._lock:
            record = self.records[identifier]
            self.records[identifier] = Record(identifier, datestamp, {}, deleted=True, sets=record.sets)

    def expire_tokens(self) -> None:
        with self._lock:
            self._tokens.clear()

    def busy(self, times: int, retry_after: str | None = "1") -> None:
        """Answer the next ``times`` requests with 503 and ``Retry-After: {retry_after}`` (any
        text: see :func:`_header_text`; None: no Retry-After)."""
        with self._lock:
            self._busy, self._retry_after = times, retry_after

    def fail(self, code: str, message: str = "refused", *, times: int = 1) -> None:
        """Answer the next ``times`` ListRecords requests with the OAI-PMH error ``code``."""
        with self._lock:
            self._failures.extend([(code, message)] * times)

    def cycle(self, first: int | None, length: int = 1) -> None:
        """Hand out resumption tokens that loop: pages ``first .. first + length - 1`` (page 0
        is the answer without a token) come round for ever, the last of them handing out the
        token of page ``first`` again (``length`` 1: the very token the request carried).
        Tokens are named after their page (``page-N``), so a page always hands out the same
        token, and each stays usable. ``first`` None: list to the end again (a mended server)."""
        if first is not None and (first < 1 or length < 1):
            raise ValueError("a cycle starts at page 1 or later and has at least one page")
        with self._lock:
            self._cycle = None if first is None else (first, length)

    def unending(self, repeat: bool | None) -> None:
        """Answer every request that carries a resumption token with a fresh token (never one
        handed out before) and the first page's first record again (``repeat``) or no record
        at all: a list without end that no token loop reveals. None: list to the end again."""
        with self._lock:
            self._unending = repeat

    def hostile(self, behaviour: Callable[[BaseHTTPRequestHandler], None] | None) -> None:
        """Answer every request with ``behaviour`` (None: serve the protocol again); see
        :func:`redirect`, :func:`endless` and :func:`drip`."""
        with self._lock:
            self._hostile = behaviour

    def misbehaving(self) -> Callable[[BaseHTTPRequestHandler], None] | None:
        with self._lock:
            return self._hostile

    @property
    def stopping(self) -> threading.Event:
        return self._stopping

    def stop(self) -> None:
        self._stopping.set()
        self._http.shutdown()
        self._http.server_close()

    # -- the protocol ---------------------------------------------------------------------------
    def answer(self, query: dict[str, str]) -> tuple[int, dict[str, str], str]:
        with self._lock:
            self.requests.append(query)
            if self._busy:
                self._busy -= 1
                return 503, {} if self._retry_after is None else {"Retry-After": self._retry_after}, "busy"
            verb = query.get("verb")
            if verb == "Identify":
                body = self._identify()
            elif verb == "ListRecords" and self._failures:
                body = _error(*self._failures.pop(0))
            elif verb == "ListRecords":
                body = self._list_records(query)
            else:
                body = _error("badVerb", f"unsupported verb {verb!r}")
            status = self.error_status if body.startswith("<error ") else 200
            return status, {}, self._envelope(query, body)

    def _identify(self) -> str:
        earliest = min((r.datestamp for r in self.records.values()), default="2000-01-01T00:00:00Z")
        return (
            "<Identify><repositoryName>Test Repository</repositoryName>"
            f"<baseURL>{escape(self.url)}</baseURL><protocolVersion>2.0</protocolVersion>"
            "<adminEmail>admin@example.org</adminEmail>"
            f"<earliestDatestamp>{earliest}</earliestDatestamp><deletedRecord>persistent</deletedRecord>"
            "<granularity>YYYY-MM-DDThh:mm:ssZ</granularity></Identify>"
        )

    def _list_records(self, query: dict[str, str]) -> str:
        token_text = query.get("resumptionToken")
        if token_text is not None:
            if set(query) != {"verb", "resumptionToken"}:
                return _error("badArgument", "resumptionToken is an exclusive argument")
            token = self._tokens.get(token_text)  # usable again until expired, as servers allow
            if token is None:
                return _error("badResumptionToken", "the token has expired or is not one of ours")
        else:
            if query.get("metadataPrefix") != "oai_dc":
                return _error("cannotDisseminateFormat", "only oai_dc")
            start, until, wanted = query.get("from"), query.get("until"), query.get("set")
            chosen = sorted(
                (
                    r
                    for r in self.records.values()
                    if (start is None or _stamp(r.datestamp) >= _stamp(start))
                    and (until is None or _stamp(r.datestamp) <= _stamp(until))
                    and (wanted is None or wanted in r.sets)
                ),
                key=lambda r: (_stamp(r.datestamp), r.identifier),
            )
            if not chosen:
                return _error("noRecordsMatch", "no records match")
            token = _Token([r.identifier for r in chosen], 0)
        if token_text is not None and self._unending is not None:
            again = _record(self.records[token.identifiers[0]]) if self._unending else ""
            name = uuid.uuid4().hex
            self._tokens[name] = token
            return f"<ListRecords>{again}<resumptionToken>{name}</resumptionToken></ListRecords>"
        page = token.identifiers[token.offset : token.offset + self.page_size]
        parts = ["<ListRecords>"]
        parts.extend(_record(self.records[i]) for i in page if i in self.records)
        following = token.offset + len(page)
        attributes = {"completeListSize": str(len(token.identifiers)), "cursor": str(token.offset)}
        attributes.update(self.resumption_attributes)
        written = "".join(f" {name}={quoteattr(value)}" for name, value in attributes.items())
        if self._cycle is not None:
            first, length = self._cycle
            number = token.offset // self.page_size
            following = first if number >= first + length - 1 else number + 1
            name = f"page-{following}"
            self._tokens[name] = _Token(token.identifiers, following * self.page_size)
            parts.append(f"<resumptionToken{written}>{name}</resumptionToken>")
        elif following < len(token.identifiers):
            name = uuid.uuid4().hex
            self._tokens[name] = _Token(token.identifiers, following)
            parts.append(f"<resumptionToken{written}>{name}</resumptionToken>")
        elif token.offset > 0:
            parts.append(f"<resumptionToken{written}/>")
        parts.append("</ListRecords>")
        return "".join(parts)

    def _envelope(self, query: dict[str, str], body: str) -> str:
        attributes = "".join(f" {k}={quoteattr(v)}" for k, v in query.items())
        return (
            '<?xml version="1.0" encoding="UTF-8"?>'
            f'<OAI-PMH xmlns="{OAI}" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">'
            "<responseDate>2026-11-21T00:00:00Z</responseDate>"
            f"<request{attributes}>{escape(self.url)}</request>{body}</OAI-PMH>"
        )


def _stamp(value: str) -> str:
    """Day granularity compares as the start of that day."""
    return value if "T" in value else f"{value}T00:00:00Z"


def _error(code: str, message: str) -> str:
    return f"<error code={quoteattr(code)}>{escape(message)}</error>"


def _record(record: Record) -> str:
    status = ' status="deleted"' if record.deleted else ""
    sets = "".join(f"<setSpec>{escape(s)}</setSpec>" for s in record.sets)
    header = (
        f"<header{status}><identifier>{escape(record.identifier)}</identifier>"
        f"<datestamp>{record.datestamp}</datestamp>{sets}</header>"
    )
    if record.deleted:
        return f"<record>{header}</record>"
    elements = "".join(
        f"<dc:{name}>{escape(value)}</dc:{name}>" for name, values in record.dc.items() for value in values
    )
    metadata = f'<metadata><oai_dc:dc xmlns:oai_dc="{OAI_DC}" xmlns:dc="{DC}">{elements}</oai_dc:dc></metadata>'
    return f"<record>{header}{metadata}</record>"


def redirect(location: str, status: int = 302, *, times: int | None = None) -> Callable[[BaseHTTPRequestHandler], None]:
    """Answer with a redirect to ``location`` (``{query}`` in it: the request's query string),
    ``times`` times (None: always), then serve the protocol again."""
    left = [times]

    def answer(handler: BaseHTTPRequestHandler) -> None:
        if left[0] is not None:
            left[0] -= 1
            if left[0] <= 0:
                handler.repository.hostile(None)  # type: ignore[attr-defined]
        handler.send_response(status)
        handler.send_header("Location", location.format(query=urlsplit(handler.path).query))
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    return answer


def endless(*, declared: bool) -> Callable[[BaseHTTPRequestHandler], None]:
    """Answer 200 with a body that never ends (an ``<identifier>`` of unbounded length),
    sent as fast as it is read; ``declared`` says so in Content-Length (10 GB), else the answer
    is delimited by the connection's close, as HTTP/1.0 allows."""

    def answer(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/xml; charset=utf-8")
        if declared:
            handler.send_header("Content-Length", str(10 * 1000**3))
        handler.end_headers()
        handler.wfile.write(
            f'<?xml version="1.0"?><OAI-PMH xmlns="{OAI}"><ListRecords><record><header><identifier>'.encode()
        )
        piece = b"x" * 65536
        stop = handler.repository.stopping  # type: ignore[attr-defined]
        while not stop.is_set():
            handler.wfile.write(piece)

    return answer


def drip(every: float) -> Callable[[BaseHTTPRequestHandler], None]:
    """Answer 200 and then one byte every ``every`` seconds, for ever: no read ever times out."""

    def answer(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/xml; charset=utf-8")
        handler.send_header("Content-Length", "1000000")
        handler.end_headers()
        handler.wfile.flush()
        stop = handler.repository.stopping  # type: ignore[attr-defined]
        while not stop.wait(every):
            handler.wfile.write(b" ")
            handler.wfile.flush()

    return answer


def status(
    code: int, body: bytes, content_type: str | None = "text/html", *, length: str | None = None
) -> Callable[[BaseHTTPRequestHandler], None]:
    """Answer every request with HTTP ``code`` and ``body`` (a proxy's error page, say), its
    Content-Length ``length`` (any text) or else the body's."""

    def answer(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(code)
        if content_type is not None:
            handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", _header_text(str(len(body)) if length is None else length))
        handler.end_headers()
        handler.wfile.write(body)

    return answer


def _header_text(value: str) -> str:
    """``value`` as http.server writes headers (Latin-1): as itself when Latin-1 holds it ("²"
    is one byte, read back as "²"), else as its UTF-8 bytes."""
    try:
        value.encode("latin-1")
    except UnicodeEncodeError:
        return value.encode("utf-8").decode("latin-1")
    return value


class _Handler(BaseHTTPRequestHandler):
    repository: Any

    def do_GET(self) -> None:
        behaviour = self.repository.misbehaving()
        if behaviour is not None:
            self.repository.requests.append({"hostile": self.path})
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the harvester gave up
                behaviour(self)
            return
        query = {k: v[0] for k, v in parse_qs(urlsplit(self.path).query, keep_blank_values=True).items()}
        status, headers, body = self.repository.answer(query)
        data = body.encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "text/xml; charset=utf-8" if body.startswith("<?xml") else "text/plain")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, _header_text(value))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
        """Quiet: tests read :attr:`OaiPmhServer.requests` instead."""
