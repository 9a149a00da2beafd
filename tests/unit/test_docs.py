"""The docs stay true to the code: the generated topology, the "where things live" table, and
the contributors' recipes for adding a message type, a channel or a Glue report - each recipe's
files exist, and a test fails when one of the places it names was forgotten."""

from __future__ import annotations

import ast
import json
import re
import subprocess
from pathlib import Path

import pytest

from glue_jobs import schema as glue_schema
from rdss.bench import reference
from rdss.deployment.topology import RDSS
from rdss.gateway import bridge
from rdss.gateway.amqp import naming
from rdss.local import demo
from rdss.model import messages, schemas, skeletons, validation, workload
from tests.support import suites
from tools import diagram

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
CONTRIBUTORS = DOCS / "contributors.md"


def _section(title: str) -> str:
    """The text of the contributors' page section ``## <title>``, up to the next one."""
    text = CONTRIBUTORS.read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def _named_paths(section: str) -> list[str]:
    """The repository paths a recipe names in its list (``- `path` - why``)."""
    return re.findall(r"^- `([^`]+)`", section, flags=re.MULTILINE)


# -- the generated topology ----------------------------------------------------------------------


def test_the_topology_page_and_the_readme_diagram_are_generated_from_the_topology() -> None:
    stale = [str(path.relative_to(ROOT)) for path in diagram.stale()]
    assert not stale, f"{', '.join(stale)} out of step with rdss/deployment/topology.py: run {diagram.COMMAND}"


def test_the_diagram_shows_every_channel_processor_table_and_archive() -> None:
    text = diagram.mermaid()
    for channel in RDSS.channels:
        assert f"ch_{channel.name}[" in text
        if channel.archive:
            assert f'|"Firehose {channel.archive}"|' in text
    for processor in RDSS.processors:
        assert f"p_{processor.name}[" in text
    for table in RDSS.tables:
        assert f"t_{table.name}[" in text
    for route in RDSS.routes:
        assert route.message_type in text


def test_a_stale_page_is_reported_with_the_command_that_regenerates_it(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "topology.md").write_text(diagram.page().replace("`sequence`", "`sequences`", 1))
    (tmp_path / "README.md").write_text(f"intro\n{diagram.BEGIN}\nold\n{diagram.END}\n")
    assert diagram.stale(tmp_path) == [tmp_path / "docs" / "topology.md", tmp_path / "README.md"]
    diagram.write(tmp_path)
    assert diagram.stale(tmp_path) == []
    assert (tmp_path / "README.md").read_text().startswith("intro\n")


# -- the README and the reader pages ---------------------------------------------------------------


def test_the_readme_is_short_and_keeps_the_quick_start_commands() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 150
    for line in ("    make demo", "    make test", "    make synth ENV=<name>"):
        assert line in readme.splitlines()


def test_every_relative_link_in_the_docs_resolves() -> None:
    pages = [ROOT / "README.md", *DOCS.glob("*.md")]
    for page in pages:
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", page.read_text()):
            assert (page.parent / target).exists(), f"{page.relative_to(ROOT)} links to missing {target}"


def test_the_code_map_names_every_top_level_directory_and_every_rdss_package() -> None:
    text = (ROOT / "ARCHITECTURE.md").read_text()
    start = text.index("\n## Code map\n")
    code_map = text[start : text.index("\n## ", start + 1)]
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    directories = sorted({path.split("/", 1)[0] + "/" for path in files if "/" in path} - {"rdss/"})
    packages = [f"rdss/{p.name}/" for p in sorted((ROOT / "rdss").iterdir()) if (p / "__init__.py").exists()]
    missing = [name for name in (*directories, *packages) if f"`{name}`" not in code_map]
    assert not missing, f"ARCHITECTURE.md's code map does not mention {missing}"
    # the top level holds packages and the two files a package needs, nothing loose
    loose = sorted(p.name for p in (ROOT / "rdss").glob("*.py"))
    assert loose == ["__init__.py", "__main__.py"], loose
    assert len(packages) + len(loose) <= 20


def test_the_code_map_layers_are_the_import_contract() -> None:
    """The layers ARCHITECTURE.md shows are the ones .importlinter keeps, in the same order."""
    text = (ROOT / "ARCHITECTURE.md").read_text()
    rows = re.findall(r"^\| (\d+) \| `rdss/(\w+)/` \|", text, flags=re.MULTILINE)
    shown: dict[int, set[str]] = {}
    for layer, package in rows:
        shown.setdefault(int(layer), set()).add(package)
    config = (ROOT / ".importlinter").read_text()
    block = config.split("layers =", 1)[1].split("\n\n", 1)[0]
    kept = [{name.strip() for name in line.split("|")} for line in block.strip().splitlines()]
    kept = [layer for layer in kept if layer != {"__main__"}]
    assert [shown[number] for number in sorted(shown)] == kept


def test_the_tests_table_lists_every_suite_with_its_directories() -> None:
    rows = {
        match[0]: match[1]
        for match in re.findall(r"^\| `([a-z]+)` \| ([^|]*) \|", _section("Tests"), flags=re.MULTILINE)
    }
    assert set(rows) == set(suites.SUITES)
    for name, command in suites.SUITES.items():
        directories = [f"`{arg}/`" for arg in command if arg.startswith("tests/")]
        assert directories, name
        assert all(directory in rows[name] for directory in directories), (name, rows[name])


# -- the recipes: every file they name exists ----------------------------------------------------


@pytest.mark.parametrize("title", ["Adding a message type", "Adding a channel", "Adding a Glue report"])
def test_every_file_a_recipe_names_exists(title: str) -> None:
    named = _named_paths(_section(title))
    assert len(named) >= 4, f"{title}: expected its list of files to touch"
    missing = [path for path in named if not (ROOT / path).exists()]
    assert not missing, f"{title} names files that do not exist: {missing}"


# -- adding a message type ----------------------------------------------------------------------

_PAIRS = [(t, c) for t in schemas.MESSAGE_TYPES for c in schemas.classes_for(t)]


def _kebab(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "-", name).lower()


def test_the_message_type_recipe_names_every_place_the_type_list_lives() -> None:
    named = set(_named_paths(_section("Adding a message type")))
    for path in (
        "rdss/model/schemas.py",
        "rdss/deployment/topology.py",
        "rdss/model/skeletons.py",
        "glue_jobs/schema.py",
        "rdss/model/workload.py",
        "rdss/local/demo.py",
        "rdss/bench/reference.py",
        "schemas/model/enumerations.json",
    ):
        assert path in named


def test_the_schema_enumeration_lists_exactly_the_supported_types() -> None:
    enumerations = json.loads((ROOT / "schemas/model/enumerations.json").read_text())
    assert tuple(enumerations["$defs"]["messageType"]["enum"]) == schemas.MESSAGE_TYPES


@pytest.mark.parametrize(("message_type", "message_class"), _PAIRS)
def test_every_type_and_class_has_a_body_schema_a_route_an_example_and_a_reference(
    message_type: str, message_class: str
) -> None:
    body = schemas.body_schema(message_type, message_class)
    assert body is not None
    assert (ROOT / "schemas" / body).exists()
    assert RDSS.route(message_type, message_class) is not None, (
        f"rdss/deployment/topology.py: no Route for {message_type}"
    )
    example = ROOT / "examples/messages/valid" / f"{_kebab(message_type)}-{message_class.lower()}.json"
    assert example.exists(), f"no example {example.relative_to(ROOT)}"
    assert validation.validate(example.read_bytes(), now=None).error_code is None
    published = {key for key in reference._BODIES if key[0] == message_type}
    assert published & {(message_type, None), (message_type, message_class)}, "rdss/bench/reference.py"


def test_every_route_names_a_supported_type_and_class() -> None:
    """In some version the system speaks (a PreservationEvent is 4.0.0's)."""
    for route in RDSS.routes:
        assert set(route.message_classes) <= set(schemas.spoken_classes(route.message_type)), route


@pytest.mark.parametrize(("message_type", "message_class"), _PAIRS)
def test_the_skeleton_and_the_workload_make_valid_messages_of_every_type_and_class(
    message_type: str, message_class: str
) -> None:
    made = [
        skeletons.skeleton(message_type, message_class),
        workload.Workload(seed=1).message(message_type, message_class),
    ]
    for message in made:
        verdict = validation.validate(messages.serialise(message))
        assert verdict.error_code is None, (message_type, message_class, verdict.error_description)


def test_the_workload_mix_and_the_demo_cover_every_type_on_its_routed_channel() -> None:
    assert {t for t, _, _ in workload.MIX} == set(schemas.MESSAGE_TYPES)
    assert {t for t, _, _ in demo._PAIRS} == set(schemas.MESSAGE_TYPES)
    for message_type, message_class, channel in demo._PAIRS:
        route = RDSS.route(message_type, message_class)
        assert route is not None
        assert route.channel == channel, (message_type, message_class)


# -- adding a channel -----------------------------------------------------------------------------


def test_the_channel_recipe_names_the_hand_kept_channel_lists() -> None:
    named = set(_named_paths(_section("Adding a channel")))
    assert {
        "rdss/deployment/topology.py",
        "rdss/gateway/bridge.py",
        "rdss/gateway/amqp/naming.py",
        "docs/topology.md",
    } <= named


def test_the_bridge_carries_every_routed_channel_by_default() -> None:
    assert set(bridge.DEFAULT_CHANNELS) == {c.name for c in RDSS.channels_of("routed")}


def test_the_invalid_and_error_channels_are_queues_of_their_own_on_rabbitmq() -> None:
    kinds = {c.name for c in (*RDSS.channels_of("invalid"), *RDSS.channels_of("error"))}
    assert kinds <= naming.QUEUE_CHANNELS
    assert not {c.name for c in RDSS.channels_of("routed")} & naming.QUEUE_CHANNELS


def test_the_topology_page_lists_every_channel() -> None:
    page = (DOCS / "topology.md").read_text()
    for channel in RDSS.channels:
        assert f"| `{channel.name}` |" in page


# -- adding a Glue report -------------------------------------------------------------------------


def _reports_built_by_the_job() -> set[str]:
    """The keys of the dict ``audit_report.tables()`` builds, read from its source (no Spark)."""
    tree = ast.parse((ROOT / "glue_jobs/audit_report.py").read_text())
    function = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "tables")
    built = next(n.value for n in ast.walk(function) if isinstance(n, ast.Assign) and isinstance(n.value, ast.Dict))
    return {key.value for key in built.keys if isinstance(key, ast.Constant) and isinstance(key.value, str)}


def test_the_report_job_writes_exactly_the_declared_report_tables() -> None:
    assert _reports_built_by_the_job() == set(glue_schema.REPORT_TABLES)


@pytest.mark.parametrize("report", sorted(glue_schema.REPORT_TABLES))
def test_every_report_has_a_transform_test_and_a_row_in_the_analysts_page(report: str) -> None:
    transforms = (ROOT / "tests/glue/test_transforms.py").read_text()
    assert f"audit_report.{report}(" in transforms, f"tests/glue/test_transforms.py: no test of {report}"
    analysts = (DOCS / "analysts.md").read_text()
    assert f"| `{report}` |" in analysts, f"docs/analysts.md: no row for the report {report}"


def test_every_named_query_is_in_the_analysts_page() -> None:
    source = (ROOT / "rdss/analytics/queries.py").read_text()
    names = re.findall(r'NamedQuery\(\s*"([a-z0-9-]+)"', source)
    assert names
    analysts = (DOCS / "analysts.md").read_text()
    assert [name for name in names if f"| `{name}` |" not in analysts] == []
