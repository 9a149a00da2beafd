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
from typing import Any

from rdss.adaptors.oai_pmh.dublin_core import Known
from rdss.host.display import shorten
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
        except (ValueError, RecursionError) as error:  # UnicodeDecodeError is a ValueError
            raise ValueError(f"not a harvest state file (not JSON: {shorten(str(error), 120)})") from None
        state = cls._read(data)
        if (state.base_url, state.metadata_prefix, state.set_spec) != (base_url, metadata_prefix, set_spec):
            raise ValueError(
                f"{path} holds the harvest of {shorten(state.base_url, 200)} ({shorten(state.metadata_prefix, 40)}, "
                f"set {shorten(str(state.set_spec), 60)}): "
                "use another state file for another endpoint"
            )
        return state

    @classmethod
    def _read(cls, data: Any) -> HarvestState:
        """The state ``data`` (a state file's JSON) holds, each field checked against what
        :meth:`save` writes: a forged or damaged file is refused naming the field, never half read.

        Raises:
            ValueError: which field is missing or of the wrong type.
        """
        if not isinstance(data, dict):
            raise ValueError(f"not a harvest state file: expected a JSON object, found {_kind(data)}")
        for name in ("base_url", "metadata_prefix"):
            if not isinstance(data.get(name), str):
                raise _malformed(name, "a string", data.get(name))
        for name in ("set_spec", "from", "token", "high_water"):
            if data.get(name) is not None and not isinstance(data[name], str):
                raise _malformed(name, "a string or null", data[name])
        harvests = data.get("harvests", 0)
        if type(harvests) is not int or harvests < 0:
            raise _malformed("harvests", "a whole number", harvests)
        raw_objects = data.get("objects", {})
        if not isinstance(raw_objects, dict):
            raise _malformed("objects", "an object", raw_objects)
        objects = {}
        for identifier, value in raw_objects.items():
            if not (
                isinstance(value, list)
                and len(value) in (2, 3)
                and isinstance(value[0], str)
                and isinstance(value[1], str)
                and (len(value) == 2 or isinstance(value[2], bool))
            ):
                raise _malformed(f"objects[{shorten(repr(identifier), 60)}]", "[objectUuid, datestamp, deleted]", value)
            objects[identifier] = Known(*value)
        return cls(
            base_url=data["base_url"],
            metadata_prefix=data["metadata_prefix"],
            set_spec=data.get("set_spec"),
            from_=data.get("from"),
            token=data.get("token"),
            high_water=data.get("high_water"),
            harvests=harvests,
            objects=objects,
        )

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


def _kind(value: Any) -> str:
    """A JSON value as an error names it: its type and, cut, itself."""
    names = {
        dict: "an object",
        list: "an array",
        str: "a string",
        bool: "a boolean",
        int: "a number",
        float: "a number",
    }
    shown = "null" if value is None else names.get(type(value), type(value).__name__)
    if not isinstance(value, dict | list):
        shown += f" {shorten(json.dumps(value), 40)}" if value is not None else ""
    return shown


def _malformed(name: str, expected: str, found: Any) -> ValueError:
    # the name in quotes: a bare ``token: 7`` is what the CLI's redaction takes for a secret
    return ValueError(f'not a harvest state file: field "{name}": expected {expected}, found {_kind(found)}')
