"""The sequencer and its sweep: multi-message sequences, released whole or not at all."""

from rdss.sequencer.app import Sequencer
from rdss.sequencer.store import SequenceStore
from rdss.sequencer.sweep import Sweep

__all__ = ["SequenceStore", "Sequencer", "Sweep"]
