"""The Node.js the CDK runs on: the one ``package.json`` pins, not whichever the machine has.

``npm ci`` (``make node``) installs the CDK CLI and Node 22 itself into ``node_modules/``: npm's
``node-<platform>`` packages carry the binary (``node_modules/.bin/node``), so it is pinned and
locked like the CLI, and installing it needs nothing but npm. Three things start Node: the CDK
CLI (``node_modules/.bin`` first on the Makefile's PATH; ``npx cdk`` puts it there itself), jsii,
which the CDK's Python starts when ``aws_cdk`` is first imported (:func:`use_project_node` points
it at the pinned Node), and LocalStack's Node Lambda runtime in the tests
(``tests/support/localstack``). On a machine npm has no such package for, the machine's Node is
used.
"""

from __future__ import annotations

import os
from pathlib import Path

#: Where ``npm ci`` puts the pinned Node.
NODE = Path(__file__).resolve().parents[1] / "node_modules" / ".bin" / "node"


def project_node() -> Path | None:
    """The pinned Node, if ``npm ci`` installed it."""
    return NODE if NODE.exists() else None


def use_project_node() -> None:
    """Have jsii start the pinned Node (``JSII_NODE``, unless set already): it otherwise runs the
    first ``node`` on PATH, and warns on every start when that one is past its end of life."""
    node = project_node()
    if node is not None:
        os.environ.setdefault("JSII_NODE", str(node))
