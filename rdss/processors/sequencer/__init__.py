"""The sequencer and its sweep: multi-message sequences, released whole or not at all.

The names are loaded from their modules when first asked for (PEP 562): the sweep's Lambda
imports the sweep alone, without the sequencer and the classifier it reassembles with.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rdss.processors.sequencer.app import Sequencer
    from rdss.processors.sequencer.store import SequenceStore
    from rdss.processors.sequencer.sweep import Sweep

__all__ = ["SequenceStore", "Sequencer", "Sweep"]


def __getattr__(name: str) -> Any:
    if name == "Sequencer":
        from rdss.processors.sequencer.app import Sequencer

        return Sequencer
    if name == "SequenceStore":
        from rdss.processors.sequencer.store import SequenceStore

        return SequenceStore
    if name == "Sweep":
        from rdss.processors.sequencer.sweep import Sweep

        return Sweep
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
