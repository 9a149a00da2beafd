"""The broker: classification, de-duplication and routing of the ``input`` channel."""

from rdss.deployment.routing import Destination, Router
from rdss.processors.broker.app import Broker

__all__ = ["Broker", "Destination", "Router"]
