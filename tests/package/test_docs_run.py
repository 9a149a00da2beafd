"""The docs are executed: every ``sh`` and ``python`` block of README.md and docs/*.md, in order,
from the installed wheel, against one fresh ``rdss local up`` (with the vendors docs/vendors.md
starts it with), outside the checkout.

The convention (docs/contributors.md, "Docs that run"): a fenced block tagged ``sh`` runs in bash
(``set -euo pipefail``), one tagged ``python`` in the venv's interpreter, each page in a working
directory of its own; a block of either that is not meant to run is preceded by
``<!-- not run: why -->``. Untagged fences and indented blocks are synopses, never run. A block
fails the test on a non-zero exit or a traceback.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.package.conftest import LocalRuntime, serve

pytestmark = pytest.mark.slow

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUNNABLE = {"sh", "python"}
#: Tags that look runnable but are not the convention's: write ``sh`` or ``python``.
LOOKALIKES = {"bash", "shell", "console", "shell-session", "zsh", "py", "python3", "pycon"}
_FENCE = re.compile(
    r"^(?:<!-- not run: (?P<why>[^>]*?) -->\n)?```(?P<tag>[\w-]*)[^\n]*\n(?P<body>.*?)^```[ \t]*$", re.M | re.S
)


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    tag: str
    body: str
    not_run: str | None

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> Iterator[Block]:
    text = page.read_text()
    for match in _FENCE.finditer(text):
        line = text.count("\n", 0, match.start("tag")) + 1
        yield Block(page, line, match["tag"], match["body"], match["why"])


def test_every_runnable_looking_block_follows_the_convention() -> None:
    found = [block for page in PAGES for block in blocks(page)]
    assert [b.where for b in found if b.tag in RUNNABLE and b.not_run is None], "no block of the docs runs"
    assert [f"{b.where} ({b.tag})" for b in found if b.tag in LOOKALIKES] == []
    assert [b.where for b in found if b.not_run is not None and (b.tag not in RUNNABLE or not b.not_run.strip())] == []
    # the SDK example of the vendors' page is one of those run
    assert any(b.tag == "python" and b.not_run is None and b.page.name == "vendors.md" for b in found)


@pytest.fixture(scope="module")
def runtime(venv: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRuntime]:
    # the vendors docs/vendors.md has `rdss local up` declare before `rdss vendor config acme`
    yield from serve(
        venv, tmp_path_factory.mktemp("reader"), "--vendor", "acme:produces", "--vendor", "archive:consumes=metadata"
    )


def test_the_docs_run_as_written(venv: Path, runtime: LocalRuntime, tmp_path: Path) -> None:
    ran = []
    for page in PAGES:
        workdir = tmp_path / page.stem
        workdir.mkdir()
        for number, block in enumerate(blocks(page)):
            if block.tag not in RUNNABLE or block.not_run is not None:
                continue
            script = workdir / f"block-{number}.{'py' if block.tag == 'python' else 'sh'}"
            script.write_text(block.body)
            command = (
                [str(venv / "bin/python"), script.name]
                if block.tag == "python"
                else ["bash", "-euo", "pipefail", script.name]
            )
            result = subprocess.run(
                command, cwd=workdir, env=runtime.env, capture_output=True, text=True, timeout=180, check=False
            )
            said = f"{block.where}:\n{block.body}\n--- stdout\n{result.stdout[-3000:]}\n--- stderr\n"
            said += result.stderr[-3000:]
            assert result.returncode == 0, said
            assert "Traceback" not in result.stdout + result.stderr, said
            ran.append(block.where)
    assert any("vendors.md" in where for where in ran), ran
