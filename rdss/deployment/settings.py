"""Per-environment settings: the one place that says how dev, staging and prod differ.

The values live in ``cdk.json`` under the ``rdss`` context key: ``defaults`` holds what every
environment shares and ``environments.<name>`` only what differs, merged key by key. Anything
can also be overridden for one run with ``-c`` (``-c account=...``, ``-c region=...``). The
stacks read an :class:`EnvironmentConfig` and never look at the context themselves, so a typo
in ``cdk.json`` fails here, with the key named, instead of deep inside a construct.

This module needs no CDK: the CDK app (``stacks/config.py`` adds what only constructs need) and
the cost model (``rdss bench cost``, from an installed wheel) read the same typed settings, so
what is priced is what is deployed.

Where a ``cdk.json`` is found without the CDK CLI (:func:`locate`): a path given; else the copy
an installed wheel carries (``rdss/_cdk.json``, copied by ``setup.py`` at build time); else the
checkout's own, beside the package.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args

from rdss.deployment.capacity import Plan, Traffic, plan
from rdss.deployment.topology import RDSS, Deployment, Topology
from rdss.deployment.vendors import check_vendor_name, check_vendor_names
from rdss.host.inputs import InputTooLarge, read_input
from rdss.model.canonical import V3, VERSIONS

CONTEXT_KEY = "rdss"

RemovalMode = Literal["retain", "destroy"]
CapacityMode = Literal["on-demand", "provisioned"]

#: The retention periods CloudWatch Logs offers, in days.
LOG_RETENTION_DAYS = (
    *(1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545),
    *(731, 1096, 1827, 2192, 2557, 2922, 3288, 3653),
)


class ConfigError(ValueError):
    """The ``rdss`` context in cdk.json (or a ``-c`` override) is missing or malformed."""


@dataclass(frozen=True)
class TrafficSettings:
    """The steady rate the environment is sized for, and the headroom kept above it."""

    #: Messages per second into ``input`` (116/s is 10 million a day).
    rate_per_second: float = 1.16
    #: Provisioned streams carry this many times the rate (bursts, a consumer catching up).
    headroom: float = 2.0


@dataclass(frozen=True)
class _Capacity:
    """What streams and tables alike are billed by: capacity on demand, or provisioned."""

    mode: CapacityMode = "on-demand"

    @property
    def on_demand(self) -> bool:
        return self.mode == "on-demand"


@dataclass(frozen=True)
class StreamCapacity(_Capacity):
    """Kinesis capacity: on-demand, or provisioned shards per channel.

    Provisioned shard counts are sized from the traffic (``rdss.deployment.capacity``: bytes and records in,
    bytes out to every reader, times the headroom) unless ``shards`` names a count for the
    channel or a ``default`` for all.
    """

    shards: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class TableCapacity(_Capacity):
    """The ``messages`` table (the broker's claims): on-demand, or provisioned with auto scaling
    from the capacity the traffic needs (at ``target_utilization``) up to ``max_scale`` times it.
    The other tables see little traffic and stay on-demand."""

    target_utilization: float = 0.7
    max_scale: float = 4.0


@dataclass(frozen=True)
class EventSourceSettings:
    """How a Kinesis event source mapping feeds a processor, and when it gives up on a batch."""

    batch_size: int = 100
    max_batching_window_seconds: int = 1
    parallelization_factor: int = 1
    #: Retries of a failing batch (after bisecting) before it goes to the on-failure queue.
    retry_attempts: int = 3
    #: Failed attempts at one record before its processor moves it to ``error`` (GENERR009) and
    #: goes on with the records after it (rdss.processors.attempts). At most retry_attempts + 1, so the
    #: mapping never parks a record its processor would have moved.
    record_attempts: int = 3
    #: Records older than this are not retried but sent to the on-failure queue.
    max_record_age_hours: int = 24


@dataclass(frozen=True)
class FunctionSettings:
    memory_mb: int = 512
    timeout_seconds: int = 60
    log_level: str = "INFO"
    #: Concurrent executions reserved for (and the most allowed to) the function: a flood of
    #: records cannot take the account's whole concurrency from every other function, and the
    #: function is always able to run. None: share the account's unreserved pool.
    reserved_concurrency: int | None = None


@dataclass(frozen=True)
class AlarmThresholds:
    """When an operator is paged (every alarm notifies the environment's alarm topic)."""

    #: Oldest record a processor has not yet handled (Lambda IteratorAge, maximum).
    iterator_age_seconds: int = 300
    #: Batches parked in a processor's on-failure queue.
    dlq_depth: int = 1
    #: Records published to the error channel in five minutes.
    error_channel_records: int = 1
    #: Records published to the invalid channel in five minutes (producers sending bad messages).
    invalid_channel_records: int = 100
    #: Function errors in five minutes.
    lambda_errors: int = 1
    #: Throttled invocations in five minutes.
    lambda_throttles: int = 1


@dataclass(frozen=True)
class BucketLifecycle:
    """When a bucket's objects move to cheaper storage and when they expire (None: never)."""

    expire_after_days: int | None = None
    infrequent_access_after_days: int | None = None
    #: To Glacier Instant Retrieval (read as any object, at a retrieval fee).
    glacier_after_days: int | None = None
    #: To Glacier Deep Archive (restored before it can be read, within 12 hours).
    deep_archive_after_days: int | None = None


@dataclass(frozen=True)
class RetentionSettings:
    """How long things are kept. ``None`` means for ever (subject to the removal policy)."""

    log_days: int = 30
    access_log_days: int = 90
    #: Per bucket (a topology bucket, or ``curated``); a topology bucket with no entry keeps
    #: the topology's own expiry (``staging``: 8 days).
    buckets: Mapping[str, BucketLifecycle] = field(default_factory=dict)
    athena_results_days: int = 30
    #: Delivery-failure and temporary objects Firehose and Glue leave behind.
    scratch_days: int = 7
    #: On-failure (dead-letter) queues; SQS keeps a message at most 14 days.
    dlq_days: int = 14


@dataclass(frozen=True)
class ArchiveSettings:
    """The archive: the archiver's batches, and Firehose's buffering of them into S3 objects."""

    #: Firehose buffering: how long/large a buffer grows before it becomes one S3 object.
    buffer_seconds: int = 300
    buffer_mib: int = 64
    #: The archiver's event source mappings: records per invocation (Lambda also stops a batch at
    #: 6 MB of payload) and how long a batch may wait to fill. Larger batches make fewer, larger
    #: gzip members: fewer invocations and Firehose records, better compression.
    batch_size: int = 10_000
    max_batching_window_seconds: int = 60

    def __post_init__(self) -> None:
        if not 1 <= self.batch_size <= 10_000:
            raise ConfigError(
                f"archive.batch_size must be 1 to 10,000 (a Kinesis mapping's limit), not {self.batch_size}"
            )
        if not 0 <= self.max_batching_window_seconds <= 300:
            raise ConfigError(
                f"archive.max_batching_window_seconds must be 0 to 300, not {self.max_batching_window_seconds}"
            )


@dataclass(frozen=True)
class AnalyticsSettings:
    #: Athena stops a query that scans more than this (the workgroup enforces it).
    bytes_scanned_cutoff_mib: int = 10240
    #: Workers of each Glue job (G.1X).
    glue_workers: int = 2
    glue_timeout_minutes: int = 60
    #: First date partition projection offers (``dt`` and ``year``).
    first_year: int = 2025
    #: When the compaction job runs (a Glue cron expression; the report follows each successful
    #: run). None: only on demand.
    compaction_schedule: str | None = None


_ACCOUNT = re.compile(r"\d{12}\Z")
#: An IAM principal ARN: an account root, a role or a user (paths allowed), in any partition.
_PRINCIPAL_ARN = re.compile(r"arn:aws(-cn|-us-gov)?:iam::\d{12}:(root|(role|user)/[\w+=,.@/-]{1,512})\Z")
#: STS's own rule for ExternalId (2 to 1224 characters of this set).
_EXTERNAL_ID = re.compile(r"[\w+=,.@:/-]{2,1224}\Z")


@dataclass(frozen=True)
class VendorSettings:
    """A vendor let into the environment: who may assume its role, and what it does.

    ``principal`` is the vendor's AWS account ID (any principal of that account its own IAM
    allows) or one principal's ARN; ``external_id`` is the ID it must present when assuming the
    role (the confused-deputy guard). The vendor's name is its consumer group: its checkpoints
    and leases are the rows whose ``lease`` starts with ``<name>#``.
    """

    principal: str
    external_id: str
    #: Puts messages on ``input`` (the only channel a producer writes).
    produces: bool = False
    #: Routed channels it reads (``responses`` is always readable, for request-reply).
    consumes: tuple[str, ...] = ()
    #: The Message API version its application reads (``reads`` in cdk.json): its gateway
    #: translates every message it receives to this version (rdss.model.translation).
    reads: str = V3

    @property
    def account(self) -> str:
        return self.principal if _ACCOUNT.match(self.principal) else self.principal.split(":")[4]


@dataclass(frozen=True)
class EnvironmentConfig:
    """Everything that differs between environments, typed."""

    name: str
    account: str | None
    region: str | None
    removal_policy: RemovalMode
    stream_retention_hours: int
    traffic: TrafficSettings
    stream_capacity: StreamCapacity
    table_capacity: TableCapacity
    event_source: EventSourceSettings
    functions: Mapping[str, FunctionSettings]
    alarms: AlarmThresholds
    retention: RetentionSettings
    archive: ArchiveSettings
    analytics: AnalyticsSettings
    #: Seconds after which the sweep moves an incomplete sequence to the error channel.
    sequence_timeout_seconds: int
    alarm_email: str | None = None
    termination_protection: bool = False
    #: Whether the stack may hold Lambda-backed custom resources (the auto-delete of dev's
    #: buckets). False for a CloudFormation that cannot invoke functions (``-c
    #: custom_resources=false``): buckets are then emptied by whoever deletes the stack.
    custom_resources: bool = True
    #: The functions' architecture: arm64 (Graviton, the default), or x86_64 (``-c
    #: lambda_architecture=x86_64``) for an emulator that runs them natively on an x86_64 host.
    lambda_architecture: str = "arm64"
    #: Vendors by name (``vendors.<name>`` in cdk.json).
    vendors: Mapping[str, VendorSettings] = field(default_factory=dict)
    #: The functions' X-Ray tracing (:data:`TRACING_MODES`): ``active`` samples by Lambda's own rule
    #: (the first invocation each second and 5 % of the rest, per function; Lambda offers no other
    #: rate), ``pass-through`` records only what a caller already sampled (a stream-fed function:
    #: nothing), ``disabled`` nothing.
    tracing: str = "active"
    #: The tenant's Jisc ID: what a message translated up to 4.0.0 carries as ``tenantJiscID``
    #: (a field 3.0.2 lacks). None: no 3.0.2 message can be translated to 4.0.0 here.
    tenant_jisc_id: int | None = None

    @property
    def retains_data(self) -> bool:
        return self.removal_policy == "retain"

    @property
    def auto_delete_objects(self) -> bool:
        """Buckets are emptied by the stack itself when it is deleted."""
        return not self.retains_data and self.custom_resources

    def lifecycle(self, bucket: str, default_expiry_days: int | None = None) -> BucketLifecycle:
        """The lifecycle of ``bucket``: its entry in ``retention.buckets``, else ``default_expiry_days``."""
        return self.retention.buckets.get(bucket) or BucketLifecycle(expire_after_days=default_expiry_days)

    @property
    def capacity(self) -> Plan:
        """Shards per channel and the claims table's units, for the configured traffic."""
        return self.capacity_at(self.traffic.rate_per_second)

    def capacity_at(self, rate_per_second: float) -> Plan:
        """What these settings hold for ``rate_per_second`` (the cost model prices other rates)."""
        return plan(
            Traffic(rate_per_second, consumers=self.consumer_groups()),
            headroom=self.traffic.headroom,
            explicit_shards=self.stream_capacity.shards,
            parallelization=self.event_source.parallelization_factor,
            batch_size=self.event_source.batch_size,
            window_seconds=self.event_source.max_batching_window_seconds,
            target_utilization=self.table_capacity.target_utilization,
        )

    def consumer_groups(self) -> dict[str, int]:
        """Vendors reading each routed channel (what a provisioned stream must serve)."""
        groups: dict[str, int] = {}
        for vendor in self.vendors.values():
            for channel in vendor.consumes:
                groups[channel] = groups.get(channel, 0) + 1
        return groups

    def function(self, processor: str) -> FunctionSettings:
        """Settings of one processor's function: its own entry, else ``default``."""
        return self.functions.get(processor) or self.functions["default"]


_T = TypeVar("_T")


def _build(cls: type[_T], values: Any, where: str) -> _T:
    if not isinstance(values, Mapping):
        raise ConfigError(f"{where}: expected an object, found {values!r}")
    known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    unknown = set(values) - known
    if unknown:
        raise ConfigError(f"{where}: unknown setting(s) {sorted(unknown)}; known: {sorted(known)}")
    try:
        return cls(**values)
    except TypeError as error:
        raise ConfigError(f"{where}: {error}") from error


def _merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _retention(values: Any, where: str) -> RetentionSettings:
    if not isinstance(values, Mapping):
        raise ConfigError(f"{where}: expected an object, found {values!r}")
    buckets = values.get("buckets", {})
    if not isinstance(buckets, Mapping):
        raise ConfigError(f"{where}.buckets: expected an object, found {buckets!r}")
    lifecycles = {
        name: _build(BucketLifecycle, lifecycle, f"{where}.buckets.{name}") for name, lifecycle in buckets.items()
    }
    return _build(RetentionSettings, {**values, "buckets": lifecycles}, where)


def _tenant(value: Any, where: str) -> int | None:
    if value is not None and (type(value) is not int or value < 0):
        raise ConfigError(f"{where}: expected a Jisc ID (a whole number) or null, found {value!r}")
    return value


def _vendors(values: Any, where: str, routed: Sequence[str], environment: str) -> dict[str, VendorSettings]:
    if not isinstance(values, Mapping):
        raise ConfigError(f"{where}: expected an object, found {values!r}")
    vendors = {}
    for name, raw in values.items():
        here = f"{where}.{name}"
        try:
            check_vendor_name(name, Deployment(environment))
        except ValueError as error:
            raise ConfigError(f"{here}: {error}") from None
        if isinstance(raw, Mapping) and isinstance(raw.get("consumes"), list):
            raw = {**raw, "consumes": tuple(raw["consumes"])}
        vendor = _build(VendorSettings, raw, here)
        if not isinstance(vendor.principal, str) or not (
            _ACCOUNT.match(vendor.principal) or _PRINCIPAL_ARN.match(vendor.principal)
        ):
            raise ConfigError(f"{here}.principal: expected a 12-digit account ID or an IAM principal ARN")
        if not isinstance(vendor.external_id, str) or not _EXTERNAL_ID.match(vendor.external_id):
            raise ConfigError(f"{here}.external_id: 2 to 1224 characters of letters, digits and +=,.@:/-_")
        if not isinstance(vendor.produces, bool):
            raise ConfigError(f"{here}.produces: expected true or false")
        if not isinstance(vendor.consumes, tuple) or not all(isinstance(c, str) for c in vendor.consumes):
            raise ConfigError(f"{here}.consumes: expected a list of channel names")
        unknown = sorted(set(vendor.consumes) - set(routed))
        if unknown:
            raise ConfigError(
                f"{here}.consumes: {unknown} not consumable; vendors read the routed channels {sorted(routed)}"
            )
        if vendor.reads not in VERSIONS:
            raise ConfigError(f"{here}.reads: expected one of {list(VERSIONS)}, found {vendor.reads!r}")
        if not vendor.produces and not vendor.consumes:
            raise ConfigError(f"{here}: neither produces nor consumes anything")
        vendors[name] = vendor
    try:
        check_vendor_names(vendors)
    except ValueError as error:
        raise ConfigError(f"{where}: {error}") from None
    return vendors


def environment_names(context: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(context.get("environments", {}))


#: The functions' X-Ray tracing modes (Lambda's: stacks/processors.py maps them to lambda_.Tracing).
TRACING_MODES = ("active", "pass-through", "disabled")
#: The architectures a processor function may be built for (stacks.bundling's platforms).
LAMBDA_ARCHITECTURES = ("arm64", "x86_64")


#: The settings that are one object of their own each, by key (``traffic``: a TrafficSettings).
_SECTIONS: Mapping[str, type] = {
    "stream_capacity": StreamCapacity,
    "traffic": TrafficSettings,
    "table_capacity": TableCapacity,
    "event_source": EventSourceSettings,
    "alarms": AlarmThresholds,
    "archive": ArchiveSettings,
    "analytics": AnalyticsSettings,
}

_CAPACITY_MODES = get_args(CapacityMode)
_Rule = tuple[str, Callable[[EnvironmentConfig], bool], Callable[[EnvironmentConfig], str]]
#: What a built configuration must also hold, in the order checked: the setting named (below the
#: environment), whether it holds, and what is wrong when it does not. A rule sees the whole
#: configuration, so one may relate two sections (record attempts and the mapping's retries).
_RULES: tuple[_Rule, ...] = (
    (
        "stream_capacity.mode",
        lambda c: c.stream_capacity.mode in _CAPACITY_MODES,
        lambda c: "expected 'on-demand' or 'provisioned'",
    ),
    (
        "stream_capacity.shards",
        lambda c: all(isinstance(n, int) and n >= 1 for n in c.stream_capacity.shards.values()),
        lambda c: "expected whole numbers of shards, at least 1",
    ),
    (
        "traffic",
        lambda c: c.traffic.rate_per_second > 0 and c.traffic.headroom >= 1,
        lambda c: "rate_per_second must be above 0 and headroom at least 1",
    ),
    (
        "table_capacity",
        lambda c: c.table_capacity.mode in _CAPACITY_MODES and 0.2 <= c.table_capacity.target_utilization <= 0.9,
        lambda c: "mode 'on-demand' or 'provisioned', target_utilization 0.2-0.9",
    ),
    ("table_capacity.max_scale", lambda c: c.table_capacity.max_scale >= 1, lambda c: "at least 1"),
    (
        "stream_retention_hours",
        lambda c: 24 <= c.stream_retention_hours <= 8760,
        lambda c: "Kinesis keeps records 24 to 8760 hours",
    ),
    (
        "event_source.record_attempts",
        lambda c: 1 <= c.event_source.record_attempts <= c.event_source.retry_attempts + 1,
        lambda c: (
            f"1 to retry_attempts + 1 ({c.event_source.retry_attempts + 1}), "
            "so that a record failing every time is moved to error before its batch is parked"
        ),
    ),
    (
        "lambda_architecture",
        lambda c: c.lambda_architecture in LAMBDA_ARCHITECTURES,
        lambda c: f"one of {LAMBDA_ARCHITECTURES}, not {c.lambda_architecture!r}",
    ),
    ("tracing", lambda c: c.tracing in TRACING_MODES, lambda c: f"one of {TRACING_MODES}, not {c.tracing!r}"),
    (
        "retention.log_days",
        lambda c: c.retention.log_days in LOG_RETENTION_DAYS,
        lambda c: f"CloudWatch Logs offers {list(LOG_RETENTION_DAYS)} days",
    ),
)


def load(
    context: Mapping[str, Any],
    name: str,
    *,
    account: str | None = None,
    region: str | None = None,
    environ: Mapping[str, str] | None = None,
    custom_resources: bool | None = None,
    lambda_architecture: str | None = None,
    topology: Topology = RDSS,
) -> EnvironmentConfig:
    """The settings of environment ``name`` from the ``rdss`` context object.

    Account and region: an explicit argument (``-c account=``) wins, then the environment's
    entry in cdk.json, then ``CDK_DEFAULT_ACCOUNT``/``CDK_DEFAULT_REGION`` (which the CDK CLI
    sets from the caller's credentials). With none, the stacks stay environment-agnostic.
    """
    environ = os.environ if environ is None else environ
    environments = context.get("environments", {})
    if name not in environments:
        raise ConfigError(f"unknown environment {name!r}; choose one of {sorted(environments)}")
    raw = _merge(context.get("defaults", {}), environments[name])
    where = f"cdk.json context {CONTEXT_KEY}.environments.{name}"

    removal = raw.pop("removal_policy", None)
    if removal not in ("retain", "destroy"):
        raise ConfigError(f"{where}.removal_policy: expected 'retain' or 'destroy', found {removal!r}")
    sections: dict[str, Any] = {
        key: _build(kind, raw.pop(key, {}), f"{where}.{key}") for key, kind in _SECTIONS.items()
    }
    functions_raw = raw.pop("functions", {})
    if "default" not in functions_raw:
        raise ConfigError(f"{where}.functions: a 'default' entry is required")
    default_function = functions_raw["default"]
    functions = {
        processor: _build(FunctionSettings, _merge(default_function, values), f"{where}.functions.{processor}")
        for processor, values in functions_raw.items()
    }

    config = EnvironmentConfig(
        name=name,
        account=account or raw.pop("account", None) or environ.get("CDK_DEFAULT_ACCOUNT") or None,
        region=region or raw.pop("region", None) or environ.get("CDK_DEFAULT_REGION") or None,
        removal_policy=removal,
        stream_retention_hours=int(raw.pop("stream_retention_hours", 24)),
        functions=functions,
        retention=_retention(raw.pop("retention", {}), f"{where}.retention"),
        sequence_timeout_seconds=int(raw.pop("sequence_timeout_seconds", 3600)),
        alarm_email=raw.pop("alarm_email", None),
        termination_protection=bool(raw.pop("termination_protection", False)),
        custom_resources=bool(raw.pop("custom_resources", True)) if custom_resources is None else custom_resources,
        lambda_architecture=lambda_architecture or str(raw.pop("lambda_architecture", "arm64")),
        vendors=_vendors(
            raw.pop("vendors", {}), f"{where}.vendors", [c.name for c in topology.channels_of("routed")], name
        ),
        tracing=str(raw.pop("tracing", "active")),
        tenant_jisc_id=_tenant(raw.pop("tenant_jisc_id", None), f"{where}.tenant_jisc_id"),
        **sections,
    )
    raw.pop("account", None)
    raw.pop("region", None)
    if raw:
        raise ConfigError(f"{where}: unknown setting(s) {sorted(raw)}")
    for setting, holds, wrong in _RULES:
        if not holds(config):
            raise ConfigError(f"{where}.{setting}: {wrong(config)}")
    return config


#: The most of a settings file read: a cdk.json is kilobytes; a file given by mistake (a log, an
#: archive, a disk image) is refused without being read whole.
MAX_SETTINGS_BYTES = 4 * 1024 * 1024


def locate(path: Path | None = None) -> Path:
    """The cdk.json to read (see the module's docstring)."""
    if path is not None:
        if not path.exists():
            raise ConfigError(f"{path}: no such file")
        if not path.is_file():  # a directory, a device (/dev/zero), a pipe: not a cdk.json
            raise ConfigError(f"{path}: not a regular file")
        return path
    here = Path(__file__).resolve().parents[1]  # rdss/, this module being in rdss/model or rdss/deployment
    for candidate in (here / "_cdk.json", here.parent / "cdk.json"):
        if candidate.is_file():
            return candidate
    raise ConfigError("no cdk.json beside the package: pass --config PATH (a cdk.json holding the rdss context)")


def read_context(path: Path | None = None) -> dict[str, Any]:
    """The ``rdss`` context object of a cdk.json (or of a file holding that object itself).

    At most :data:`MAX_SETTINGS_BYTES` are read: a larger file is refused as not a cdk.json.
    """
    where = locate(path)
    try:
        raw = read_input(where, MAX_SETTINGS_BYTES)  # a Path: never standard input
    except InputTooLarge as error:
        raise ConfigError(f"{where}: larger than {MAX_SETTINGS_BYTES // 1024 // 1024} MiB, not a cdk.json") from error
    except OSError as error:
        raise ConfigError(f"{where}: not readable ({error.strerror or error})") from error
    try:
        data = json.loads(raw)
    except ValueError as error:
        raise ConfigError(f"{where}: not readable JSON ({error})") from error
    context = data.get("context", {}).get(CONTEXT_KEY, data.get(CONTEXT_KEY, data)) if isinstance(data, dict) else None
    if not isinstance(context, dict) or not isinstance(context.get("environments"), dict):
        raise ConfigError(f"{where}: no rdss context with environments")
    return context


def load_file(name: str, path: Path | None = None) -> EnvironmentConfig:
    """Environment ``name`` as a cdk.json (:func:`locate`) defines it, with no ``-c`` overrides
    and nothing taken from ``CDK_DEFAULT_*``: what a synthesis of that file deploys."""
    return load(read_context(path), name, environ={})
