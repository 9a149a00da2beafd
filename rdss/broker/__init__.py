"""The broker: classification, de-duplication and routing of the ``input`` channel."""

from rdss.broker.app import Broker
from rdss.routing import Destination, Router

__all__ = ["Broker", "Destination", "Router"]
