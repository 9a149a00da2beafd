"""Content-based routing (EIP Content-Based Router) and Return Address resolution."""

# No ``from __future__ import annotations``: a NamedTuple would compile each string annotation
# when made. Every processor's cold start defines the records here (rdss.deployment.topology says more).

from typing import NamedTuple

from rdss.deployment.topology import RDSS, Resolved, Topology


class Destination(NamedTuple):
    """Where a message goes: its channel and that channel's stream."""

    channel: str  # logical
    stream: str  # physical
    #: True when a reply went to its default channel because its request's returnAddress was
    #: unknown or could not be found.
    fallback: bool = False


class Router:
    """Where a valid whole message goes, by messageType and messageClass.

    A Document answering a Read goes to the returnAddress its request named; that address is
    a channel of the topology, by logical name (``responses``) or physical stream name.
    """

    def __init__(self, names: Resolved, topology: Topology = RDSS) -> None:
        self.names = names
        self.topology = topology
        self._by_stream = {names.stream(c.name): c.name for c in topology.channels}

    def needs_return_address(self, message_type: str, message_class: str) -> bool:
        route = self.topology.route(message_type, message_class)
        return route is not None and route.reply

    def destination(self, message_type: str, message_class: str, return_address: str | None = None) -> Destination:
        route = self.topology.route(message_type, message_class)
        if route is None:  # pragma: no cover - the classifier rejects unroutable pairs first
            raise LookupError(f"no route for {message_type} as {message_class}")
        if route.reply:
            channel = self.channel_for_address(return_address)
            if channel is not None:
                return Destination(channel, self.names.stream(channel))
            return Destination(route.channel, self.names.stream(route.channel), fallback=True)
        return Destination(route.channel, self.names.stream(route.channel))

    def channel_for_address(self, address: str | None) -> str | None:
        """The routed channel a returnAddress names, or None if it names none of ours."""
        if not address:
            return None
        name = address.rsplit("/", 1)[-1]  # an ARN names the stream after the slash
        channel = name if name in {c.name for c in self.topology.channels} else self._by_stream.get(name)
        if channel is None or self.topology.channel(channel).kind != "routed":
            return None
        return channel
