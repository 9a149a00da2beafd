"""Lambda's Python 3.12 on this machine, for the assets' x86_64 twins.

The functions run Python 3.12 with the asset at ``/var/task`` first on ``sys.path`` and the
runtime's own boto3 behind it. Here that is pyenv's 3.12 in a venv of its own
(``.cache/lambda-python3.12/``) holding only boto3, started isolated (``-I``: no user site,
no ``PYTHONPATH``, not the current directory) with the asset put first on ``sys.path`` -
so a module the asset lacks fails to import, as it would in Lambda. ``-B``: /var/task is
read-only in Lambda, so nothing is compiled to disk there and every cold start compiles again.

:func:`call` imports a handler in a fresh process and calls it with an event;
:func:`import_seconds` only times its cold import (``rdss bench coldstart``).
"""

from __future__ import annotations

import fcntl
import io
import json
import os
import shutil
import subprocess
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from stacks.bundling import CACHE, REPO, LambdaPythonUnavailable, lambda_interpreter

__all__ = ["LambdaPythonUnavailable", "python", "run", "zipped_size"]

VERSION = (3, 12)
VENV = CACHE / "lambda-python3.12"


def _interpreter() -> Path:
    return lambda_interpreter()


def _boto3_pin() -> str:
    for line in (REPO / "requirements.lock").read_text().splitlines():
        if line.startswith("boto3=="):
            return line.split(";")[0].strip()
    return "boto3"


def python() -> Path:
    """The venv's interpreter, made on first use (boto3 only, as the runtime has it). Test
    processes running side by side wait for the one that makes it (a file lock)."""
    interpreter = VENV / "bin" / "python"
    marker = VENV / ".boto3"
    pin = _boto3_pin()
    VENV.parent.mkdir(parents=True, exist_ok=True)
    with (VENV.parent / f"{VENV.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if interpreter.exists() and marker.is_file() and marker.read_text() == pin:
            return interpreter
        shutil.rmtree(VENV, ignore_errors=True)
        subprocess.run([str(_interpreter()), "-m", "venv", str(VENV)], check=True)
        install = [str(interpreter), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", pin]
        subprocess.run(install, check=True)
        marker.write_text(pin)
    return interpreter


# Runs inside the 3.12 process: the asset first on sys.path, then import, then (maybe) call.
_RUNNER = r"""
import importlib, json, sys, time
asset, handler, mode = sys.argv[1:4]
sys.path.insert(0, asset)
module_name, function_name = handler.rsplit(".", 1)
started, cpu = time.perf_counter(), time.process_time()
module = importlib.import_module(module_name)
imported, imported_cpu = time.perf_counter() - started, time.process_time() - cpu
outside = sorted(
    name for name, m in list(sys.modules.items())
    if name.split(".")[0] in ("rdss", "orjson", "jsonschema_rs", "aws_lambda_powertools")
    and getattr(m, "__file__", None) and not m.__file__.startswith(asset)
)
result = None
if mode == "call":
    class Context:
        function_name = "rdss-asset-test"
        function_version = "$LATEST"
        memory_limit_in_mb = 512
        invoked_function_arn = "arn:aws:lambda:eu-west-2:000000000000:function:rdss-asset-test"
        aws_request_id = "00000000-0000-4000-8000-000000000000"
        log_group_name = "/aws/lambda/rdss-asset-test"
        log_stream_name = "asset-test"
        def get_remaining_time_in_millis(self):
            return 60_000
    result = getattr(module, function_name)(json.load(sys.stdin), Context())
print(json.dumps(
    {"import_seconds": imported, "import_cpu_seconds": imported_cpu, "result": result, "outside": outside}, default=str
))
"""


def run(
    asset: Path, handler: str, *, event: Any = None, environment: Mapping[str, str] | None = None, timeout: float = 120
) -> dict[str, Any]:
    """Import ``handler`` (``module.function``) from ``asset`` in a fresh Python 3.12; call it with
    ``event`` unless it is None. Returns ``import_seconds`` (wall clock), ``import_cpu_seconds``
    (the process's CPU time, which other work on the machine does not stretch), ``result`` and
    ``outside`` (asset modules that were found elsewhere: must be empty).

    Raises:
        RuntimeError: the import or the call failed (the traceback says why, e.g. a missing module).
    """
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", **dict(environment or {})}
    mode = "import" if event is None else "call"
    done = subprocess.run(
        [str(python()), "-I", "-B", "-c", _RUNNER, str(asset.resolve()), handler, mode],
        input=None if event is None else json.dumps(event).encode(),
        capture_output=True,
        env=env,
        cwd=asset,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{handler} from {asset}: exit {done.returncode}\n{done.stderr.decode()[-4000:]}")
    report: dict[str, Any] = json.loads(done.stdout.decode().strip().splitlines()[-1])
    return report


def zipped_size(asset: Path) -> int:
    """The asset's size as Lambda receives it: a deflated zip of the directory."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(asset.rglob("*")):
            if path.is_file():
                archive.write(path, path.relative_to(asset).as_posix())
    return buffer.tell()
