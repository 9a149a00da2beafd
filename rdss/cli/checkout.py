"""Commands that run tools of the repository's checkout rather than of the installed package.

The benchmarks, workload generators, the demo and the tour live in ``tools/`` beside ``rdss/``:
they need the examples, the Glue jobs and the test fixtures, none of which the package ships.
``python -m rdss bench ...`` run from a checkout (the working directory on ``sys.path``) finds
them; anywhere else the command says so instead of failing with an import error.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from rdss.cli.common import CommandError


def tool(name: str) -> ModuleType:
    """The module ``tools.<name>`` of the checkout.

    Raises:
        CommandError: there is no checkout's ``tools/`` to import it from (exit code 2).
    """
    try:
        return importlib.import_module(f"tools.{name}")
    except ModuleNotFoundError as error:
        if error.name not in ("tools", f"tools.{name}"):
            raise
        raise CommandError(
            f"tools.{name} is not here: this command runs from a checkout of the repository "
            "(cd to it and run `python -m rdss ...`); the installed package holds the product only"
        ) from None
