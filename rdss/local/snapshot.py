"""Snapshots of the emulator's whole state: every moto backend in use, pickled at one point of
the journal, so the journal can start again empty (compaction) and a restart replays only what
came after.

moto keeps each service's state in a ``BackendDict`` (account -> region -> backend), and lists
the ones in use in ``BackendDict._instances``. A snapshot pickles all of them in one go (objects
shared between services stay shared), each named by the module attribute that holds it, with the
journal index it covers and moto's version: a snapshot is read back only by the moto that wrote
it. Locks are pickled as new, unlocked locks. The file is written beside its final name, synced,
then renamed over it, so a crash leaves the old snapshot or the new one, never half of one.

A snapshot is a pickle: loading one runs code named in it. It lives in the user's own state
directory (mode 0700) and is read only from there.
"""

from __future__ import annotations

import io
import os
import pickle
import sys
import threading
from pathlib import Path
from typing import Any

_FORMAT = 1
_LOCK_TYPES = (type(threading.Lock()), type(threading.RLock()))


class SnapshotError(Exception):
    """A snapshot that cannot be used (another moto wrote it, or it is damaged)."""


def save(path: Path, index: int) -> int:
    """Write the state of every moto backend in use, as of journal entry ``index``, to ``path``.
    Returns the snapshot's size in bytes. The caller keeps state from changing meanwhile."""
    import moto

    backends = _backends_in_use()
    for attempt in range(3):
        buffer = io.BytesIO()
        try:
            _Pickler(buffer).dump({"format": _FORMAT, "moto": moto.__version__, "index": index, "backends": backends})
            break
        except RuntimeError:  # a read created a region's backend while we pickled: again
            if attempt == 2:
                raise
    data = buffer.getvalue()
    temporary = path.with_name(path.name + ".tmp")
    with open(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)
    _sync_directory(path.parent)
    return len(data)


def load(path: Path) -> int:
    """Put the backends saved in ``path`` in place of the current ones; returns the journal
    index the snapshot covers (0 when there is no snapshot).

    Raises:
        SnapshotError: written by another moto version, or not a snapshot.
    """
    import moto

    if not path.exists():
        return 0
    try:
        with path.open("rb") as file:
            saved = pickle.load(file)  # the user's own state directory, see above
    except (pickle.UnpicklingError, EOFError, AttributeError, ImportError, TypeError) as error:
        raise SnapshotError(f"{path} is not a readable snapshot ({error})") from error
    if not isinstance(saved, dict) or saved.get("format") != _FORMAT:
        raise SnapshotError(f"{path} is not a snapshot this version of rdss writes")
    if saved["moto"] != moto.__version__:
        raise SnapshotError(f"{path} was written by moto {saved['moto']}, this is moto {moto.__version__}")
    for (module_name, attribute), accounts in saved["backends"].items():
        __import__(module_name)
        backend_dict = getattr(sys.modules[module_name], attribute)
        backend_dict.clear()
        backend_dict.update(accounts)
        if backend_dict not in _instances():
            _instances().append(backend_dict)
    return int(saved["index"])


def _backends_in_use() -> dict[tuple[str, str], dict[str, Any]]:
    """Each BackendDict in use, keyed by the (module, attribute) that holds it."""
    from moto.core.base_backend import BackendDict

    in_use = {id(backend_dict): backend_dict for backend_dict in _instances() if len(backend_dict)}
    named: dict[tuple[str, str], dict[str, Any]] = {}
    for module_name, module in list(sys.modules.items()):
        if not module_name.startswith("moto.") or module is None:
            continue
        for attribute, value in list(vars(module).items()):
            if id(value) in in_use and isinstance(value, BackendDict):
                named.setdefault((module_name, attribute), dict(value))
                in_use.pop(id(value))
    return named


def _instances() -> list[Any]:
    """moto's list of the BackendDicts in use (``BackendDict._instances``)."""
    from moto.core.base_backend import BackendDict

    instances: list[Any] = vars(BackendDict)["_instances"]
    return instances


class _Pickler(pickle.Pickler):
    def __init__(self, file: io.BytesIO) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, _LOCK_TYPES):
            return (threading.RLock if "RLock" in type(obj).__name__ else threading.Lock, ())
        return NotImplemented


def _sync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
