"""Where rdss keeps what it owns on this host, and where it may create files.

``$XDG_STATE_HOME/rdss`` (default ``~/.local/state/rdss``): the gateways' Local Data Repositories,
claim checks, the adaptors' harvest positions. A SQLite file a user names (``ldr=sqlite:///...``,
``state=``) is created there, or in a directory that already exists - never a directory tree made
wherever a typo points (:func:`creatable`).
"""

from __future__ import annotations

import os
from pathlib import Path


class StateError(ValueError):
    """A state file or directory that cannot be used; the message says which and why."""


def state_directory() -> Path:
    """``$XDG_STATE_HOME/rdss``. A relative ``XDG_STATE_HOME`` is ignored, as the XDG Base
    Directory specification says (every path there must be absolute)."""
    home = os.environ.get("XDG_STATE_HOME") or ""
    base = Path(home) if os.path.isabs(home) else Path.home() / ".local" / "state"
    return base / "rdss"


def creatable(path: Path) -> Path:
    """``path`` once its directory exists: made when it lies under :func:`state_directory` (or
    the default one under the home directory), else it must be there already.

    Raises:
        StateError: the directory is missing outside the state directory, or cannot be made.
    """
    parent = path.parent
    if parent.is_dir():
        return path
    state = state_directory()
    # the home default too: ``rdss vendor config`` spells a gateway's default file from it
    # (~/.local/state/rdss), whatever $XDG_STATE_HOME the gateway's host sets
    roots = (state, Path.home() / ".local" / "state" / "rdss")
    if not any(parent.resolve().is_relative_to(root.resolve()) for root in roots):
        raise StateError(
            f"{path}: the directory {parent} does not exist (files are created in a directory that exists, "
            f"or under the state directory {state})"
        )
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise StateError(
            f"cannot create the state directory {parent} ($XDG_STATE_HOME/rdss): {error.strerror or error}"
        ) from None
    return path
