"""The console's charts over time, read from the deployment's channels: records per channel per
minute, records on ``invalid`` and ``error`` per error code per minute, and the latency from
``input`` to each routed channel (a routed copy's arrival minus the arrival of the ``input``
record carrying the same messageId).

The same records :mod:`rdss.status.snapshot` counts (the last hour, at most ``limit`` a
channel), bucketed: the charts and the counts beside them never disagree about what was read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from statistics import median
from typing import Any

import orjson

from rdss.deployment.topology import Deployment
from rdss.model import timestamps
from rdss.status.snapshot import DEFAULT_LIMIT, read_records

#: Channels that carry no routed copy: their records are not a delivery to measure latency to.
_NOT_ROUTED = frozenset({"input", "sequence", "invalid", "error"})
#: A consumer's move (rdss.model.rejection.moved_key): not the broker's verdict, charted apart.
_MOVED = "moved:"


@dataclass
class Series:
    """The charts' data: ``minutes`` are the bucket labels (UTC, ``HH:MM``), every list beside
    them one value per minute."""

    start: datetime
    minutes: list[str] = field(default_factory=list)
    #: channel -> records per minute
    channels: dict[str, list[int]] = field(default_factory=dict)
    #: error code (``channel:code``) -> records per minute
    errors: dict[str, list[int]] = field(default_factory=dict)
    #: routed channel -> latency seconds of each copy matched to its input record
    latency: dict[str, list[float]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "start": timestamps.format(self.start),
            "minutes": self.minutes,
            "channels": self.channels,
            "errors": self.errors,
            "latency": {
                channel: {
                    "copies": len(values),
                    "medianSeconds": round(median(values), 3) if values else None,
                    "maxSeconds": round(max(values), 3) if values else None,
                }
                for channel, values in self.latency.items()
            },
        }


def take(
    deployment: Deployment,
    client: Callable[[str], Any],
    *,
    minutes: int = 60,
    limit: int = DEFAULT_LIMIT,
    now: Callable[[], datetime] = timestamps.now,
) -> Series:
    """The last ``minutes`` of every channel, bucketed by minute."""
    end = now().replace(second=0, microsecond=0) + timedelta(minutes=1)
    start = end - timedelta(minutes=minutes)
    series = Series(start, [(start + timedelta(minutes=i)).strftime("%H:%M") for i in range(minutes)])
    kinesis = client("kinesis")
    inputs: dict[str, datetime] = {}
    routed: dict[str, list[tuple[str, datetime]]] = {}
    for channel in deployment.topology.channels:
        counts = [0] * minutes
        for record in read_records(kinesis, deployment.stream(channel.name), start, limit):
            if record.arrived is None:
                continue
            index = int((record.arrived - start).total_seconds() // 60)
            if not 0 <= index < minutes:
                continue
            counts[index] += 1
            if channel.name in ("invalid", "error"):
                code = "moved by a consumer" if record.partition_key.startswith(_MOVED) else _code(record.data)
                series.errors.setdefault(f"{channel.name}:{code}", [0] * minutes)[index] += 1
                continue
            message_id = _message_id(record.data)
            if message_id is None:
                continue
            if channel.name == "input":
                inputs.setdefault(message_id, record.arrived)
            elif channel.name not in _NOT_ROUTED:
                routed.setdefault(channel.name, []).append((message_id, record.arrived))
        series.channels[channel.name] = counts
    for name, copies in routed.items():
        series.latency[name] = [
            max(0.0, (arrived - inputs[message_id]).total_seconds())
            for message_id, arrived in copies
            if message_id in inputs
        ]
    return series


def _header(data: bytes) -> dict[str, Any]:
    try:
        parsed = orjson.loads(data)
    except orjson.JSONDecodeError:
        return {}
    header = parsed.get("messageHeader") if isinstance(parsed, dict) else None
    return header if isinstance(header, dict) else {}


def _code(data: bytes) -> str:
    code = _header(data).get("errorCode")
    return code if isinstance(code, str) else "unknown"


def _message_id(data: bytes) -> str | None:
    value = _header(data).get("messageId")
    return value if isinstance(value, str) else None
