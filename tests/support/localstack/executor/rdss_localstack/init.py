"""The runtime init of one execution environment: what LocalStack's Go init does in a container,
done for a local process (standard library only; started by :mod:`rdss_localstack.executor`).

Towards LocalStack it speaks the executor endpoint protocol of ``localstack/lambda-runtime-init``
(``cmd/localstack/custom_interop.go``): ``POST /invoke`` on ``LOCALSTACK_INTEROP_PORT`` with
``{"invoke-id", "invoked-function-arn", "payload", "trace-id"}``, answered at once, then
``POST {LOCALSTACK_RUNTIME_ENDPOINT}/invocations/<id>/logs`` (``{"logs": ...}``) and
``.../response`` or ``.../error``; ``.../status/<runtime id>/ready`` once the runtime is up, or
``.../status/<runtime id>/error`` with the runtime's init error.

Towards the runtime (``awslambdaric``, ``aws-lambda-ric``) it serves the Lambda Runtime API
(``/2018-06-01/runtime/invocation/next``, ``.../<id>/response``, ``.../<id>/error``,
``/2018-06-01/runtime/init/error``) on a loopback port named by ``AWS_LAMBDA_RUNTIME_API``.

What Lambda does, done here: the runtime's output (stdout and stderr) is the function's log,
between ``START`` / ``END`` / ``REPORT`` lines written as Lambda writes them (``Init Duration``
on the first invocation of an environment); an invocation still running at the function's
timeout has its runtime killed (``Task timed out after N.00 seconds``, ``Status: timeout``) and
the next invocation starts a new one; a runtime using more than the function's memory is killed
too (``Runtime exited with error: signal: killed``, ``Status: error``, ``Error Type:
Runtime.OutOfMemory``). ``Max Memory Used`` is the runtime's peak resident set.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: Variables meant for this init only, never seen by the runtime (as the Go init unsets them).
_INIT_ONLY = (
    "LOCALSTACK_RUNTIME_ENDPOINT",
    "LOCALSTACK_RUNTIME_ID",
    "LOCALSTACK_INTEROP_PORT",
    "LOCALSTACK_RUNTIME_TRACING_PORT",
    "LOCALSTACK_USER",
    "LOCALSTACK_CODE_ARCHIVES",
    "LOCALSTACK_HOT_RELOADING_PATHS",
    "LOCALSTACK_ENABLE_XRAY_TELEMETRY",
    "LOCALSTACK_INIT_LOG_LEVEL",
    "LOCALSTACK_POST_INVOKE_WAIT_MS",
    "LOCALSTACK_FUNCTION_ACCOUNT_ID",
    "LOCALSTACK_MAX_PAYLOAD_SIZE",
    "LOCALSTACK_CHMOD_PATHS",
    "RDSS_INIT_COMMAND",
    "RDSS_INIT_RUNTIME",
)
#: How often the memory watchdog looks at the runtime's resident set.
_MEMORY_POLL_SECONDS = 0.05


def _log(message: str) -> None:
    """The init's own diagnostics (LocalStack keeps them as the environment's logs)."""
    print(f"{datetime.now(UTC):%H:%M:%S.%f} rdss-init: {message}", file=sys.stderr, flush=True)


@dataclass
class Invocation:
    request_id: str
    function_arn: str
    payload: bytes
    trace_id: str
    deadline: float  # time.time()
    #: (kind, body, error type header) once the runtime answered: kind is "response" or "error"
    outcome: queue.Queue[tuple[str, bytes, str | None]] = field(default_factory=queue.Queue)


class RuntimeProcess:
    """One start of the runtime: the process, its log pipe, its first ``/next`` (init done)."""

    def __init__(self, command: list[str], env: dict[str, str], cwd: str, memory_mb: int) -> None:
        self.started = time.monotonic()
        self.ready = threading.Event()
        #: invocations for this runtime's ``/next`` (a killed runtime's waiting request keeps its own)
        self.pending: queue.Queue[Invocation] = queue.Queue()
        self.init_error: bytes | None = None
        self.init_seconds: float | None = None
        self.out_of_memory = False
        self.peak_before_kill = 0
        self.memory_limit_kb = memory_mb * 1024
        read, write = os.pipe()
        self.process = subprocess.Popen(
            command,
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=write,
            stderr=write,
            start_new_session=True,  # its own process group: a timeout kills all of it
        )
        os.close(write)
        self.pipe = read
        os.set_blocking(read, False)
        threading.Thread(target=self._watch_memory, daemon=True).start()

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)

    def peak_memory_mb(self) -> int:
        """The runtime's peak resident set (VmHWM) so far, in MB."""
        kilobytes = _status_field(self.process.pid, "VmHWM")
        return math.ceil(kilobytes / 1024) if kilobytes else self.peak_before_kill

    def _watch_memory(self) -> None:
        # Lambda's limit is on the environment's memory: past it the runtime is killed, as the
        # kernel's OOM killer would in Lambda's cgroup
        while self.process.poll() is None:
            if (_status_field(self.process.pid, "VmRSS") or 0) > self.memory_limit_kb:
                self.out_of_memory = True
                self.kill()
                return
            time.sleep(_MEMORY_POLL_SECONDS)

    def read_available(self) -> bytes:
        chunks = []
        while True:
            try:
                chunk = os.read(self.pipe, 65536)
            except BlockingIOError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)

    def exit_description(self) -> str:
        code = self.process.poll()
        if code is None:
            return "running"
        if self.out_of_memory or code == -signal.SIGKILL:
            return "signal: killed"
        if code < 0:
            return f"signal: {signal.Signals(-code).name.removeprefix('SIG').lower()}"
        return f"exit status {code}"


def _error(error_type: str, message: str) -> bytes:
    return json.dumps({"errorType": error_type, "errorMessage": message}).encode()


def _status_field(pid: int, name: str) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith(name + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


class Environment:
    """The init's state: the runtime, the invocation it serves, the collected log."""

    def __init__(self) -> None:
        env = dict(os.environ)
        self.endpoint = env["LOCALSTACK_RUNTIME_ENDPOINT"].rstrip("/")
        self.runtime_id = env["LOCALSTACK_RUNTIME_ID"]
        self.interop_port = int(env.get("LOCALSTACK_INTEROP_PORT", "9563"))
        self.command: list[str] = json.loads(env["RDSS_INIT_COMMAND"])
        self.runtime_name = env.get("RDSS_INIT_RUNTIME", "unknown")
        self.timeout = int(env.get("AWS_LAMBDA_FUNCTION_TIMEOUT", "3"))
        self.memory_mb = int(env.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128"))
        self.version = env.get("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        self.task_root = env.get("LAMBDA_TASK_ROOT", os.getcwd())
        self.runtime_env = {k: v for k, v in env.items() if k not in _INIT_ONLY}
        self.current: Invocation | None = None
        self.log: list[str] = []
        self.log_lock = threading.Lock()
        self.invoke_lock = threading.Lock()
        self.runtime: RuntimeProcess | None = None
        #: Init Duration still to report (ms): on the first REPORT after a runtime started
        self.unreported_init: float | None = None
        self.api = ThreadingHTTPServer(("127.0.0.1", 0), _RuntimeApi)
        self.api.daemon_threads = True
        self.api.environment = self  # type: ignore[attr-defined]
        self.runtime_env["AWS_LAMBDA_RUNTIME_API"] = f"127.0.0.1:{self.api.server_address[1]}"

    # -- the log --------------------------------------------------------------------------------
    def write(self, text: str) -> None:
        with self.log_lock:
            self.log.append(text)

    def collect_output(self) -> None:
        if self.runtime is not None:
            data = self.runtime.read_available()
            if data:
                self.write(data.decode("utf-8", errors="replace"))

    def take_log(self) -> str:
        with self.log_lock:
            text, self.log = "".join(self.log), []
        return text

    # -- the runtime ----------------------------------------------------------------------------
    def start_runtime(self) -> RuntimeProcess:
        """Start the runtime and wait for its first ``/next`` (init done) or its failure."""
        self.write(f"INIT_START Runtime Version: {self.runtime_name}.local\tRuntime Version ARN: none\n")
        runtime = RuntimeProcess(self.command, self.runtime_env, self.task_root, self.memory_mb)
        self.runtime = runtime
        while not runtime.ready.wait(0.02):
            self.collect_output()
            if runtime.init_error is not None or not runtime.alive():
                break
        self.collect_output()
        if runtime.ready.is_set():
            self.unreported_init = (runtime.init_seconds or 0.0) * 1000
        return runtime

    # -- LocalStack -----------------------------------------------------------------------------
    def post(self, path: str, body: bytes) -> None:
        request = urllib.request.Request(
            f"{self.endpoint}{path}", data=body, method="POST", headers={"Content-Type": "application/json"}
        )
        # no proxies: LocalStack is on loopback
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        for attempt in range(5):
            try:
                with opener.open(request, timeout=30) as response:
                    response.read()
                return
            except OSError as error:
                _log(f"POST {path} failed ({error}), attempt {attempt + 1}")
                time.sleep(0.2 * (attempt + 1))

    def invoke(self, request: dict[str, Any]) -> None:
        """One invocation, START to REPORT, then the result to LocalStack (a thread per call;
        LocalStack sends an environment one invocation at a time)."""
        with self.invoke_lock:
            self._invoke(request)

    def _invoke(self, request: dict[str, Any]) -> None:
        request_id = request["invoke-id"]
        started_wall = time.time()
        started = time.monotonic()
        invocation = Invocation(
            request_id=request_id,
            function_arn=request.get("invoked-function-arn", ""),
            payload=(request.get("payload") or "").encode(),
            trace_id=request.get("trace-id", ""),
            deadline=started_wall + self.timeout,
        )
        status = None
        error_type = None
        runtime = self.runtime
        if runtime is None or not runtime.alive():
            # after a timeout or a crash: a new runtime, inside this invocation (its init time
            # counts in the invocation's duration, as Lambda's suppressed init does)
            runtime = self.start_runtime()
        self.write(f"START RequestId: {request_id} Version: {self.version}\n")
        if runtime.ready.is_set():
            self.current = invocation
            runtime.pending.put(invocation)
            kind, body, error_type = self._await(invocation, runtime, started)
        else:
            kind, body = "error", runtime.init_error or b""
        elapsed = time.monotonic() - started
        if kind == "timeout":
            runtime.peak_before_kill = runtime.peak_memory_mb()
            runtime.kill()
            self.collect_output()
            timed_out = f"Task timed out after {self.timeout}.00 seconds"
            self.write(f"{datetime.now(UTC):%Y-%m-%dT%H:%M:%S.%f}"[:-3] + f"Z {request_id} {timed_out}\n\n")
            status, error_type = "timeout", "Sandbox.Timedout"
            body = _error(error_type, f"RequestId: {request_id} Error: {timed_out}")
            kind = "error"
        elif kind == "exited":
            self.collect_output()
            description = runtime.exit_description()
            error_type = "Runtime.OutOfMemory" if runtime.out_of_memory else "Runtime.ExitError"
            self.write(f"RequestId: {request_id} Error: Runtime exited with error: {description}\n{error_type}\n")
            status = "error"
            body = _error(error_type, f"RequestId: {request_id} Error: Runtime exited with error: {description}")
            kind = "error"
        self.current = None
        self.collect_output()
        self.write(f"END RequestId: {request_id}\n")
        self.write(self._report(request_id, elapsed, runtime, status, error_type))
        self.post(f"/invocations/{request_id}/logs", json.dumps({"logs": self.take_log()}).encode())
        self.post(f"/invocations/{request_id}/{'error' if kind == 'error' else 'response'}", body)

    def _await(self, invocation: Invocation, runtime: RuntimeProcess, started: float) -> tuple[str, bytes, str | None]:
        while True:
            remaining = started + self.timeout - time.monotonic()
            if remaining <= 0:
                return "timeout", b"", None
            try:
                kind, body, error_type = invocation.outcome.get(timeout=min(0.05, remaining))
            except queue.Empty:
                self.collect_output()
                if not runtime.alive():
                    return "exited", b"", None
                continue
            return kind, body, error_type

    def _report(
        self, request_id: str, seconds: float, runtime: RuntimeProcess, status: str | None, error_type: str | None
    ) -> str:
        duration = min(seconds, float(self.timeout)) * 1000
        parts = [
            f"REPORT RequestId: {request_id}",
            f"Duration: {duration:.2f} ms",
            f"Billed Duration: {math.ceil(duration)} ms",
            f"Memory Size: {self.memory_mb} MB",
            f"Max Memory Used: {runtime.peak_memory_mb() or self.memory_mb} MB",
        ]
        if self.unreported_init is not None:
            parts.append(f"Init Duration: {self.unreported_init:.2f} ms")
            self.unreported_init = None
        if status:
            parts.append(f"Status: {status}")
        if error_type and status == "error":
            parts.append(f"Error Type: {error_type}")
        return "\t".join(parts) + "\t\n"


class _RuntimeApi(BaseHTTPRequestHandler):
    """The Lambda Runtime API (2018-06-01), for one runtime at a time."""

    protocol_version = "HTTP/1.1"
    server: ThreadingHTTPServer

    @property
    def environment(self) -> Environment:
        return self.server.environment  # type: ignore[attr-defined, no-any-return]

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _reply(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        environment = self.environment
        if self.path.rstrip("/").endswith("/ping"):
            self._reply(HTTPStatus.OK, b"pong")
            return
        if not self.path.startswith("/2018-06-01/runtime/invocation/next"):
            self._reply(HTTPStatus.NOT_FOUND, b'{"errorMessage":"not found"}')
            return
        runtime = environment.runtime
        if runtime is None:
            self._reply(HTTPStatus.INTERNAL_SERVER_ERROR, b'{"errorMessage":"no runtime"}')
            return
        if not runtime.ready.is_set():
            runtime.init_seconds = time.monotonic() - runtime.started
            runtime.ready.set()
        invocation = runtime.pending.get()
        self._reply(
            HTTPStatus.OK,
            invocation.payload,
            {
                "Lambda-Runtime-Aws-Request-Id": invocation.request_id,
                "Lambda-Runtime-Deadline-Ms": str(int(invocation.deadline * 1000)),
                "Lambda-Runtime-Invoked-Function-Arn": invocation.function_arn,
                "Lambda-Runtime-Trace-Id": invocation.trace_id,
            },
        )

    def do_POST(self) -> None:
        environment = self.environment
        body = self._body()
        parts = self.path.strip("/").split("/")
        if parts[:3] == ["2018-06-01", "runtime", "init"] and parts[3:] == ["error"]:
            if environment.runtime is not None:
                environment.runtime.init_error = body
            self._reply(HTTPStatus.ACCEPTED, b'{"status":"OK"}')
            return
        invocation = parts[:3] == ["2018-06-01", "runtime", "invocation"]
        if invocation and len(parts) == 5 and parts[4] in ("response", "error"):
            current = environment.current
            if current is None or current.request_id != parts[3]:
                self._reply(HTTPStatus.BAD_REQUEST, b'{"errorMessage":"no such invocation in progress"}')
                return
            current.outcome.put((parts[4], body, self.headers.get("Lambda-Runtime-Function-Error-Type")))
            self._reply(HTTPStatus.ACCEPTED, b'{"status":"OK"}')
            return
        self._reply(HTTPStatus.NOT_FOUND, b'{"errorMessage":"not found"}')


class _Interop(BaseHTTPRequestHandler):
    """``POST /invoke`` from LocalStack's executor endpoint, answered at once."""

    protocol_version = "HTTP/1.1"
    server: ThreadingHTTPServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        request = json.loads(self.rfile.read(length) or b"{}")
        environment: Environment = self.server.environment  # type: ignore[attr-defined]
        threading.Thread(target=environment.invoke, args=(request,), daemon=True).start()
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"OK")


def main() -> int:
    environment = Environment()
    threading.Thread(target=environment.api.serve_forever, daemon=True).start()
    interop = ThreadingHTTPServer(("127.0.0.1", environment.interop_port), _Interop)
    interop.daemon_threads = True
    interop.environment = environment  # type: ignore[attr-defined]

    def stop(signum: int, frame: object) -> None:
        if environment.runtime is not None:
            environment.runtime.kill()
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    threading.Thread(target=interop.serve_forever, daemon=True).start()
    runtime = environment.start_runtime()
    if not runtime.ready.is_set():
        environment.collect_output()
        error = runtime.init_error or _error(
            "Runtime.ExitError", f"Runtime exited with error: {runtime.exit_description()}"
        )
        _log(f"the runtime did not start: {error[:500]!r}\n{environment.take_log()[-4000:]}")
        environment.post(f"/status/{environment.runtime_id}/error", error)
        runtime.kill()
        return 1
    environment.post(f"/status/{environment.runtime_id}/ready", b"")
    while True:  # until LocalStack stops the environment (SIGTERM, above)
        time.sleep(3600)


if __name__ == "__main__":
    sys.exit(main())
