"""The sequencer Lambda: the sequencer AMGI app behind the Kinesis event-source-mapping adaptor."""

from rdss.amgi.kinesis import KinesisEventSourceMappingHandler
from rdss.sequencer import Sequencer

handler = KinesisEventSourceMappingHandler(Sequencer.from_environment())
