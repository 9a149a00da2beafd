"""The local runtime's state file: what ``rdss local up`` leaves for the commands and the SDK.

While ``rdss local up`` serves, ``$XDG_STATE_HOME/rdss/local.json`` (:mod:`rdss.statedir`) says
where its embedded AWS is and how to speak to it: the gateway URL of its deployment, the
endpoint, the region and the (dummy) credentials the emulator accepts. Two readers use it, so
that nothing needs the ``AWS_*`` exports ``local up`` prints:

* :func:`configured_url` - the deployment a command (or ``Gateway()``) talks to when neither
  ``--url`` nor ``RDSS_GATEWAY_URL`` names one;
* :func:`client_settings` - the region and credentials of a boto3 client aimed at that endpoint
  (:mod:`rdss.aws` asks), whichever URL named it.

The file belongs to the process that wrote it: one whose process is gone is stale and ignored,
and ``local up`` removes its own as it exits.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from rdss.statedir import state_directory

#: The file's name under the state directory.
FILE_NAME = "local.json"
#: The most this module reads of it (it holds a few hundred bytes).
_MAX_BYTES = 64 * 1024


@dataclass(frozen=True)
class LocalState:
    """A running local runtime, as its state file records it."""

    #: The gateway URL of its deployment: ``kinesis://ENV?endpoint=...&region=...``.
    url: str
    environment: str
    prefix: str
    endpoint: str
    region: str
    #: ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN`` (the emulator's dummies).
    credentials: Mapping[str, str] = field(default_factory=dict)
    #: The ``rdss local up`` process serving it.
    pid: int = 0


def state_file() -> Path:
    return state_directory() / FILE_NAME


def gateway_url(environment: str, endpoint: str, region: str, prefix: str = "rdss") -> str:
    """The ``kinesis://`` URL of a deployment behind ``endpoint``."""
    query = f"endpoint={quote(endpoint, safe=':/')}&region={quote(region)}"
    if prefix != "rdss":
        query += f"&prefix={quote(prefix)}"
    return f"kinesis://{environment}?{query}"


def write(state: LocalState) -> Path:
    """Record ``state`` (readable by this user only: it holds credentials, dummies as they are).

    Raises:
        OSError: the state directory cannot be made or written.
    """
    path = state_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{FILE_NAME}.{os.getpid()}")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as file:
        json.dump(asdict(state) | {"credentials": dict(state.credentials)}, file, indent=2)
    os.replace(temporary, path)  # readers see the old file or the new one, never half of one
    return path


def remove(pid: int | None = None) -> None:
    """Remove the state file if process ``pid`` (default: this one) wrote it."""
    owner = os.getpid() if pid is None else pid
    current = _load()
    if current is not None and current.pid == owner:
        with contextlib.suppress(FileNotFoundError):
            state_file().unlink()


def record(endpoint: Any, deployment: Any) -> None:
    """What ``rdss local up`` calls once its runtime serves: write the state file of ``endpoint``
    (:class:`rdss.local.emulator.Endpoint`) and ``deployment`` (:class:`rdss.topology.Deployment`),
    and remove it when this process exits. A state directory that cannot be written costs the
    file, not the runtime: the commands still take ``--url`` and the exports ``local up`` prints."""
    url = gateway_url(deployment.environment, endpoint.url, endpoint.region, deployment.prefix)
    state = LocalState(
        url=url,
        environment=deployment.environment,
        prefix=deployment.prefix,
        endpoint=endpoint.url,
        region=endpoint.region,
        credentials=dict(endpoint.credentials),
        pid=os.getpid(),
    )
    with contextlib.suppress(OSError):
        write(state)
        # at exit rather than in the caller's ``finally``: one call for ``local up`` to make
        atexit.register(remove, os.getpid())


def read() -> LocalState | None:
    """The running local runtime's state; None without a file, or when its process is gone."""
    state = _load()
    if state is None or not _alive(state.pid):
        return None
    return state


def configured_url() -> str | None:
    """The gateway URL of the running local runtime, if one is running."""
    state = read()
    return state.url if state is not None else None


def client_settings(endpoint: str | None) -> dict[str, str]:
    """``region_name`` and the credentials for a boto3 client aimed at ``endpoint``, when it is the
    running local runtime's (the emulator accepts any credentials, but boto3 signs with some);
    else nothing."""
    if not endpoint:
        return {}
    state = read()
    if state is None or _origin(state.endpoint) != _origin(endpoint):
        return {}
    settings = {"region_name": state.region}
    names = {
        "AWS_ACCESS_KEY_ID": "aws_access_key_id",
        "AWS_SECRET_ACCESS_KEY": "aws_secret_access_key",
        "AWS_SESSION_TOKEN": "aws_session_token",
    }
    settings.update({names[k]: v for k, v in state.credentials.items() if k in names})
    return settings


def _origin(url: str) -> tuple[str, str, int | None]:
    """Scheme, host and port: ``http://127.0.0.1:4566/`` and ``http://127.0.0.1:4566`` are one endpoint."""
    try:
        parts = urlsplit(url.strip())
        return parts.scheme.lower(), (parts.hostname or "").lower(), parts.port
    except ValueError:
        return "", url, None


def _load() -> LocalState | None:
    """The file's contents, whoever wrote it; None when absent, unreadable or not ours."""
    try:
        with state_file().open("rb") as file:
            data = json.loads(file.read(_MAX_BYTES))
        fields = {name: data[name] for name in ("url", "environment", "prefix", "endpoint", "region")}
        if not all(isinstance(value, str) for value in fields.values()):
            return None
        credentials = data.get("credentials") or {}
        pid = data.get("pid")
        if not isinstance(credentials, dict) or not isinstance(pid, int):
            return None
        return LocalState(**fields, credentials={str(k): str(v) for k, v in credentials.items()}, pid=pid)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True
