"""The harvest position and what was published per identifier: the adaptor's state file,
written atomically after each page."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from rdss.adaptors.oai_pmh.dublin_core import Known
from rdss.host.statedir import creatable

_log = logging.getLogger(__name__)

#: The largest state file read: about a million published identifiers.
MAX_STATE_BYTES = 1024 * 1024 * 1024


@dataclass
class HarvestState:
    """Where the harvest is, and what was published per identifier: the state file."""

    base_url: str
    metadata_prefix: str = "oai_dc"
    set_spec: str | None = None
    #: The ``from`` of the harvest in progress (or of the next one); None: from the beginning.
    from_: str | None = None
    #: The resumption token of the next page of the harvest in progress.
    token: str | None = None
    #: The largest datestamp the harvest in progress has seen: the next harvest's ``from``.
    high_water: str | None = None
    harvests: int = 0
    objects: dict[str, Known] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path, base_url: str, metadata_prefix: str, set_spec: str | None) -> HarvestState:
        """The saved state, or a fresh one when there is none.

        Raises:
            ValueError: the file is for another endpoint, prefix or set (start a new file).
        """
        if not path.exists():
            return cls(base_url, metadata_prefix, set_spec)
        if not path.is_file():  # a directory, /dev/zero, a pipe: not a state file this wrote
            raise ValueError("not a regular file")
        with path.open("rb") as file:
            text = file.read(MAX_STATE_BYTES + 1)
        if len(text) > MAX_STATE_BYTES:
            raise ValueError(f"larger than {MAX_STATE_BYTES:,} bytes: not a state file this wrote")
        try:
            data = json.loads(text)
            state = cls(
                base_url=data["base_url"],
                metadata_prefix=data["metadata_prefix"],
                set_spec=data.get("set_spec"),
                from_=data.get("from"),
                token=data.get("token"),
                high_water=data.get("high_water"),
                harvests=int(data.get("harvests", 0)),
                objects={k: Known(*v) for k, v in data.get("objects", {}).items()},
            )
        except (KeyError, TypeError, AttributeError, UnicodeDecodeError) as error:
            raise ValueError(f"not a harvest state file ({type(error).__name__}: {error})") from None
        if (state.base_url, state.metadata_prefix, state.set_spec) != (base_url, metadata_prefix, set_spec):
            raise ValueError(
                f"{path} holds the harvest of {state.base_url} ({state.metadata_prefix}, set {state.set_spec}): "
                "use another state file for another endpoint"
            )
        return state

    def save(self, path: Path) -> None:
        """Write atomically: a crash leaves the previous state or this one, never half of one."""
        data = {
            "base_url": self.base_url,
            "metadata_prefix": self.metadata_prefix,
            "set_spec": self.set_spec,
            "from": self.from_,
            "token": self.token,
            "high_water": self.high_water,
            "harvests": self.harvests,
            "objects": {k: [v.object_uuid, v.datestamp, v.deleted] for k, v in self.objects.items()},
        }
        creatable(path)  # its directory made only under the state directory
        descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(descriptor, "w") as handle:
                json.dump(data, handle, separators=(",", ":"))
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
        directory = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)  # the rename itself survives a power cut
        finally:
            os.close(directory)
