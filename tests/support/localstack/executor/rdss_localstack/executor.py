"""LocalStack's Lambda runtime executor for a machine without Docker: each execution
environment is a local process (:mod:`rdss_localstack.init`) that runs the function's runtime.

It takes the place of LocalStack's ``DockerRuntimeExecutor`` (``LAMBDA_RUNTIME_EXECUTOR=
rdss-process``) and keeps its contract: the deployed zip, unpacked by LocalStack, is the task
root; the environment variables are LocalStack's (``LAMBDA_TASK_ROOT`` pointed at that root);
the init speaks LocalStack's executor endpoint protocol, so LocalStack's own ``ExecutorEndpoint``
handles readiness, results and logs exactly as it does for a container.

The runtimes (``RDSS_LAMBDA_RUNTIMES``, set up by ``make localstack``): ``python3.12`` is
pyenv's Python 3.12 in a venv holding ``awslambdaric`` and the runtime's boto3; ``nodejs*`` is
the machine's Node with ``aws-lambda-ric`` and the AWS SDK v3 clients Lambda's Node runtimes
include. A function whose runtime or architecture this machine cannot run fails to start, saying
so, rather than running under something else.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from localstack import config
from localstack.services.lambda_.invocation.executor_endpoint import ExecutorEndpoint
from localstack.services.lambda_.invocation.lambda_models import FunctionVersion, InvocationResult
from localstack.services.lambda_.invocation.runtime_executor import LambdaRuntimeException, RuntimeExecutor

INIT = Path(__file__).with_name("init.py")
#: Lambda's architecture names -> this machine's (platform.machine())
_MACHINES = {"x86_64": "x86_64", "arm64": "aarch64"}


def runtimes_dir() -> Path:
    return Path(os.environ.get("RDSS_LAMBDA_RUNTIMES", ""))


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def runtime_command(runtime: str, handler: str) -> tuple[list[str], dict[str, str]]:
    """The command that starts ``runtime`` and what it adds to the function's environment.

    Raises:
        LambdaRuntimeException: this machine has no such runtime.
    """
    root = runtimes_dir()
    if runtime == "python3.12":
        python = root / "python3.12" / "bin" / "python"
        if not python.exists():
            raise LambdaRuntimeException(f"no {runtime} runtime at {python}: run `make localstack`")
        # -B: the task root is read-only in Lambda, nothing is compiled to disk there
        return [str(python), "-B", "-m", "awslambdaric", handler], {"AWS_EXECUTION_ENV": f"AWS_Lambda_{runtime}"}
    if runtime.startswith("nodejs"):
        node_modules = root / "nodejs" / "node_modules"
        ric = node_modules / "aws-lambda-ric" / "index.mjs"
        node = os.environ.get("RDSS_LAMBDA_NODE") or shutil.which("node")
        if not node or not ric.exists():
            raise LambdaRuntimeException(f"no {runtime} runtime (node and {ric}): run `make localstack`")
        # the project's Node 22 (stacks/node.py; else the machine's) stands in for every nodejs
        # runtime; the SDK v3 clients the Node runtimes include are found on NODE_PATH, as
        # Lambda's /var/runtime/node_modules are
        return [node, str(ric)], {
            "AWS_EXECUTION_ENV": f"AWS_Lambda_{runtime}",
            "NODE_PATH": str(node_modules),
            "NODE_EXTRA_CA_CERTS": os.environ.get("RDSS_LAMBDA_EXTRA_CA_CERTS", ""),
        }
    raise LambdaRuntimeException(f"runtime {runtime!r} is not available without Docker (python3.12, nodejs*.x are)")


class ProcessRuntimeExecutor(RuntimeExecutor):
    """One execution environment: an init process and the runtime it runs."""

    def __init__(self, id: str, function_version: FunctionVersion) -> None:  # noqa: A002 - LocalStack's name
        super().__init__(id=id, function_version=function_version)
        self.executor_endpoint = ExecutorEndpoint(self.id, container_address="127.0.0.1", container_port=_free_port())
        self.process: subprocess.Popen[bytes] | None = None
        self.log = Path(tempfile.gettempdir()) / f"rdss-lambda-{self.id}.log"
        self.stopping = False
        #: an empty home: nothing of this machine's user (~/.aws) reaches the function
        self.home = Path(tempfile.mkdtemp(prefix=f"rdss-lambda-home-{self.id}-"))

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self, env_vars: dict[str, str]) -> None:
        version = self.function_version
        architecture = str(version.config.architectures[0]) if version.config.architectures else "x86_64"
        if _MACHINES.get(architecture) != platform.machine():
            raise LambdaRuntimeException(
                f"{version.id.function_name} is built for {architecture}; this machine is {platform.machine()} "
                "and runs functions natively (no emulation): deploy it for this architecture"
            )
        code = version.config.code
        if code is None:
            raise LambdaRuntimeException("container image functions need Docker")
        task_root = str(code.get_unzipped_code_location())
        command, extra = runtime_command(str(version.config.runtime), str(version.config.handler))
        environment = {
            # what Lambda's execution environment has before the function's own variables
            "PATH": f"{Path(command[0]).parent}:/usr/local/bin:/usr/bin:/bin",
            "LANG": "en_US.UTF-8",
            "HOME": str(self.home),
            **env_vars,
            **extra,
            "LAMBDA_TASK_ROOT": task_root,
            "LAMBDA_RUNTIME_DIR": str(runtimes_dir()),
            "LOCALSTACK_INTEROP_PORT": str(self.executor_endpoint.container_port),
            "RDSS_INIT_COMMAND": json.dumps(command),
            "RDSS_INIT_RUNTIME": str(version.config.runtime).replace("python", "python:").replace("nodejs", "nodejs:"),
        }
        environment = {k: str(v) for k, v in environment.items() if v is not None and v != ""}
        self.executor_endpoint.start()
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, str(INIT)],
                env=environment,
                cwd=task_root,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        threading.Thread(target=self._watch, args=(self.process,), daemon=True).start()
        self.executor_endpoint.wait_for_startup()

    def _watch(self, process: subprocess.Popen[bytes]) -> None:
        """An init that dies unasked fails what waits on it, instead of leaving it waiting."""
        code = process.wait()
        if self.stopping:
            return
        failure = LambdaRuntimeException(f"the runtime init exited with {code}: {self.get_logs()[-2000:]}")
        for future in (self.executor_endpoint.startup_future, self.executor_endpoint.invocation_future):
            if future is not None and not future.done():
                with contextlib.suppress(Exception):
                    future.set_exception(failure)

    def stop(self) -> None:
        self.stopping = True
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signal.SIGTERM)  # the init kills its runtime, then itself
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        with contextlib.suppress(Exception):
            self.executor_endpoint.shutdown()
        shutil.rmtree(self.home, ignore_errors=True)
        self.log.unlink(missing_ok=True)

    # -- addresses ------------------------------------------------------------------------------
    def get_address(self) -> str:
        return "127.0.0.1"

    def get_endpoint_from_executor(self) -> str:
        return "127.0.0.1"

    def get_runtime_endpoint(self) -> str:
        return f"http://127.0.0.1:{config.GATEWAY_LISTEN[0].port}{self.executor_endpoint.get_endpoint_prefix()}"

    # -- invocations and logs -------------------------------------------------------------------
    def invoke(self, payload: dict[str, str]) -> InvocationResult:
        return self.executor_endpoint.invoke(payload)

    def get_logs(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""

    # -- versions -------------------------------------------------------------------------------
    @classmethod
    def prepare_version(cls, function_version: FunctionVersion) -> None:
        if function_version.config.code:
            function_version.config.code.prepare_for_execution()  # unzip: the task root

    @classmethod
    def cleanup_version(cls, function_version: FunctionVersion) -> None:
        pass

    @classmethod
    def validate_environment(cls) -> bool:
        return runtimes_dir().is_dir()
