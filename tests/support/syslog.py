"""A fake local syslog service (a unix datagram socket) and a strict RFC 5424 parser, to check
the lines the applications write against the spec's Logging section."""

from __future__ import annotations

import re
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

# RFC 5424 section 6, restricted as the spec says: T and Z upper case, the T required, UTC
# ("Z"), no leap second (seconds 00-59).
_LINE = re.compile(
    r"<(?P<pri>\d{1,3})>(?P<version>1) "
    r"(?P<timestamp>\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:(?P<second>\d{2})(?:\.\d{1,6})?Z) "
    r"(?P<hostname>[!-~]{1,255}) (?P<app>[!-~]{1,48}) (?P<procid>[!-~]{1,128}) (?P<msgid>[!-~]{1,32}) "
    r"(?P<sd>-|(?:\[[^\]]*\])+)(?: (?P<msg>.*))?\Z",
    re.DOTALL,
)


@dataclass(frozen=True)
class SyslogLine:
    facility: int
    severity: int
    timestamp: str
    hostname: str
    app: str
    procid: str
    msg: str


def parse(line: str) -> SyslogLine:
    """The fields of one RFC 5424 line, or AssertionError saying what is wrong with it."""
    match = _LINE.match(line)
    assert match is not None, f"not an RFC 5424 line: {line!r}"
    pri = int(match["pri"])
    assert 128 <= pri <= 191, f"PRI {pri} is not local0..local7"
    assert int(match["second"]) < 60, "leap second"
    assert re.search(r"-\d+\.\d+\.\d+", match["app"]), f"APP-NAME {match['app']!r} carries no version"
    assert match["procid"].isdigit(), f"PROCID {match['procid']!r} is not a PID"
    return SyslogLine(
        pri // 8, pri % 8, match["timestamp"], match["hostname"], match["app"], match["procid"], match["msg"] or ""
    )


class FakeSyslog:
    """A unix datagram socket standing in for ``/dev/log``; each datagram is one line. A
    thread reads them as they come, as a syslog daemon would (a full socket blocks senders)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.socket.bind(str(path))
        self.socket.settimeout(0.1)
        self.received: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, name="fake-syslog", daemon=True)
        self._thread.start()

    @property
    def address(self) -> str:
        return f"unix:{self.path}"

    def _read(self) -> None:
        while not self._stop.is_set():
            try:
                data = self.socket.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                return
            self.received.append(data.decode("utf-8"))

    def lines(self) -> list[str]:
        """Every line received so far (after a moment for those in flight)."""
        time.sleep(0.3)
        return list(self.received)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.socket.close()


@contextmanager
def fake_syslog() -> Iterator[FakeSyslog]:
    """A fake syslog socket in a short-named directory (unix socket paths hold 107 bytes)."""
    with tempfile.TemporaryDirectory(prefix="syslog-") as directory:
        server = FakeSyslog(Path(directory) / "log")
        try:
            yield server
        finally:
            server.close()
