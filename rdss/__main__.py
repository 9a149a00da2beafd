"""``python -m rdss``: the command line."""

from rdss.cli import main

raise SystemExit(main())
