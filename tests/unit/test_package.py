"""The package holds the product: ``rdss`` imports nothing of the checkout (``glue_jobs``,
``tools``, ``tests``), the processors' import graph stays lean (each Lambda asset bundles only what
its handler imports)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "rdss"
CHECKOUT_ONLY = ("glue_jobs", "tools", "tests")
#: Imports of the checkout the package may make, each guarded (ImportError gives a clear message).
GUARDED = {"rdss/bench/amqp.py: tests.support.rabbitmq"}  # a private node only from a checkout


def imported_modules(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def test_rdss_imports_nothing_from_the_checkout():
    offending = {
        f"{path.relative_to(ROOT)}: {module}"
        for path in PACKAGE.rglob("*.py")
        for module in imported_modules(path)
        if module.split(".")[0] in CHECKOUT_ONLY
    }
    assert not offending - GUARDED, sorted(offending)


def test_the_check_above_would_see_such_an_import(tmp_path: Path):
    sample = tmp_path / "sample.py"
    sample.write_text("import os\nfrom tools.diagram import main\nif True:\n    import glue_jobs.schema\n")
    assert {m.split(".")[0] for m in imported_modules(sample)} & set(CHECKOUT_ONLY) == {"tools", "glue_jobs"}


def test_the_processors_import_neither_the_gateway_nor_the_tools():
    code = (
        "import sys; import rdss.amgi.kinesis, rdss.processors.broker, rdss.processors.sequencer, "
        "rdss.processors.sequencer.sweep; "
        "print('\\n'.join(sorted(sys.modules)))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    modules = loaded.stdout.split()
    assert "rdss.processors.broker.app" in modules
    heavy = ("rdss.gateway", "rdss.local", "rdss.cli", "rdss.adaptors", "rdss.gateway.bridge", "pika", *CHECKOUT_ONLY)
    assert [m for m in modules if m.split(".")[0] in heavy or m.startswith(heavy)] == []


def test_the_glue_jobs_know_the_message_types_rdss_knows():
    """glue_jobs/schema.py travels to Glue alone, so it spells the list out; it must be rdss's,
    every version's (a 4.0.0 PreservationEvent is not filed as Unknown)."""
    from glue_jobs import schema
    from rdss.model import schemas

    assert schema.MESSAGE_TYPES == schemas.SPOKEN_TYPES
    assert "PreservationEvent" in schema.MESSAGE_TYPES


def test_no_module_of_the_package_is_over_600_lines():
    """One job per module (issue 16); the C fast path is the classifier's to retire."""
    long = {
        str(path.relative_to(ROOT)): lines
        for path in PACKAGE.rglob("*.py")
        if (lines := len(path.read_text().splitlines())) > 600
    }
    assert long == {}


def test_a_checkouts_rdss_finds_the_cdk_app_beside_it(tmp_path: Path):
    """`.venv/bin/rdss bench coldstart` (an editable install: stacks/ is not on its path) builds
    the assets of the checkout it runs from; an installed package has no CDK app beside it."""
    from rdss.host import resources

    assert resources.cdk_app_checkout() == ROOT
    found = subprocess.run(
        [sys.executable, "-c", "from rdss.host import resources; print(resources.cdk_app_checkout())"],
        cwd=tmp_path,  # not the checkout: stacks is not importable from here
        capture_output=True,
        text=True,
        check=True,
    )
    assert found.stdout.strip() == str(ROOT)
