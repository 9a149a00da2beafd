"""Publishing with publisher confirms, many messages in flight, from the calling thread."""

from __future__ import annotations

import contextlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pika
import pika.exceptions
from pika.adapters.select_connection import IOLoop

#: The result code of a publish lost with its connection (retried).
TRANSIENT = "CONNECTION"


@dataclass(frozen=True, slots=True)
class Publish:
    exchange: str
    routing_key: str
    body: bytes
    properties: pika.BasicProperties
    mandatory: bool = True


@dataclass(frozen=True, slots=True)
class Result:
    #: None: confirmed. Else NO_ROUTE (permanent), or a transient code (connection, nack, timeout).
    code: str | None = None
    message: str = ""

    @property
    def transient(self) -> bool:
        return self.code is not None and self.code != "NO_ROUTE"


class ConfirmingPublisher:
    """Publisher confirms with up to ``window`` messages in flight, synchronously.

    A pika ``SelectConnection`` whose I/O loop is driven from the calling thread (as pika's own
    BlockingConnection drives its loop), so many publishes share one round trip and RabbitMQ
    batches their fsyncs, where a blocking channel waits for one confirm at a time. The
    connection is opened on first use and again after it is lost; :meth:`publish` never raises
    for a broker failure, it reports it per message.
    """

    def __init__(self, parameters: pika.URLParameters, *, timeout: float = 30.0, window: int = 2000) -> None:
        self.parameters = parameters
        self.timeout = timeout
        self.window = window
        self._lock = threading.Lock()
        self._ioloop: IOLoop | None = None
        self._connection: Any = None
        self._channel: Any = None
        self._ready = False
        self._failure: str | None = None
        self._tag = 0
        self._outstanding: OrderedDict[int, int] = OrderedDict()
        self._results: dict[int, Result] = {}
        self._returned: set[int] = set()
        self._routes: dict[tuple[str, str, str], list[int]] = {}
        #: Connections opened so far (the first included), for tests and benchmarks.
        self.connections = 0

    def publish(self, items: Sequence[Publish]) -> list[Result]:
        """Publish every item and wait for its confirm; one result per item, in order."""
        results: list[Result] = []
        with self._lock:
            for start in range(0, len(items), self.window):
                results.extend(self._window(items[start : start + self.window]))
        return results

    def close(self) -> None:
        with self._lock:
            self._close()

    # -- one window of publishes --------------------------------------------------------------
    def _window(self, items: Sequence[Publish]) -> list[Result]:
        try:
            self._open()
        except ConnectionError as error:
            return [Result(TRANSIENT, str(error))] * len(items)
        self._results, self._returned, self._outstanding, self._routes = {}, set(), OrderedDict(), {}
        for slot, item in enumerate(items):
            if self._failure is not None:
                break
            self._tag += 1
            self._outstanding[self._tag] = slot
            self._routes.setdefault((item.properties.message_id, item.exchange, item.routing_key), []).append(slot)
            try:
                self._channel.basic_publish(item.exchange, item.routing_key, item.body, item.properties, item.mandatory)
            except pika.exceptions.AMQPError as error:
                self._lost(f"publish failed: {error!r}")
        done = self._drive(lambda: not self._outstanding or self._failure is not None, self.timeout)
        if self._outstanding:
            reason = self._failure or f"no confirm within {self.timeout:g} s"
            for slot in self._outstanding.values():
                self._results[slot] = Result(TRANSIENT if self._failure else "CONFIRM_TIMEOUT", reason)
            self._outstanding.clear()
            if not done:  # the broker may still be applying flow control: start afresh
                self._close()
        return [
            self._results.get(slot, Result(TRANSIENT, self._failure or "not published")) for slot in range(len(items))
        ]

    # -- callbacks ------------------------------------------------------------------------------
    def _on_confirm(self, frame: Any) -> None:
        method = frame.method
        ack = isinstance(method, pika.spec.Basic.Ack)
        if method.multiple:  # tags are confirmed in order: take them from the front
            settled = []
            while self._outstanding and next(iter(self._outstanding)) <= method.delivery_tag:
                settled.append(self._outstanding.popitem(last=False)[1])
        else:
            found = self._outstanding.pop(method.delivery_tag, None)
            settled = [] if found is None else [found]
        for slot in settled:
            if slot in self._returned:
                self._results[slot] = Result("NO_ROUTE", "no queue is bound for this routing key: subscribe first")
            elif ack:
                self._results[slot] = Result()
            else:
                self._results[slot] = Result("NACK", "the broker could not take the message (basic.nack)")

    def _on_return(self, _channel: Any, method: Any, properties: Any, _body: bytes) -> None:
        # basic.return comes before the confirm of the same publish
        self._returned.update(self._routes.get((properties.message_id, method.exchange, method.routing_key), ()))

    def _lost(self, reason: str) -> None:
        if self._failure is None:
            self._failure = reason
        self._ready = False

    # -- the connection -------------------------------------------------------------------------
    def _open(self) -> None:
        if self._ready and self._connection is not None and self._connection.is_open:
            self._drive(lambda: True, 0)  # notice a connection the broker closed while we were idle
            if self._ready:
                return
        self._close()
        self._failure = None
        self._ioloop = IOLoop()
        self._ioloop.activate_poller()  # as pika's BlockingConnection does with the loop it drives
        opened: dict[str, str] = {}

        def on_channel(channel: Any) -> None:
            self._channel = channel
            channel.add_on_close_callback(lambda _ch, reason: self._lost(f"channel closed: {reason}"))
            channel.add_on_return_callback(self._on_return)
            channel.confirm_delivery(self._on_confirm, callback=lambda _frame: opened.setdefault("ok", ""))

        def on_open_error(_connection: Any, error: BaseException) -> None:
            opened["error"] = repr(error)

        self._connection = pika.SelectConnection(
            self.parameters,
            on_open_callback=lambda connection: connection.channel(on_open_callback=on_channel),
            on_open_error_callback=on_open_error,
            on_close_callback=lambda _connection, reason: self._lost(f"connection closed: {reason!r}"),
            custom_ioloop=self._ioloop,
        )
        self.connections += 1
        limit = (self.parameters.socket_timeout or 10.0) + 5.0
        self._drive(lambda: bool(opened) or self._failure is not None, limit)
        if "ok" not in opened:
            reason = opened.get("error") or self._failure or "timed out"
            self._close()
            raise ConnectionError(
                f"cannot connect to RabbitMQ at {self.parameters.host}:{self.parameters.port}: {reason}"
            )
        self._tag = 0
        self._ready = True

    def _drive(self, done: Callable[[], bool], timeout: float) -> bool:
        """Run the I/O loop until ``done()`` or ``timeout`` seconds (0: one pass); True if done."""
        assert self._ioloop is not None
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            wake = self._ioloop.call_later(max(0.0, min(remaining, 1.0)), lambda: None)
            self._ioloop.poll()
            self._ioloop.process_timeouts()
            self._ioloop.remove_timeout(wake)
            if done():
                return True
            if time.monotonic() >= deadline:
                return False

    def _close(self) -> None:
        connection, self._connection, self._channel, self._ready = self._connection, None, None, False
        if connection is not None and self._ioloop is not None and connection.is_open:
            with contextlib.suppress(pika.exceptions.AMQPError):
                connection.close()
            self._drive(lambda: bool(connection.is_closed), 5.0)
        if self._ioloop is not None:
            with contextlib.suppress(Exception):
                self._ioloop.close()
            self._ioloop = None
