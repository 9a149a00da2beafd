"""Every document, file and module the repository cites is in the repository.

A reader follows a citation to find the reason behind a rule: a page linked from the docs, a
file named in a comment (``rdss/model/validation.py``), a module named in a docstring
(``rdss.archive.entries``), a section of ARCHITECTURE.md. A citation of something that is not
here (a design note kept elsewhere, a module since moved) leaves them nowhere, so each is
checked: relative Markdown links resolve, repository paths exist, ``rdss.*`` dotted names
import, and documents named by file name (``SOMETHING.md``) are in the repository.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: The top-level directories a path in the text may start with, and the files at the root.
TOP_DIRECTORIES = ("rdss", "stacks", "lambdas", "glue_jobs", "schemas", "tests", "tools", "docs", "examples", ".ci")

#: Paths written in the text that are not files of the repository: what a command makes or reads
#: on a user's machine (the examples' output, build products, the state directory).
MADE_ELSEWHERE = re.compile(
    r"^(rdss/_\w+"  # what the wheel's build copies into the package (setup.py): rdss/_schemas, rdss/_cdk.json
    r"|rdss/local/local"  # the state directory's default for an environment named local
    r"|glue_jobs/\w+\.\w+_\w+)"  # a Glue job's function: glue_jobs/audit_compaction.local_session
)

#: Dotted names in the text beginning ``rdss.`` that are not modules: the Glue jobs' Java package
#: and its Hadoop setting, a cdk.json context path, a WSGI environ key, the loggers tests make, a
#: backend a test names because it does not exist.
NOT_MODULES = re.compile(r"^rdss\.(glue|archive\.damage|environments|url_scheme|test|x|gateway\.not_written_yet)(\.|$)")

_TOP = "|".join(re.escape(d) for d in TOP_DIRECTORIES)
_PATH = re.compile(rf"(?<![\w./$~-])((?:{_TOP})/[\w./-]*[\w/])")
_DOCUMENT = re.compile(r"(?<![\w./-])([A-Z][A-Z0-9_-]+\.md)\b")
_DOTTED = re.compile(r"(?<![\w./-])(rdss(?:\.[a-z_][a-z0-9_]*)+)")
_LINK = re.compile(r"\]\(([^)#:\s]+)(?:#[^)]*)?\)")


def _files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    return [ROOT / name for name in listed if name.endswith((".py", ".md", ".toml", ".cfg")) or name == "Makefile"]


def _texts() -> Iterator[tuple[Path, str]]:
    for path in _files():
        if path.is_file() and path != Path(__file__):
            yield path, path.read_text(encoding="utf-8")


def _is_placeholder(path: str) -> bool:
    """A pattern or a placeholder, not a path: ``rdss/<name>/``, ``tests/*/``, ``lambdas/*/handler.py``."""
    return any(mark in path for mark in ("*", "<", "{", "...", "NAME", "PID"))


def test_every_relative_link_resolves() -> None:
    broken = []
    for path, text in _texts():
        if path.suffix != ".md":
            continue
        for target in _LINK.findall(text):
            if not (path.parent / target).exists():
                broken.append(f"{path.relative_to(ROOT)} -> {target}")
    assert not broken, broken


def test_every_repository_path_cited_exists() -> None:
    missing = set()
    for path, text in _texts():
        for cited in _PATH.findall(text):
            cited = cited.rstrip(".")
            if _is_placeholder(cited) or MADE_ELSEWHERE.match(cited):
                continue
            if not (ROOT / cited).exists():
                missing.add(f"{path.relative_to(ROOT)}: {cited}")
    assert not missing, sorted(missing)


def test_every_document_cited_by_name_is_in_the_repository() -> None:
    documents = {p.name for p in ROOT.rglob("*.md") if ".venv" not in p.parts and "node_modules" not in p.parts}
    missing = set()
    for path, text in _texts():
        for name in _DOCUMENT.findall(text):
            if name not in documents:
                missing.add(f"{path.relative_to(ROOT)}: {name}")
    assert not missing, sorted(missing)


def test_no_citation_of_design_notes_kept_elsewhere() -> None:
    # "DESIGN D2" and the like named decisions in a note that never was in the repository
    cited = [
        f"{path.relative_to(ROOT)}: {match}"
        for path, text in _texts()
        for match in re.findall(r"\bDESIGN(?:\.md)? D\d+\b", text)
    ]
    assert not cited, cited


def _resolves(dotted: str) -> bool:
    """``rdss.x.y.z``: its longest importable prefix is a module of the package, and what follows
    is an attribute of it (the first name after the module, at least)."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        name = ".".join(parts[:end])
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if found:
            break
    else:
        return False
    if end == len(parts):
        return True
    try:
        module = importlib.import_module(name)
    except ImportError:  # an optional extra (pika) missing: the module exists
        return True
    return hasattr(module, parts[end])


def test_every_rdss_module_named_exists() -> None:
    missing = set()
    for path, text in _texts():
        for dotted in _DOTTED.findall(text):
            dotted = dotted.rstrip(".")
            if dotted == "rdss" or NOT_MODULES.match(dotted):
                continue
            if not _resolves(dotted):
                missing.add(f"{path.relative_to(ROOT)}: {dotted}")
    assert not missing, sorted(missing)


def test_the_checks_find_what_they_look_for() -> None:
    # the patterns themselves: a stale citation of each kind is caught
    assert _PATH.findall("see rdss/model/validation.py and `rdss/nowhere.py`.") == [
        "rdss/model/validation.py",
        "rdss/nowhere.py",
    ]
    assert not (ROOT / "rdss/nowhere.py").exists()
    assert _DOCUMENT.findall("as DESIGN.md says, and ARCHITECTURE.md") == ["DESIGN.md", "ARCHITECTURE.md"]
    assert _DOTTED.findall("(:mod:`rdss.gateway.holdings`)") == ["rdss.gateway.holdings"]
    assert not _resolves("rdss.gateway.holdings")
    assert _resolves("rdss.model.validation.validate")
    assert not _resolves("rdss.model.validation.no_such_function")


def test_nothing_names_a_place_on_the_build_machine_outside_the_repository() -> None:
    # what a checkout elsewhere would not have: the machine's work directory, a sibling of the checkout
    outside = re.compile(r"(?<![\w.])(/work/|\.\./shared\b)")
    cited = [f"{path.relative_to(ROOT)}: {match}" for path, text in _texts() for match in outside.findall(text)]
    assert not cited, cited
