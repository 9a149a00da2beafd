"""The broker Lambda: the broker AMGI app behind the Kinesis event-source-mapping adaptor."""

from rdss.amgi.kinesis import KinesisEventSourceMappingHandler
from rdss.broker import Broker

handler = KinesisEventSourceMappingHandler(Broker.from_environment())
