"""Tools of the repository's checkout, not of the installed ``rdss`` package: the topology
diagram of the docs (``python -m tools.diagram``) and the Spark class-data-sharing recorder of
``make setup`` (``python -m tools.sparkcds``). ``rdss`` never imports them (.importlinter)."""
