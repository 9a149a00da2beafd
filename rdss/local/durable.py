"""The emulator keeps what it acknowledged: moto's server behind a write-ahead journal.

moto keeps its state in memory only. :class:`DurableApp` wraps moto's WSGI application: a request
that can change state (:func:`mutating`) is applied under one lock, appended to the journal
(:mod:`rdss.local.journal`) and synced to disk before its answer leaves, so whatever a client was
told succeeded survives a SIGKILL or a power cut. At start :meth:`DurableApp.recover` loads the
last snapshot and replays the journal's entries after it into the fresh server, each under the
seed and clock it first ran with (:mod:`rdss.local.determinism`), so identifiers, sequence
numbers and arrival times come back as they were. Every ``compact_every`` entries (and at a clean
stop) a snapshot (:mod:`rdss.local.snapshot`) takes the journal's place.

Reads are not journalled: they change nothing. An SQS long poll is made of short polls here,
one at the start and one after each change until a message comes or the wait ends (each
journalled, the wait outside the lock), so a consumer waiting on a queue never holds writers
back. Without a state directory nothing is journalled, and changes are only counted.

:class:`Changes` is what the local runtime waits on when idle: a counter of applied changes, so a
pass over its pollers runs when something was written, not on a timer.
"""

from __future__ import annotations

import io
import logging
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlencode

import orjson

from rdss.local import journal, limits, snapshot
from rdss.local.damage import journal_damaged, snapshot_damaged
from rdss.local.determinism import install, reproducible
from rdss.local.journal import Entry, Journal
from rdss.local.state import StateDirectory

_log = logging.getLogger(__name__)

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

#: Actions (the X-Amz-Target's operation, or a query protocol's Action) that only read.
_READS = ("Get", "List", "Describe", "Query", "Scan", "BatchGet", "TransactGet", "Head", "Lookup", "Check")
_SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


class Changes:
    """A counter of state changes, and a way to wait for the next one."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self.version = 0
        self._wakes = 0

    def bump(self) -> int:
        with self._condition:
            self.version += 1
            self._condition.notify_all()
            return self.version

    def wait(self, seen: int, timeout: float) -> bool:
        """Until the counter passes ``seen`` (True), :meth:`wake` is called or ``timeout``
        seconds pass (False)."""
        with self._condition:
            wakes = self._wakes
            return self._condition.wait_for(lambda: self.version != seen or self._wakes != wakes, timeout)

    def wake(self) -> None:
        """Wake every waiter now (a runtime stopping)."""
        with self._condition:
            self._wakes += 1
            self._condition.notify_all()


@dataclass(frozen=True)
class Recovery:
    """What a start found in the state directory."""

    snapshot_index: int
    replayed: int
    #: Replayed requests that answered otherwise than the first time (expected: 0).
    diverged: int
    #: Bytes of an unfinished last frame cut from the journal (a crash mid-write: that request
    #: was never answered).
    torn_bytes: int
    seconds: float
    #: What ``--salvage`` dropped (the line logged), when it had to.
    salvaged: str | None = None


@dataclass(frozen=True)
class SnapshotTiming:
    """The last snapshot: how long writers waited (the state pickled), how long it took in all
    (written and synced too), its size."""

    paused: float
    seconds: float
    size: int
    index: int


def action(environ: dict[str, Any], body: bytes) -> str | None:
    """The API operation a request names, when its protocol names one in the request: the
    JSON protocols' ``X-Amz-Target`` (``Kinesis_20131202.PutRecords``) or the query protocol's
    ``Action``. None for REST APIs (S3), which say it with the method."""
    target = environ.get("HTTP_X_AMZ_TARGET")
    if target:
        return str(target).rsplit(".", 1)[-1]
    query = parse_qs(str(environ.get("QUERY_STRING", "")))
    if "Action" in query:
        return query["Action"][0]
    if "x-www-form-urlencoded" in str(environ.get("CONTENT_TYPE", "")):
        form = parse_qs(body.decode("latin-1"))
        if "Action" in form:
            return form["Action"][0]
    return None


def mutating(environ: dict[str, Any], body: bytes) -> bool:
    """Whether a request may change the emulator's state (and so is journalled)."""
    if environ.get("REQUEST_METHOD", "GET") in _SAFE_METHODS:
        return False
    name = action(environ, body)
    return name is None or not name.startswith(_READS)


class DurableApp:
    """moto's WSGI app, with every state change journalled before it is answered."""

    def __init__(
        self, app: WSGIApp, state: StateDirectory | None = None, *, compact_every: int = 5000, salvage: bool = False
    ) -> None:
        install()  # before the first backend is made, so that every one is made alike (determinism)
        self.app = app
        self.state = state
        self.changes = Changes()
        self.compact_every = compact_every
        self.salvage = salvage
        self.snapshots = 0
        self.last_snapshot: SnapshotTiming | None = None
        self._lock = threading.Lock()
        self._compacting = threading.Lock()
        self._index = 0
        self._journal: Journal | None = None
        self._compact_due = threading.Event()
        #: Journal entries at which the compactor is woken next (later after a failed snapshot).
        self._compact_at = compact_every
        self._closed = False
        self._failed = ""

    # -- start ----------------------------------------------------------------------------------
    def recover(self) -> Recovery:
        """Load the snapshot and replay the journal after it; then open the journal for appending.
        Runs before the server takes its first request.

        Raises:
            StateDamaged: damage before the journal's end, or a snapshot that does not verify
                (without ``salvage``); the state is left as it was.
            SnapshotError: a snapshot another moto version wrote.
        """
        started = time.monotonic()
        if self.state is None:
            return Recovery(0, 0, 0, 0, 0.0)
        files, salvaged = self.state.files, None
        try:
            covered = snapshot.load(files, self.state.key)
        except snapshot.SnapshotDamaged as error:
            salvaged = snapshot_damaged(self.state, error, salvaging=self.salvage)
            _log.warning("%s", salvaged)
            covered = 0
        found = journal.scan(files, covered=covered, committed=journal.read_committed(files))
        if found.damage is not None:
            salvaged = journal_damaged(self.state, found.damage, end=found.end, salvaging=self.salvage)
            _log.warning("%s", salvaged)
        self._index = covered
        replayed = diverged = 0
        for entry in journal.entries(files, found.end):
            if entry.index <= covered:
                continue  # already in the snapshot (the journal was not cut after it)
            status = self._apply(entry)[0]
            replayed += 1
            if status != entry.status:
                diverged += 1
                _log.warning(
                    "replaying request %d (%s) answered %d, not %d as it first did",
                    entry.index,
                    action(entry.environ, entry.body) or entry.environ.get("REQUEST_METHOD"),
                    status,
                    entry.status,
                )
            self._index = entry.index
        # every request the journal holds is in the snapshot (a crash came between writing it and
        # cutting the journal, or the journal was cut short below it): finish that cut, so the next
        # request follows the snapshot's last one in an empty journal, not a gap after stale ones
        end = found.end if (found.last or 0) > covered else 0
        self._journal = Journal(files, end=end, last=self._index)
        self._journal.entries = found.entries if end else 0
        if found.torn:  # a crash mid-write: that request was never answered
            _log.info("cut %d bytes of an unfinished request from the end of the journal", found.torn)
        threading.Thread(target=self._compactor, name="rdss-local-compactor", daemon=True).start()
        if found.entries >= self.compact_every:
            self._compact_due.set()
        return Recovery(covered, replayed, diverged, found.torn, time.monotonic() - started, salvaged)

    # -- serving --------------------------------------------------------------------------------
    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        refused = limits.too_large(environ)  # said before reading: 100 MB are never held
        if refused is None and environ.get("REQUEST_METHOD", "GET") in _SAFE_METHODS:
            return self.app(environ, start_response)
        body = read_body(environ) if refused is None else None
        if refused is None:
            refused = limits.body_too_large(environ, None) if body is None else limits.refusal(environ, body)
        if refused is not None or body is None:  # as AWS refuses it: neither applied nor journalled
            status, headers, content = refused or limits.body_too_large(environ, None)
            start_response(status, headers)
            return [content]
        if not mutating(environ, body):
            return self.app(environ, start_response)
        captured = _captured(environ)
        wait, body = _long_poll(environ, body)
        deadline = time.monotonic() + wait
        while True:
            status, headers, content, version = self._apply_live(captured, body)
            remaining = deadline - time.monotonic()
            if remaining <= 0 or b'"Messages"' in content or b"<Message>" in content:
                break
            self.changes.wait(version, remaining)  # a message can only come with a change
        start_response(status, headers)
        return [content]

    def _apply_live(self, environ: dict[str, Any], body: bytes) -> tuple[str, list[tuple[str, str]], bytes, int]:
        """Apply, journal, sync; returns the answer and the change counter after this change."""
        with self._lock:
            if self._closed or self._failed:
                return (*_unavailable(self._failed or "the emulator is stopping"), self.changes.version)
            self._index += 1
            moment = time.time()
            code, status, headers, content = self._apply(Entry(self._index, moment, 0, environ, body))
            index = self._index
            try:
                if self._journal is not None:
                    self._journal.append(Entry(index, moment, code, environ, body))
                    if self._journal.entries >= self._compact_at:
                        self._compact_due.set()
            except OSError as error:
                return (*self._fail(error), self.changes.version)
            version = self.changes.bump()
        try:
            if self._journal is not None:
                self._journal.sync(index)
        except OSError as error:
            with self._lock:
                return (*self._fail(error), self.changes.version)
        return status, headers, content, version

    def _fail(self, error: OSError) -> tuple[str, list[tuple[str, str]], bytes]:
        """The journal cannot be written: nothing more is acknowledged (the change just applied
        is answered as failed, and every change after it refused), rather than acknowledge what
        a restart would not have."""
        if not self._failed:
            self._failed = f"the journal cannot be written ({error.strerror or error}): restart rdss local up"
            _log.error("%s; every change is refused from now on", self._failed)
        return _unavailable(self._failed)

    def _apply(self, entry: Entry) -> tuple[int, str, list[tuple[str, str]], bytes]:
        """Run one request through moto, pinned to its entry's seed and moment."""
        environ = {
            **entry.environ,
            "wsgi.input": io.BytesIO(entry.body),
            "wsgi.errors": sys.stderr,
            "wsgi.version": (1, 0),
            "wsgi.url_scheme": entry.environ.get("rdss.url_scheme", "http"),
            "wsgi.multithread": True,
            "wsgi.multiprocess": False,
            "wsgi.run_once": False,
            "CONTENT_LENGTH": str(len(entry.body)),
        }
        answer: dict[str, Any] = {}

        def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable[..., Any]:
            answer.update(status=status, headers=headers)
            return lambda data: None

        with reproducible(entry.index, entry.moment):
            try:
                iterable = self.app(environ, start_response)
                try:
                    content = b"".join(iterable)
                finally:
                    close = getattr(iterable, "close", None)
                    if close is not None:
                        close()
            except Exception:  # journalled all the same: it may have changed state before failing
                _log.exception("the emulator failed on request %d", entry.index)
                answer.clear()
                content = b"internal error"
        status = answer.get("status", "500 INTERNAL SERVER ERROR")
        return int(status.split(" ", 1)[0]), status, list(answer.get("headers", [])), content

    # -- snapshots ------------------------------------------------------------------------------
    def compact(self, *, due: bool = False) -> bool:
        """Snapshot the state now and let the journal go of what it covers; False when there was
        nothing to do (with ``due``, the compactor's: when the journal is still short of its
        threshold - a snapshot just taken). Writers wait only while the state is pickled: the
        snapshot is written and synced while they carry on, and the journal keeps what they add
        meanwhile.

        Raises:
            Exception: the snapshot could not be made or written (nothing changed: the journal
                still holds everything).
        """
        if self.state is None or self._journal is None:
            return False
        files, key = self.state.files, self.state.key
        with self._compacting:
            with self._lock:
                if self._closed or (not self._journal.entries and files.exists(snapshot.SNAPSHOT)):
                    return False
                if due and self._journal.entries < self._compact_at:
                    return False
                started = time.monotonic()
                index, through, entries = self._index, self._journal.size, self._journal.entries
                dumped = snapshot.dump(index)
                paused = time.monotonic() - started
            size = snapshot.write(files, key, dumped)
            with self._lock:
                self._journal.drop_through(through, self._journal.entries - entries)
                self._compact_at = self.compact_every
            self.snapshots += 1
            self.last_snapshot = SnapshotTiming(paused, time.monotonic() - started, size, index)
        _log.info(
            "state snapshot at request %d: %d bytes in %.2f s (writers waited %.2f s)",
            index,
            size,
            self.last_snapshot.seconds,
            paused,
        )
        return True

    def _compactor(self) -> None:
        while True:
            self._compact_due.wait()
            self._compact_due.clear()
            if self._closed:
                return
            try:
                self.compact(due=True)
            except Exception as error:  # the journal still holds everything
                with self._lock:  # tried again after as many entries more, not on every write
                    self._compact_at = (self._journal.entries if self._journal else 0) + self.compact_every
                _log.error(
                    "could not snapshot the emulator's state (%s: %s); the journal keeps it, and a snapshot is tried "
                    "again after %d more requests",
                    type(error).__name__,
                    error,
                    self.compact_every,
                )

    def close(self, *, snapshot_state: bool = True) -> None:
        """Stop taking changes; snapshot (a clean stop starts fast next time) and close."""
        if self._journal is None:
            return
        if snapshot_state:
            try:
                self.compact()
            except Exception as error:  # one line: nothing is lost, the next start replays the journal
                _log.error(
                    "could not snapshot the emulator's state (%s: %s); the journal keeps it",
                    type(error).__name__,
                    error,
                )
        with self._lock:
            self._closed = True
            self._journal.close()
        self._compact_due.set()


def read_body(environ: dict[str, Any]) -> bytes | None:
    """The request's bytes, read whole (chunked or not), and the environ set to read them again;
    None when a chunked body runs over the emulator's bound (not read further)."""
    stream = environ["wsgi.input"]
    if environ.get("wsgi.input_terminated"):  # chunked: the server ends the stream
        body: bytes = stream.read(limits.MAX_BODY + 1)
        if len(body) > limits.MAX_BODY:
            return None
    else:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = stream.read(length) if length > 0 else b""
    environ.pop("HTTP_TRANSFER_ENCODING", None)
    environ.pop("wsgi.input_terminated", None)
    environ["CONTENT_LENGTH"] = str(len(body))
    environ["wsgi.input"] = io.BytesIO(body)
    return body


def _captured(environ: dict[str, Any]) -> dict[str, Any]:
    """What of a request's environ a replay needs: every plain entry (method, path, query,
    headers, moto's preserved header names), not the server's objects."""
    kept: dict[str, Any] = {"rdss.url_scheme": environ.get("wsgi.url_scheme", "http")}
    for key, value in environ.items():
        if key.startswith(("wsgi.", "werkzeug.")):
            continue
        if isinstance(value, str | int | float | bool) or (
            isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
        ):
            kept[key] = value
    return kept


def _long_poll(environ: dict[str, Any], body: bytes) -> tuple[float, bytes]:
    """For an SQS ReceiveMessage: how long it may wait, and the request as one short poll
    (``WaitTimeSeconds`` 0, also when it named none and the queue has a default wait: that
    default is not honoured here). Anything else: (0, the body unchanged)."""
    if action(environ, body) != "ReceiveMessage":
        return 0.0, body
    try:
        if body.startswith(b"{"):
            request = orjson.loads(body)
            wait = float(request.get("WaitTimeSeconds") or 0)
            request["WaitTimeSeconds"] = 0
            return wait, orjson.dumps(request)
        form = parse_qs(body.decode("latin-1"), keep_blank_values=True)
        wait = float(form.get("WaitTimeSeconds", ["0"])[0] or 0)
        form["WaitTimeSeconds"] = ["0"]
        return wait, urlencode(form, doseq=True).encode("latin-1")
    except (orjson.JSONDecodeError, AttributeError, TypeError, ValueError):
        return 0.0, body  # malformed: moto answers it as it is


def _unavailable(reason: str) -> tuple[str, list[tuple[str, str]], bytes]:
    return "503 SERVICE UNAVAILABLE", [("Content-Type", "text/plain")], reason.encode()
