"""The system's topology, described once: channels, routes, tables, buckets and processors.

The broker and sequencer route with it, the CDK app builds streams, tables, functions and
permissions from it, and the local runtime creates the same resources in the emulator from
it, so the three cannot drift. Names here are logical (``metadata``); :class:`Deployment` turns
them into physical names for one environment (``rdss-dev-metadata``).
"""

# No ``from __future__ import annotations``: the records below are NamedTuples, which would
# compile each string annotation (a ForwardRef) when made. Every Lambda function imports this
# module at its cold start; a NamedTuple costs a fifth of a frozen dataclass to define.
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal, NamedTuple

ChannelKind = Literal["input", "routed", "sequence", "invalid", "error"]

#: An empty mapping no one can fill: the default of a record's mapping field, shared by all.
_NONE: Mapping[str, str] = MappingProxyType({})


class Channel(NamedTuple):
    """A Kinesis stream the system owns."""

    name: str
    kind: ChannelKind
    description: str
    #: Where every record of this channel is archived (an S3 key prefix whose first segment names
    #: the bucket), if anywhere: the archiver writes it through a Firehose delivery stream.
    archive: str | None = None


class Route(NamedTuple):
    """Content-based routing: a message of this type and class goes to ``channel``.

    ``reply`` routes send a Document to the returnAddress its request named (looked up in the
    ``messages`` table by correlationId), falling back to ``channel``.
    """

    message_type: str
    message_classes: tuple[str, ...]
    channel: str
    reply: bool = False


class Table(NamedTuple):
    """A DynamoDB table (on-demand, encrypted, point-in-time recovery)."""

    name: str
    partition_key: str
    sort_key: str | None = None
    ttl_attribute: str | None = None
    description: str = ""


class Bucket(NamedTuple):
    """An S3 bucket the system owns."""

    name: str
    description: str
    #: Days after which objects expire; None keeps them (subject to the environment's rules).
    expire_after_days: int | None = None


class Processor(NamedTuple):
    """A Lambda function and everything it touches (what its role is granted, nothing more)."""

    name: str
    handler: str  # path under lambdas/, e.g. "broker/handler.handler"
    description: str
    #: The channels it reads, one event source mapping each (the broker: ``input``).
    sources: tuple[str, ...] = ()
    sends_to: tuple[str, ...] = ()
    reads_tables: tuple[str, ...] = ()
    writes_tables: tuple[str, ...] = ()
    reads_buckets: tuple[str, ...] = ()
    writes_buckets: tuple[str, ...] = ()
    #: An EventBridge schedule expression for processors that run on a timer.
    schedule: str | None = None
    #: Archived channels whose Firehose delivery streams it writes (PutRecordBatch), and under
    #: whose archive prefixes it may store an entry too large for one Firehose record.
    archives: tuple[str, ...] = ()


@dataclass(frozen=True)
class Topology:
    """Everything the system owns, checked for names that refer to nothing."""

    channels: tuple[Channel, ...]
    routes: tuple[Route, ...]
    tables: tuple[Table, ...]
    buckets: tuple[Bucket, ...]
    processors: tuple[Processor, ...]
    _by_name: dict[str, Channel] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_name", {c.name: c for c in self.channels})
        for route in self.routes:
            if route.channel not in self._by_name:
                raise ValueError(f"route {route} names an unknown channel")
        for processor in self.processors:
            for name in (*processor.sources, *processor.sends_to, *processor.archives):
                if name not in self._by_name:
                    raise ValueError(f"processor {processor.name} names an unknown channel {name!r}")
            for name in processor.archives:
                self.archive_bucket(name)  # archived, to a bucket that exists
        written = {name for p in self.processors for name in p.archives if name in p.sources}
        unwritten = [c.name for c in self.archived() if c.name not in written]
        if unwritten:
            raise ValueError(f"no processor reads and archives channel(s) {unwritten}")

    def channel(self, name: str) -> Channel:
        return self._by_name[name]

    def channels_of(self, kind: ChannelKind) -> tuple[Channel, ...]:
        return tuple(c for c in self.channels if c.kind == kind)

    def route(self, message_type: str, message_class: str) -> Route | None:
        """The route of a message, or None when nothing routes it (the type stage prevents that)."""
        for route in self.routes:
            if route.message_type == message_type and message_class in route.message_classes:
                return route
        return None

    def processor(self, name: str) -> Processor:
        return next(p for p in self.processors if p.name == name)

    def archived(self) -> tuple[Channel, ...]:
        """The channels whose every record is archived."""
        return tuple(c for c in self.channels if c.archive is not None)

    def archive_bucket(self, channel: str) -> str:
        """The bucket a channel is archived to: the first segment of its archive prefix names it
        (``errors/invalid/`` -> ``errors``), so the topology stays the one description of both."""
        prefix = self.channel(channel).archive
        if prefix is None:
            raise ValueError(f"channel {channel} is not archived")
        bucket = prefix.split("/", 1)[0]
        if bucket not in {b.name for b in self.buckets}:
            raise ValueError(f"channel {channel} archives to {prefix!r}, but no bucket {bucket!r} exists")
        return bucket

    def table(self, name: str) -> Table:
        return next(t for t in self.tables if t.name == name)


_ALL = ("Command", "Event", "Document")

_CHANNELS = (
    Channel("input", "input", "Every message producers publish", archive="audit/"),
    Channel(
        "metadata",
        "routed",
        "Data Type Channel: MetadataCreate/Update/Delete, MetadataRead requests and PreservationEvent",
    ),
    Channel("vocabulary", "routed", "Data Type Channel: VocabularyRead requests and VocabularyPatch"),
    Channel("responses", "routed", "Replies (Documents answering Read requests) with no other return address"),
    Channel("sequence", "sequence", "Parts of multi-message sequences, keyed by sequence id"),
    Channel("invalid", "invalid", "Invalid Message Queue", archive="errors/invalid/"),
    Channel("error", "error", "Error Message Queue", archive="errors/error/"),
)
#: The channels whose every record is archived: the archiver reads and archives each.
_ARCHIVED = tuple(c.name for c in _CHANNELS if c.archive is not None)


def lease_key(group: str, stream: str) -> str:
    """The partition key of the ``checkpoints`` table's rows of one consumer group for one
    stream: ``<group>#<stream>``. Vendor roles are limited to their own group's keys with
    ``dynamodb:LeadingKeys`` (:mod:`rdss.deployment.vendors`); the gateway's leases write them."""
    return f"{group}#{stream}"


#: The RDSS topology (spec: Topology; ARCHITECTURE.md: Message flow).
RDSS = Topology(
    channels=_CHANNELS,
    routes=(
        Route("MetadataCreate", _ALL, "metadata"),
        Route("MetadataUpdate", _ALL, "metadata"),
        Route("MetadataDelete", _ALL, "metadata"),
        Route("MetadataRead", ("Command",), "metadata"),
        Route("MetadataRead", ("Document",), "responses", reply=True),
        Route("VocabularyRead", ("Command",), "vocabulary"),
        Route("VocabularyRead", ("Document",), "responses", reply=True),
        Route("VocabularyPatch", _ALL, "vocabulary"),
        # 4.0.0's PreservationEvent reports what a preservation system did to a research
        # object, so it travels with the research objects' messages on the metadata Data Type
        # Channel. A channel of its own would add a shard to every environment's bill, which
        # issue 32's cost targets cannot take; its consumers filter it by messageType.
        Route("PreservationEvent", _ALL, "metadata"),
    ),
    tables=(
        Table(
            "messages",
            "messageId",
            ttl_attribute="expiresAt",
            description="Local Data Repository: de-duplication, status and return addresses",
        ),
        Table(
            "sequences",
            "sequence",
            ttl_attribute="expiresAt",
            description="Progress of multi-message sequences (part bodies live in the staging bucket)",
        ),
        Table(
            "checkpoints",
            "lease",
            sort_key="shardId",
            ttl_attribute="expiresAt",
            description="Gateway consumers: per-shard checkpoints and leases",
        ),
    ),
    buckets=(
        Bucket("audit", "Archive of every record published to input (rdss.archive.entries entries)"),
        Bucket("errors", "Archive of the invalid and error channels (rdss.archive.entries entries)"),
        Bucket("staging", "Bodies of sequence parts: what each position of a sequence holds", expire_after_days=8),
    ),
    processors=(
        Processor(
            "broker",
            "broker/handler.handler",
            "Classifies, de-duplicates and routes every message of the input channel",
            sources=("input",),
            sends_to=("metadata", "vocabulary", "responses", "sequence", "invalid", "error"),
            reads_tables=("messages",),
            writes_tables=("messages",),
            # error records too large to travel decorated are kept there (claim check)
            writes_buckets=("errors",),
        ),
        Processor(
            "sequencer",
            "sequencer/handler.handler",
            "Holds sequence parts until complete, validates the whole, releases the parts in order",
            sources=("sequence",),
            sends_to=("metadata", "vocabulary", "responses", "invalid", "error"),
            reads_tables=("sequences", "messages"),
            # messages: its failed attempts at a part (rdss.processors.attempts), as the broker counts its own
            writes_tables=("sequences", "messages"),
            reads_buckets=("staging",),
            # parts too large to travel decorated are kept in errors (claim check)
            writes_buckets=("staging", "errors"),
        ),
        Processor(
            "sweep",
            "sweep/handler.handler",
            "Moves sequences past their expiry or the configured timeout to the error channel",
            sends_to=("error",),
            reads_tables=("sequences",),
            writes_tables=("sequences",),
            reads_buckets=("staging",),
            writes_buckets=("staging", "errors"),
            schedule="rate(5 minutes)",
        ),
        Processor(
            "archiver",
            "archiver/handler.handler",
            "Frames every record of the archived channels as an archive entry and writes them, gzip members of "
            "many entries, to the channels' Firehose delivery streams",
            sources=_ARCHIVED,
            archives=_ARCHIVED,
        ),
    ),
)


class Deployment(NamedTuple):
    """Physical names of one environment's resources: ``rdss-<env>-<logical name>``."""

    environment: str
    topology: Topology = RDSS
    prefix: str = "rdss"
    #: Overrides for bucket names (S3 names are global; the CDK app may let CloudFormation name them).
    bucket_names: Mapping[str, str] = _NONE

    def stream(self, channel: str) -> str:
        self.topology.channel(channel)
        return f"{self.prefix}-{self.environment}-{channel}"

    def table(self, table: str) -> str:
        return f"{self.prefix}-{self.environment}-{table}"

    def bucket(self, bucket: str) -> str:
        return self.bucket_names.get(bucket) or f"{self.prefix}-{self.environment}-{bucket}"

    def delivery_stream(self, channel: str) -> str:
        """The Firehose delivery stream archiving a channel: named as its stream, e.g. ``rdss-dev-input``."""
        if self.topology.channel(channel).archive is None:
            raise ValueError(f"channel {channel} is not archived")
        return self.stream(channel)

    def function(self, processor: str) -> str:
        """The Lambda function of a processor, e.g. ``rdss-dev-broker``."""
        self.topology.processor(processor)
        return f"{self.prefix}-{self.environment}-{processor}"

    def on_failure_queue(self, processor: str) -> str:
        """The SQS queue where a processor's event source mapping parks the batches it gave up on."""
        return f"{self.function(processor)}-on-failure"

    def channel_of_stream(self, stream_name: str) -> str | None:
        """The logical channel behind a physical stream name (or ARN), if it is one of ours."""
        name = stream_name.rsplit("/", 1)[-1]
        for channel in self.topology.channels:
            if self.stream(channel.name) == name:
                return channel.name
        return None

    # Lambda functions learn their resources from environment variables, so one handler works
    # in every environment and in the local runtime.
    def environment_variables(self) -> dict[str, str]:
        variables = {"RDSS_ENV": self.environment, "RDSS_PREFIX": self.prefix}
        for channel in self.topology.channels:
            variables[f"RDSS_STREAM_{channel.name.upper()}"] = self.stream(channel.name)
        for channel in self.topology.archived():
            variables[f"RDSS_DELIVERY_STREAM_{channel.name.upper()}"] = self.delivery_stream(channel.name)
        for table in self.topology.tables:
            variables[f"RDSS_TABLE_{table.name.upper()}"] = self.table(table.name)
        for bucket in self.topology.buckets:
            variables[f"RDSS_BUCKET_{bucket.name.upper()}"] = self.bucket(bucket.name)
        return variables


class Resolved(NamedTuple):
    """Names read back from the environment variables :meth:`Deployment.environment_variables` set."""

    streams: Mapping[str, str]
    tables: Mapping[str, str]
    buckets: Mapping[str, str]
    environment: str
    #: channel -> the Firehose delivery stream archiving it
    delivery_streams: Mapping[str, str] = _NONE

    def stream(self, channel: str) -> str:
        return self.streams[channel]

    def table(self, table: str) -> str:
        return self.tables[table]

    def bucket(self, bucket: str) -> str:
        return self.buckets[bucket]

    def delivery_stream(self, channel: str) -> str:
        return self.delivery_streams[channel]


def from_environment(environ: Mapping[str, str] | None = None, topology: Topology = RDSS) -> Resolved:
    """The physical names a Lambda function was configured with.

    Raises:
        KeyError: a variable is missing (the function was deployed without it).
    """
    env = os.environ if environ is None else environ
    deployment = Deployment(env.get("RDSS_ENV", "dev"), topology, env.get("RDSS_PREFIX", "rdss"))
    defaults = deployment.environment_variables()

    def read(kind: str, name: str) -> str:
        variable = f"RDSS_{kind}_{name.upper()}"
        return env.get(variable, defaults[variable])

    return Resolved(
        streams={c.name: read("STREAM", c.name) for c in topology.channels},
        tables={t.name: read("TABLE", t.name) for t in topology.tables},
        buckets={b.name: read("BUCKET", b.name) for b in topology.buckets},
        environment=deployment.environment,
        delivery_streams={c.name: read("DELIVERY_STREAM", c.name) for c in topology.archived()},
    )
