"""Watching a deployed stack's functions from outside: their CloudWatch logs (START / END /
REPORT lines as Lambda writes them), waiting for what they do, and a network fault to put between
a function and one service (``tests/integration/test_deployed_stack.py``)."""

from __future__ import annotations

import contextlib
import re
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

_REPORT = re.compile(r"^REPORT RequestId: (\S+)\t(.*)$")
_FIELD = re.compile(r"([A-Za-z ]+): ([^\t]+)")

T = TypeVar("T")


def wait_for(what: str, found: Callable[[], T | None], timeout: float = 240, interval: float = 2) -> T:
    """``found()`` once it returns something truthy; fails naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = found()
        if value:
            return value
        assert time.monotonic() < deadline, f"not within {timeout:.0f} s: {what}"
        time.sleep(interval)


@dataclass
class Report:
    """One REPORT line: an invocation as Lambda accounts for it."""

    request_id: str
    fields: dict[str, str]

    @property
    def init_ms(self) -> float | None:
        value = self.fields.get("Init Duration")
        return float(value.removesuffix(" ms")) if value else None

    @property
    def status(self) -> str | None:
        return self.fields.get("Status")


@dataclass
class FunctionLog:
    """Everything a function's log group holds, read at one moment."""

    function: str
    lines: list[str] = field(default_factory=list)

    @classmethod
    def read(cls, logs: Any, function: str) -> FunctionLog:
        group = f"/aws/lambda/{function}"
        lines: list[str] = []
        try:
            for page in logs.get_paginator("filter_log_events").paginate(logGroupName=group):
                lines += [line for event in page["events"] for line in event["message"].splitlines()]
        except logs.exceptions.ResourceNotFoundException:
            pass
        return cls(function, lines)

    @property
    def reports(self) -> list[Report]:
        found = []
        for line in self.lines:
            match = _REPORT.match(line)
            if match:
                fields = {k.strip(): v.strip() for k, v in _FIELD.findall(match.group(2))}
                found.append(Report(match.group(1), fields))
        return found

    @property
    def starts(self) -> int:
        return sum(1 for line in self.lines if line.startswith("START RequestId: "))

    def containing(self, text: str) -> list[str]:
        return [line for line in self.lines if text in line]

    def summary(self) -> str:
        reports = self.reports
        inits = [r.init_ms for r in reports if r.init_ms is not None]
        statuses = sorted({r.status for r in reports if r.status})
        return (
            f"{self.function}: {len(reports)} invocations, {len(inits)} cold starts, Init Duration "
            + (", ".join(f"{ms:.0f}" for ms in inits) + " ms" if inits else "none")
            + (f"; not ok: {statuses}" if statuses else "")
        )


class HangingProxy:
    """A loopback TCP proxy to ``target`` that holds its first ``hang`` connections open without
    ever answering (a service that stopped responding), then forwards the rest."""

    def __init__(self, target: tuple[str, int], hang: int = 1) -> None:
        self.target = target
        self.hang = hang
        self.accepted = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self.held: list[socket.socket] = []
        self.stopped = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _serve(self) -> None:
        while not self.stopped.is_set():
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            self.accepted += 1
            if self.accepted <= self.hang:
                self.held.append(connection)  # read nothing, answer nothing
                continue
            threading.Thread(target=self._forward, args=(connection,), daemon=True).start()

    def _forward(self, client: socket.socket) -> None:
        with client, socket.create_connection(self.target) as upstream:

            def pipe(source: socket.socket, sink: socket.socket) -> None:
                try:
                    while data := source.recv(65536):
                        sink.sendall(data)
                except OSError:
                    pass
                finally:
                    with_shutdown(sink)

            other = threading.Thread(target=pipe, args=(upstream, client), daemon=True)
            other.start()
            pipe(client, upstream)
            other.join(60)

    def close(self) -> None:
        self.stopped.set()
        self.listener.close()
        for connection in self.held:
            connection.close()


def with_shutdown(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_WR)
