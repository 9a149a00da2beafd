"""The local runtimes' state files: what each ``rdss local up`` leaves for the commands and the SDK.

While ``rdss local up`` serves, ``$XDG_STATE_HOME/rdss/running/<pid>.json`` (:mod:`rdss.host.statedir`)
says where its embedded AWS is and how to speak to it: the gateway URL of its deployment, the
endpoint, the region, the (dummy) credentials the emulator accepts and its state directory. Each
runtime has a file of its own, and removes only its own as it exits. Two readers use them, so that
nothing needs the ``AWS_*`` exports ``local up`` prints:

* :func:`configured_url` - the deployment a command (or ``Gateway()``) talks to when neither
  ``--url`` nor ``RDSS_GATEWAY_URL`` names one: the one running local runtime; when several run,
  the one ``RDSS_LOCAL`` (the commands' ``--local``) names by deployment or state directory, else
  the one started last - saying which, in one line;
* :func:`client_settings` - the region and credentials of a boto3 client aimed at a runtime's
  endpoint (:mod:`rdss.aws.clients` asks), whichever URL named it.

A file is read only when it is this user's, in a directory only this user can write
(:mod:`rdss.host.safefiles`), and counts only while its runtime runs: its process alive and its state
directory locked. One whose runtime is gone (a SIGKILL leaves it) is stale: ignored, and removed.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import json
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from rdss.host.statedir import state_directory

_log = logging.getLogger(__name__)

#: The directory of the files, under the state directory.
DIRECTORY = "running"
#: What picks one runtime when several run: a deployment name or a state directory.
SELECTOR = "RDSS_LOCAL"
#: The most this module reads of a file (it holds a few hundred bytes).
_MAX_BYTES = 64 * 1024


class NoSuchRuntime(ValueError):
    """``RDSS_LOCAL`` (``--local``) names no running local runtime."""


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
    #: Its state directory ("" when it keeps none).
    state: str = ""
    #: When it started serving (seconds since the epoch).
    started: float = 0.0

    def describe(self) -> str:
        where = f", state {self.state}" if self.state else ""
        return f"deployment {self.environment}{where} (pid {self.pid}, {self.endpoint})"


def directory() -> Path:
    return state_directory() / DIRECTORY


def state_file(pid: int | None = None) -> Path:
    """The state file of the runtime in process ``pid`` (default: this one)."""
    return directory() / f"{os.getpid() if pid is None else pid}.json"


def gateway_url(environment: str, endpoint: str, region: str, prefix: str = "rdss") -> str:
    """The ``kinesis://`` URL of a deployment behind ``endpoint``."""
    query = f"endpoint={quote(endpoint, safe=':/')}&region={quote(region)}"
    if prefix != "rdss":
        query += f"&prefix={quote(prefix)}"
    return f"kinesis://{environment}?{query}"


def write(state: LocalState) -> Path:
    """Record ``state`` as process ``state.pid``'s (readable by this user only: it holds
    credentials, dummies as they are).

    Raises:
        OSError: the directory cannot be made or written, or is not safe (another user's).
    """
    from rdss.host.safefiles import Directory, UnsafeFile

    folder = directory()
    folder.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=0o700)
    try:
        files = Directory(folder)
    except UnsafeFile as error:
        raise PermissionError(str(error)) from None
    try:
        name = f"{state.pid}.json"
        document = asdict(state) | {"credentials": dict(state.credentials)}
        files.write(name, json.dumps(document, indent=2).encode())
    except UnsafeFile as error:
        raise PermissionError(str(error)) from None
    finally:
        files.close()
    return folder / name


def remove(pid: int | None = None) -> None:
    """Remove process ``pid``'s state file (default: this one's); never another's."""
    with contextlib.suppress(FileNotFoundError):
        state_file(pid).unlink()


def record(endpoint: Any, deployment: Any, state: Path | None = None) -> Path | None:
    """What ``rdss local up`` calls once its runtime serves: write the state file of ``endpoint``
    (:class:`rdss.local.emulator.Endpoint`), ``deployment`` (:class:`rdss.deployment.topology.Deployment`)
    and ``state`` (its state directory), and remove it when this process exits. A state
    directory that cannot be written costs the file, not the runtime: the commands still take
    ``--url`` and the exports ``local up`` prints."""
    url = gateway_url(deployment.environment, endpoint.url, endpoint.region, deployment.prefix)
    recorded = LocalState(
        url=url,
        environment=deployment.environment,
        prefix=deployment.prefix,
        endpoint=endpoint.url,
        region=endpoint.region,
        credentials=dict(endpoint.credentials),
        pid=os.getpid(),
        state=str(state.resolve()) if state is not None else "",
        started=time.time(),
    )
    try:
        path = write(recorded)
    except OSError:
        return None
    # at exit rather than in the caller's ``finally``: one call for ``local up`` to make
    atexit.register(remove, os.getpid())
    return path


def running() -> list[LocalState]:
    """Every running local runtime of this user's, the one started last first."""
    from rdss.host.safefiles import Directory, UnsafeFile

    try:
        files = Directory(directory())
    except (OSError, UnsafeFile):
        return []
    found = []
    try:
        for name in files.names():
            if not name.endswith(".json"):
                continue
            state = _load(files, name)
            if state is None:
                continue
            if _alive(state):
                found.append(state)
            else:  # its runtime is gone (a SIGKILL leaves the file)
                files.unlink(name)
    finally:
        files.close()
    return sorted(found, key=lambda s: s.started, reverse=True)


def read() -> LocalState | None:
    """The running local runtime the commands use: the one running, or among several the one
    ``RDSS_LOCAL`` names, else the one started last (saying so); None when none runs.

    Raises:
        NoSuchRuntime: ``RDSS_LOCAL`` names none of those running.
    """
    states = running()
    wanted = os.environ.get(SELECTOR, "").strip()
    if wanted:
        chosen = [s for s in states if _matches(s, wanted)]
        if not chosen:
            others = "; ".join(s.describe() for s in states) or "none is running"
            raise NoSuchRuntime(f"no running local runtime has deployment or state {wanted!r} ({others})")
        states = chosen
    if len(states) > 1:
        _log.warning(
            "%d local runtimes are running; using the one started last, %s (--local ENV|DIR, or %s, picks another: %s)",
            len(states),
            states[0].describe(),
            SELECTOR,
            "; ".join(s.describe() for s in states[1:]),
        )
    return states[0] if states else None


def configured_url() -> str | None:
    """The gateway URL of the running local runtime (:func:`read`), if one is running.

    Raises:
        NoSuchRuntime: ``RDSS_LOCAL`` names none of those running.
    """
    state = read()
    return state.url if state is not None else None


def client_settings(endpoint: str | None) -> dict[str, str]:
    """``region_name`` and the credentials for a boto3 client aimed at ``endpoint``, when it is a
    running local runtime's (the emulator accepts any credentials, but boto3 signs with some);
    else nothing."""
    if not endpoint:
        return {}
    state = next((s for s in running() if _origin(s.endpoint) == _origin(endpoint)), None)
    if state is None:
        return {}
    settings = {"region_name": state.region}
    names = {
        "AWS_ACCESS_KEY_ID": "aws_access_key_id",
        "AWS_SECRET_ACCESS_KEY": "aws_secret_access_key",
        "AWS_SESSION_TOKEN": "aws_session_token",
    }
    settings.update({names[k]: v for k, v in state.credentials.items() if k in names})
    return settings


def _matches(state: LocalState, wanted: str) -> bool:
    if wanted == state.environment:
        return True
    if not state.state:
        return False
    try:
        return Path(wanted).expanduser().resolve() == Path(state.state)
    except (OSError, RuntimeError):
        return False


def _origin(url: str) -> tuple[str, str, int | None]:
    """Scheme, host and port: ``http://127.0.0.1:4566/`` and ``http://127.0.0.1:4566`` are one endpoint."""
    try:
        parts = urlsplit(url.strip())
        return parts.scheme.lower(), (parts.hostname or "").lower(), parts.port
    except ValueError:
        return "", url, None


def _load(files: Any, name: str) -> LocalState | None:
    """A file's contents; None when unreadable, not this user's, or not a state file."""
    from rdss.host.safefiles import UnsafeFile

    try:
        data = json.loads(files.read(name, _MAX_BYTES) or b"")
        fields = {key: data[key] for key in ("url", "environment", "prefix", "endpoint", "region")}
        if not all(isinstance(value, str) for value in fields.values()):
            return None
        credentials = data.get("credentials") or {}
        pid, state, started = data.get("pid"), data.get("state", ""), data.get("started", 0.0)
        if not isinstance(credentials, dict) or not isinstance(pid, int) or not isinstance(state, str):
            return None
        if not isinstance(started, int | float):
            return None
        return LocalState(
            **fields,
            credentials={str(k): str(v) for k, v in credentials.items()},
            pid=pid,
            state=state,
            started=float(started),
        )
    except (OSError, ValueError, KeyError, TypeError, UnsafeFile):
        return None


def _alive(state: LocalState) -> bool:
    """Its process lives, and (when it keeps state) still holds its state directory's lock: a
    process id reused by another program does not make a runtime alive."""
    if state.pid <= 0:
        return False
    try:
        os.kill(state.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        pass
    if not state.state:
        return True
    try:
        fd = os.open(Path(state.state) / "lock", os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True  # held: its runtime runs
    finally:
        os.close(fd)
    return False
