"""The settings the cost model prices, read from ``cdk.json`` without the CDK.

The CDK app types and checks the whole ``rdss`` context (``stacks/config.py``); this reader takes
only what costs money, with the same defaults, merged the same way (``defaults`` then
``environments.<name>``, key by key). A test compares the two on every environment.

Where ``cdk.json`` is found: ``--config PATH``; else the copy an installed wheel carries
(``rdss/_cdk.json``, copied by ``setup.py`` at build time); else the checkout's own, beside the
package (``<checkout>/cdk.json``), so ``rdss bench cost`` works from a checkout and from the wheel.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rdss.capacity import Plan, Traffic, plan

#: Processors whose settings default to ``functions.default``.
_DEFAULT_FUNCTION = {"memory_mb": 512, "log_level": "INFO"}


class SettingsError(ValueError):
    """No cdk.json, or no such environment in it."""


@dataclass(frozen=True)
class Lifecycle:
    expire_after_days: int | None = None
    infrequent_access_after_days: int | None = None
    glacier_after_days: int | None = None
    deep_archive_after_days: int | None = None


@dataclass(frozen=True)
class FunctionConfig:
    memory_mb: int
    log_level: str


@dataclass(frozen=True)
class Settings:
    """One environment's cost-bearing settings."""

    name: str
    rate_per_second: float
    headroom: float
    stream_mode: str
    explicit_shards: Mapping[str, int]
    stream_retention_hours: int
    table_mode: str
    target_utilization: float
    batch_size: int
    window_seconds: float
    parallelization: int
    functions: Mapping[str, FunctionConfig]
    log_days: int
    buckets: Mapping[str, Lifecycle]
    buffer_seconds: int
    buffer_mib: int
    glue_workers: int
    compaction_schedule: str | None
    consumers: Mapping[str, int] = field(default_factory=dict)

    def function(self, processor: str) -> FunctionConfig:
        return self.functions.get(processor) or self.functions["default"]

    def lifecycle(self, bucket: str) -> Lifecycle:
        """A bucket's lifecycle; the topology's staging bucket expires after 8 days by itself."""
        return self.buckets.get(bucket) or Lifecycle(expire_after_days=8 if bucket == "staging" else None)

    def plan(self, rate_per_second: float) -> Plan:
        """The capacity a deployment with these settings holds for ``rate_per_second``."""
        return plan(
            Traffic(rate_per_second, consumers=self.consumers),
            headroom=self.headroom,
            explicit_shards=self.explicit_shards,
            parallelization=self.parallelization,
            batch_size=self.batch_size,
            window_seconds=self.window_seconds,
            target_utilization=self.target_utilization,
        )


def locate(path: Path | None = None) -> Path:
    """The cdk.json to read (see the module's docstring)."""
    if path is not None:
        if not path.is_file():
            raise SettingsError(f"{path}: no such file")
        return path
    here = Path(__file__).resolve().parents[1]
    for candidate in (here / "_cdk.json", here.parent / "cdk.json"):
        if candidate.is_file():
            return candidate
    raise SettingsError("no cdk.json beside the package: pass --config PATH (a cdk.json holding the rdss context)")


def environments(path: Path | None = None) -> dict[str, Any]:
    """The ``rdss`` context object of a cdk.json (or of a file holding that object itself)."""
    where = locate(path)
    try:
        data = json.loads(where.read_text())
    except (OSError, ValueError) as error:
        raise SettingsError(f"{where}: not readable JSON ({error})") from error
    context = data.get("context", {}).get("rdss", data.get("rdss", data)) if isinstance(data, dict) else None
    if not isinstance(context, dict) or not isinstance(context.get("environments"), dict):
        raise SettingsError(f"{where}: no rdss context with environments")
    return context


def _merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def load(name: str, path: Path | None = None) -> Settings:
    """Environment ``name``'s settings."""
    context = environments(path)
    if name not in context["environments"]:
        raise SettingsError(f"unknown environment {name!r}; choose one of {sorted(context['environments'])}")
    raw = _merge(context.get("defaults", {}), context["environments"][name])
    traffic = raw.get("traffic", {})
    streams = raw.get("stream_capacity", {})
    table = raw.get("table_capacity", {})
    events = raw.get("event_source", {})
    functions = raw.get("functions", {})
    default_function = _merge(_DEFAULT_FUNCTION, functions.get("default", {}))
    retention = raw.get("retention", {})
    archive = raw.get("archive", {})
    analytics = raw.get("analytics", {})
    consumers: dict[str, int] = {}
    for vendor in raw.get("vendors", {}).values():
        for channel in vendor.get("consumes", ()):
            consumers[channel] = consumers.get(channel, 0) + 1
    return Settings(
        name=name,
        rate_per_second=float(traffic.get("rate_per_second", 1.16)),
        headroom=float(traffic.get("headroom", 2.0)),
        stream_mode=streams.get("mode", "on-demand"),
        explicit_shards=dict(streams.get("shards", {})),
        stream_retention_hours=int(raw.get("stream_retention_hours", 168)),
        table_mode=table.get("mode", "on-demand"),
        target_utilization=float(table.get("target_utilization", 0.7)),
        batch_size=int(events.get("batch_size", 100)),
        window_seconds=float(events.get("max_batching_window_seconds", 1)),
        parallelization=int(events.get("parallelization_factor", 1)),
        functions={
            processor: FunctionConfig(
                **{k: v for k, v in _merge(default_function, values).items() if k in _DEFAULT_FUNCTION}
            )
            for processor, values in functions.items()
        }
        or {"default": FunctionConfig(**default_function)},
        log_days=int(retention.get("log_days", 30)),
        buckets={bucket: Lifecycle(**values) for bucket, values in retention.get("buckets", {}).items()},
        buffer_seconds=int(archive.get("buffer_seconds", 300)),
        buffer_mib=int(archive.get("buffer_mib", 64)),
        glue_workers=int(analytics.get("glue_workers", 2)),
        compaction_schedule=analytics.get("compaction_schedule"),
        consumers=consumers,
    )
