"""Logging the way the spec requires: RFC 5424 syslog lines with a ``[LEVEL]`` prefix.

    <134>1 2017-03-01T13:14:15.000Z host.example.ac.uk msgsender-1.2.0 848221 - - [INFO] Message sent.

Priority is ``facility * 8 + severity`` with a facility from local0 (16) to local7 (23); the
application name carries the application's version; the process id follows. MSGID and
STRUCTURED-DATA are nil (``-``), as RFC 5424 allows.
"""

from __future__ import annotations

import json
import logging
import logging.handlers
import os
import socket
from datetime import UTC, datetime

from rdss.host.display import printable, safe

#: RFC 5424 facilities the spec lets applications use.
LOCAL0, LOCAL1, LOCAL2, LOCAL3, LOCAL4, LOCAL5, LOCAL6, LOCAL7 = range(16, 24)

#: Fields of a log line about one message (a logging call's ``extra``), rendered after the text
#: as ``key=value`` in this order.
FIELDS = (
    "messageId",
    "messageType",
    "messageClass",
    "channel",
    "sequence",
    "position",
    "total",
    "errorCode",
    "errorDescription",
    "record",
)

#: Recommended maximum length of a syslog message (RFC 5424 section 6.1).
MAX_LENGTH = 2048

_SEVERITY = (  # (lowest logging level, RFC 5424 severity)
    (logging.CRITICAL, 2),  # critical
    (logging.ERROR, 3),  # error
    (logging.WARNING, 4),  # warning
    (logging.INFO, 6),  # informational
)


def severity(level: int) -> int:
    """The RFC 5424 severity of a :mod:`logging` level (debug and below are 7)."""
    for threshold, value in _SEVERITY:
        if level >= threshold:
            return value
    return 7


class SyslogFormatter(logging.Formatter):
    """Formats records as RFC 5424 lines for the spec's log message format."""

    def __init__(
        self,
        app_name: str,
        app_version: str,
        *,
        facility: int = LOCAL0,
        hostname: str | None = None,
        max_length: int = MAX_LENGTH,
    ) -> None:
        super().__init__()
        if not LOCAL0 <= facility <= LOCAL7:
            raise ValueError(f"facility must be local0-local7 (16-23), got {facility}")
        if max_length < 480:
            raise ValueError("RFC 5424 receivers must accept 480 bytes; max_length below that loses messages")
        self.facility = facility
        # APP-NAME is at most 48 printable ASCII characters with no spaces (RFC 5424 6.2.5)
        self.app = _token(f"{app_name}-{app_version}", 48)
        self.hostname = _token(hostname or socket.getfqdn() or "-", 255)
        self.max_length = max_length

    def format(self, record: logging.LogRecord) -> str:
        priority = self.facility * 8 + severity(record.levelno)
        stamp = datetime.fromtimestamp(record.created, UTC)
        timestamp = stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{stamp.microsecond // 1000:03d}Z"
        text = record.getMessage() + render_fields(record)
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            text += f" ({type(error).__name__}: {error})"
        # one record, one line: a newline would start a new syslog message, and a control
        # character a producer wrote must not reach whoever reads the log on a terminal
        text = safe(text)
        process = record.process or os.getpid()
        line = f"<{priority}>1 {timestamp} {self.hostname} {self.app} {process} - - [{record.levelname}] {text}"
        encoded = line.encode("utf-8")
        if len(encoded) > self.max_length:
            line = encoded[: self.max_length].decode("utf-8", "ignore")
        return line


class SyslogHandler(logging.handlers.SysLogHandler):
    """Sends :class:`SyslogFormatter` lines to the local syslog service as they are.

    The standard handler prefixes its own ``<PRI>``; the formatter already wrote the whole
    RFC 5424 header, so this handler sends the line unchanged.
    """

    def emit(self, record: logging.LogRecord) -> None:
        try:
            data = self.format(record).encode("utf-8")
            sock: socket.socket = self.socket  # type: ignore[attr-defined]  # set by SysLogHandler
            if self.unixsocket:
                try:
                    sock.send(data)
                except OSError:
                    sock.close()
                    self._connect_unixsocket(self.address)  # type: ignore[attr-defined]
                    self.socket.send(data)  # type: ignore[attr-defined]
            elif self.socktype == socket.SOCK_DGRAM:
                sock.sendto(data, self.address)
            else:
                # RFC 6587 octet counting frames messages on a stream
                sock.sendall(f"{len(data)} ".encode() + data)
        except Exception:
            self.handleError(record)


def render_fields(record: logging.LogRecord) -> str:
    """`` key=value`` for each of :data:`FIELDS` the record carries (quoted when it has spaces)."""
    rendered = []
    for name in FIELDS:
        value = record.__dict__.get(name)
        if value is None:
            continue
        text = str(value)
        if not text or any(ch in text for ch in ' "=') or printable(text) != text:
            text = printable(json.dumps(text, ensure_ascii=False))  # quoted, its control characters escaped
        rendered.append(f" {name}={text}")
    return "".join(rendered)


def _token(text: str, limit: int) -> str:
    cleaned = "".join(ch if 33 <= ord(ch) <= 126 else "_" for ch in text)
    return cleaned[:limit] or "-"
