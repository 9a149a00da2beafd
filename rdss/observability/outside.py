"""One logging set-up for everything that sends or receives messages outside Lambda: the
gateway SDK, the CLI's services and the local runtime.

The spec (Logging): applications write to the local syslog service, RFC 5424 lines with a
facility of local0-local7, an APP-NAME carrying the application's version, the PID, and every
message sent and received logged with its severity in brackets (``[INFO] Message sent``).
:func:`configure` attaches one handler to the root logger in one of three formats:

``syslog``  RFC 5424 lines (:mod:`rdss.observability.syslog`) to the syslog socket: ``/dev/log``, or
            ``RDSS_SYSLOG_ADDRESS`` = ``unix:PATH`` | ``udp:HOST:PORT`` | ``tcp:HOST:PORT``;
            facility ``RDSS_SYSLOG_FACILITY`` (``local0`` by default).
``json``    one JSON object per line on standard error (for log shippers).
``text``    one readable line per record on standard error.

``RDSS_LOG_FORMAT`` and ``RDSS_LOG_LEVEL`` (or the CLI's ``--log-format``, ``--log-level``,
``-v``) choose. With neither, the format is ``syslog`` when the socket is there; on a machine
without one the lines go to standard error as ``text``, and only warnings and errors, so an
interactive command stays quiet.

A line about one message carries its fields as the call's ``extra`` (:func:`message_fields`):
messageId, messageType, messageClass, channel and, for refusals and moves, errorCode; each
format renders them (``key=value`` after the text; JSON members).
"""

from __future__ import annotations

import logging
import os
import socket
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import IO, Any

import orjson

from rdss import __version__
from rdss.host.display import redact, safe
from rdss.model import timestamps
from rdss.observability.fields import message_fields as message_fields  # here too: what loggers outside Lambda use
from rdss.observability.syslog import FIELDS, LOCAL0, SyslogFormatter, SyslogHandler, render_fields

FORMATS = ("syslog", "json", "text")
FACILITIES = {f"local{n}": LOCAL0 + n for n in range(8)}
DEFAULT_ADDRESS = "/dev/log"

#: Marks the handler :func:`configure` installed, so configuring again replaces it.
_OURS = "_rdss_logs"


@dataclass(frozen=True)
class LogSettings:
    """How to log; None means "not chosen" (see the module docstring for the defaults)."""

    format: str | None = None
    level: int | None = None
    address: str = DEFAULT_ADDRESS
    facility: int = LOCAL0

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> LogSettings:
        """Settings from ``RDSS_LOG_FORMAT``, ``RDSS_LOG_LEVEL``, ``RDSS_SYSLOG_ADDRESS`` and
        ``RDSS_SYSLOG_FACILITY``.

        Raises:
            ValueError: a variable holds something it cannot (the message names it).
        """
        env = os.environ if environ is None else environ
        log_format = env.get("RDSS_LOG_FORMAT") or None
        if log_format is not None and log_format not in FORMATS:
            raise ValueError(f"RDSS_LOG_FORMAT must be one of {', '.join(FORMATS)}, not {log_format!r}")
        level = parse_level(env["RDSS_LOG_LEVEL"], "RDSS_LOG_LEVEL") if env.get("RDSS_LOG_LEVEL") else None
        facility_name = env.get("RDSS_SYSLOG_FACILITY") or "local0"
        if facility_name not in FACILITIES:
            raise ValueError(f"RDSS_SYSLOG_FACILITY must be local0..local7, not {facility_name!r}")
        address = env.get("RDSS_SYSLOG_ADDRESS") or DEFAULT_ADDRESS
        parse_address(address)
        return cls(log_format, level, address, FACILITIES[facility_name])


def parse_level(text: str, what: str = "level") -> int:
    """A level by name (``info``, ``WARNING``) or number.

    Raises:
        ValueError: not a level.
    """
    if text.isdigit():
        return int(text)
    level = logging.getLevelName(text.upper())
    if not isinstance(level, int):
        raise ValueError(f"{what} must be DEBUG, INFO, WARNING, ERROR or CRITICAL, not {text!r}")
    return level


def parse_address(address: str) -> tuple[str | tuple[str, int], socket.SocketKind | None]:
    """``unix:PATH`` (or a bare path), ``udp:HOST:PORT``, ``tcp:HOST:PORT`` -> (address, socket
    type; None for a unix socket, whose type the handler finds out).

    Raises:
        ValueError: malformed.
    """
    kind, _, rest = address.partition(":")
    if kind in ("udp", "tcp"):
        host, _, port = rest.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"RDSS_SYSLOG_ADDRESS {address!r}: expected {kind}:HOST:PORT")
        return (host, int(port)), socket.SOCK_DGRAM if kind == "udp" else socket.SOCK_STREAM
    path = rest if kind == "unix" else address
    if not path.startswith("/"):
        raise ValueError(f"RDSS_SYSLOG_ADDRESS {address!r}: expected unix:PATH, udp:HOST:PORT or tcp:HOST:PORT")
    return path, None


def configure(
    application: str,
    *,
    version: str = __version__,
    settings: LogSettings | None = None,
    stream: IO[str] | None = None,
) -> logging.Handler:
    """Send the process's log records where ``settings`` say (default: from the environment).

    Args:
        application: the application's name; APP-NAME is ``<application>-<version>``.
        version: the application's version.
        stream: where ``json`` and ``text`` lines go (default: standard error).

    Returns the handler installed on the root logger (replacing one an earlier call installed).

    Raises:
        ValueError: the environment's settings are malformed.
    """
    settings = settings or LogSettings.from_environment()
    handler: logging.Handler
    log_format, level = settings.format, settings.level
    if log_format in (None, "syslog"):
        handler_or_none = _syslog_handler(settings, application, version)
        if handler_or_none is not None:
            handler, log_format = handler_or_none, "syslog"
        elif log_format == "syslog":  # asked for, but no socket: the same lines on standard error
            handler = _stream_handler(stream)
            handler.setFormatter(SyslogFormatter(application, version, facility=settings.facility))
        else:
            log_format, level = "text", level if level is not None else logging.WARNING
    if log_format in ("json", "text"):
        handler = _stream_handler(stream)
        formatter = JSONFormatter if log_format == "json" else TextFormatter
        handler.setFormatter(formatter(application, version))
    handler.addFilter(_library_failures_in_one_line)
    setattr(handler, _OURS, True)
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, _OURS, False)]:
        root.removeHandler(old)
        old.close()
    root.addHandler(handler)
    root.setLevel(logging.INFO if level is None else level)
    logging.getLogger("pika").setLevel(logging.CRITICAL)  # its failures are reported as ours
    logging.getLogger("botocore").setLevel(max(logging.WARNING, root.level))
    return handler


#: Libraries that log a failure with its traceback before raising it to us (botocore's credential
#: refresh, for one): the exception we report says it; their line keeps one line of it.
_LIBRARIES = ("botocore", "boto3", "urllib3", "pika", "s3transfer")


def _library_failures_in_one_line(record: logging.LogRecord) -> bool:
    """A library's record with a traceback becomes one line naming the exception."""
    if record.exc_info and record.exc_info[1] is not None and record.name.split(".")[0] in _LIBRARIES:
        error = record.exc_info[1]
        record.msg = f"{record.getMessage()} ({type(error).__name__}: {' '.join(str(error).split())})"
        record.args = ()
        record.exc_info = None
        record.exc_text = None
    return True


class _StandardError(logging.Handler):
    """Writes to whatever ``sys.stderr`` is when a record comes (tests and tools swap it)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
            sys.stderr.flush()
        except Exception:
            self.handleError(record)


def _stream_handler(stream: IO[str] | None) -> logging.Handler:
    return logging.StreamHandler(stream) if stream is not None else _StandardError()


def adopt(*names: str) -> None:
    """Send these loggers' records through the set-up too: their own handlers are dropped and
    they propagate to the root logger. ``rdss local up`` adopts the processors' Powertools logger,
    which in Lambda writes JSON to standard output."""
    for name in names:
        adopted = logging.getLogger(name)
        for handler in list(adopted.handlers):
            adopted.removeHandler(handler)
        adopted.propagate = True


def _syslog_handler(settings: LogSettings, application: str, version: str) -> logging.Handler | None:
    address, socktype = parse_address(settings.address)
    if isinstance(address, str) and not os.path.exists(address):
        return None  # no syslog service here (the handler would only find out at the first line)
    try:
        handler = SyslogHandler(address=address, facility=settings.facility, socktype=socktype)
    except OSError:
        return None
    handler.setFormatter(SyslogFormatter(application, version, facility=settings.facility))
    return handler


class TextFormatter(logging.Formatter):
    """``2017-03-01T13:14:15.000Z msgsender-1.2.0[848221] [INFO] Message sent messageId=...``"""

    def __init__(self, application: str, version: str) -> None:
        super().__init__()
        self.app = f"{application}-{version}"

    def format(self, record: logging.LogRecord) -> str:
        stamp = _timestamp(record)
        message = safe(record.getMessage())  # one line, no terminal escapes, no password
        text = f"{stamp} {self.app}[{record.process}] [{record.levelname}] {message}{render_fields(record)}"
        if record.exc_info:
            text += "\n" + redact(self.formatException(record.exc_info))
        return text


class JSONFormatter(logging.Formatter):
    """One JSON object per record: timestamp, level, application, pid, logger, message, and
    the message's fields as members."""

    def __init__(self, application: str, version: str) -> None:
        super().__init__()
        self.app = f"{application}-{version}"
        self.hostname = socket.gethostname()

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "timestamp": _timestamp(record),
            "level": record.levelname,
            "application": self.app,
            "hostname": self.hostname,
            "pid": record.process,
            "logger": record.name,
            "message": redact(record.getMessage()),  # JSON escapes control characters itself
        }
        for name in FIELDS:
            value = record.__dict__.get(name)
            if value is not None:
                line[name] = value
        if record.exc_info and record.exc_info[1] is not None:
            line["exception"] = redact(self.formatException(record.exc_info))
        return orjson.dumps(line, default=str).decode()


def _timestamp(record: logging.LogRecord) -> str:
    return timestamps.format(datetime.fromtimestamp(record.created, UTC))


__all__ = [
    "FACILITIES",
    "FORMATS",
    "JSONFormatter",
    "LogSettings",
    "TextFormatter",
    "adopt",
    "configure",
    "message_fields",
    "parse_address",
    "parse_level",
]
