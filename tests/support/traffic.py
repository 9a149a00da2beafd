"""Workloads for one routed channel: what the broker routes there by type and class."""

from __future__ import annotations

from rdss.deployment.topology import RDSS
from rdss.model.messages import Message
from rdss.model.workload import Workload


def routes_to(message: Message, channel: str) -> bool:
    header = message["messageHeader"]
    route = RDSS.route(header["messageType"], header["messageClass"])
    return route is not None and route.channel == channel


def channel_mix(seed: int, count: int, channel: str = "metadata") -> list[Message]:
    """``count`` messages of the realistic mix that the broker routes to ``channel``."""
    found: list[Message] = []
    for message in Workload(seed=seed).stream(count * 20):
        if routes_to(message, channel):
            found.append(message)
            if len(found) == count:
                return found
    raise ValueError(f"the mix gave fewer than {count} messages for {channel}")
