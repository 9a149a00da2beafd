"""Imported first by :mod:`rdss.cli`: Ctrl-C while the command's modules load.

Loading the command line takes a few tenths of a second before :func:`rdss.cli.main` can catch
an interrupt; Ctrl-C in that window raised KeyboardInterrupt out of an import, and Python printed
its traceback. A command interrupted then ends as one interrupted later does: no traceback (the
process still dies of SIGINT, which the shell reports as 130). Any other uncaught exception is
printed as before.
"""

from __future__ import annotations

import sys
from types import TracebackType

_previous = sys.excepthook


def _quiet_interrupt(kind: type[BaseException], error: BaseException, traceback: TracebackType | None) -> None:
    if issubclass(kind, KeyboardInterrupt):
        return
    _previous(kind, error, traceback)


sys.excepthook = _quiet_interrupt
