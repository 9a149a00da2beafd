"""Text a user supplies is shown as text by every command that prints it.

The classes: rich console markup (``[/]`` closes nothing: a MarkupError; ``[bold]`` restyles what
follows), ANSI and OSC escapes, C0 and C1 controls, bidirectional overrides and isolates, line
separators, and lone surrogates (what Python reads a file name or an argument that is not UTF-8
into) - in vendor names, state paths, file names, message fields, URLs and arguments. Each command
runs in-process against standard streams opened as Python opens a terminal's (UTF-8; strict on
standard output) and must answer without a traceback, every byte it writes UTF-8 and free of
control characters but the line breaks. Vendor names are checked against what IAM and
CloudFormation accept.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import sys
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from rich.console import Console

from rdss.cli import main
from rdss.cli.local import _banner
from rdss.deployment.settings import ConfigError, load
from rdss.deployment.topology import Deployment
from rdss.deployment.vendors import check_vendor_name, check_vendor_names, output_key, role_name
from rdss.gateway.log import memory as memory_backend
from rdss.host import display
from rdss.local.accounting import Accounted, Accounting
from rdss.local.demo import _render
from rdss.local.vendor_stack import parse_vendor
from rdss.model import skeletons
from tests.conftest import EXAMPLES

#: What must never reach a terminal raw: C0 controls but the line feed, DEL and C1, the bidi
#: marks, overrides and isolates, the line and paragraph separators, and lone surrogates.
RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ud800-\udfff]")

FRAGMENTS = (
    "[/]",
    "[bold]",
    "[red]x[/red]",
    "[link=http://evil.example]y[/link]",
    "\\[",
    ":warning:",
    "\x1b[31m",
    "\x1b[2J",
    "\x1b]8;;http://evil.example\x07",
    "\x1b]0;title\x1b\\",
    "\x9b31m",
    "\x07",
    "\x00",
    "\r",
    "\n",
    "\t",
    "\x7f",
    "\u202e",
    "\u2066",
    "\u200f",
    "\u2028",
    "\udcff",
    "\ud83d",
    "%s",
    "{}",
    "..",
    "../../etc",
    "é✓",
)

#: Arbitrary text biased towards every class above.
hostile = st.lists(
    st.one_of(
        st.sampled_from(FRAGMENTS),
        st.text(max_size=4),
        st.characters(categories=["Cc", "Cf", "Cs", "Zl", "Zp"]),
    ),
    min_size=1,
    max_size=6,
).map("".join)

PROPERTY = settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
#: For the properties that run several commands an example (a fraction of a second each).
COMMANDS = settings(max_examples=25, suppress_health_check=[HealthCheck.too_slow])


@dataclass
class Shown:
    """What a command left on the terminal."""

    code: int | None
    out: str
    err: str

    @property
    def lines(self) -> list[str]:
        return self.err.splitlines()


def clean(text: str, where: str) -> None:
    assert RAW.search(text) is None, (where, text)
    assert "Traceback" not in text, (where, text)


@contextlib.contextmanager
def terminal() -> Iterator[tuple[io.BytesIO, io.BytesIO]]:
    """Standard output and error as Python opens them on a UTF-8 terminal; rich told the width
    is ample, so that no line it prints is wrapped."""
    out, err = io.BytesIO(), io.BytesIO()
    saved = sys.stdout, sys.stderr, os.environ.get("COLUMNS")
    stdout = io.TextIOWrapper(out, "utf-8", errors="strict", write_through=True)
    stderr = io.TextIOWrapper(err, "utf-8", errors="backslashreplace", write_through=True)
    sys.stdout, sys.stderr = stdout, stderr
    os.environ["COLUMNS"] = "4000"
    try:
        yield out, err
    finally:
        sys.stdout, sys.stderr = saved[:2]
        for stream in (stdout, stderr):
            stream.flush()
            stream.detach()  # the bytes stay readable
        if saved[2] is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = saved[2]


def run(*argv: str) -> Shown:
    """``rdss ARGV`` in this process; any exception but SystemExit is the traceback a user would see."""
    with terminal() as (out, err):
        try:
            code: int | None = main(list(argv))
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 1
    shown = Shown(code, out.getvalue().decode("utf-8"), err.getvalue().decode("utf-8"))
    clean(shown.out, f"stdout of {argv!r}")
    clean(shown.err, f"stderr of {argv!r}")
    return shown


def one_line_exit_2(shown: Shown) -> None:
    assert shown.code == 2, shown
    assert len(shown.lines) == 1, shown


def file_name(text: str) -> str | None:
    """``text`` as a name this file system takes (None if it takes none like it)."""
    name = text.replace("/", "_").replace("\x00", "_")
    if name in ("", ".", ".."):
        return None
    try:
        encoded = os.fsencode(name)
    except UnicodeEncodeError:  # a surrogate no byte makes: no file is named so
        return None
    return name if len(encoded) <= 200 else None


# -- the printing edge itself -----------------------------------------------------------------


@PROPERTY
@given(hostile)
def test_printable_leaves_no_control_and_rich_text_reads_as_written(text):
    shown = display.printable(text)
    clean(shown, "printable")
    assert "\n" not in shown  # one line
    if RAW.search(text) is None and "\n" not in text:
        assert shown == text
    # through rich, the text of rich_text is the printable text, whatever brackets it holds
    styled = display.rich_text("a ", (text, "bold"), text)
    assert styled.plain == f"a {shown}{shown}"
    with terminal() as (out, _):
        Console(emoji=False).print(styled)
    assert out.getvalue().decode() == f"a {shown}{shown}\n"


def test_a_name_that_is_not_utf8_shows_its_bytes():
    assert display.printable("report-\udcff\udcfe.json") == "report-\\xff\\xfe.json"
    assert display.printable("\ud83d") == "\\ud83d"


# -- vendor names -------------------------------------------------------------------------------

#: IAM's rule for a role's name, and CloudFormation's for a logical ID or an output key.
IAM_ROLE_NAME = re.compile(r"[\w+=,.@-]{1,64}\Z", re.ASCII)
IAM_POLICY_NAME = re.compile(r"[\w+=,.@-]{1,128}\Z", re.ASCII)  # a managed policy's name: 128
CLOUDFORMATION_ID = re.compile(r"[A-Za-z0-9]{1,255}\Z")

plausible_names = st.from_regex(r"[a-z][a-z0-9-]{0,40}", fullmatch=True)


@PROPERTY
@given(st.one_of(hostile, plausible_names), st.sampled_from(["local", "prod", "abcdefghijklmnopqrstuvwxyz012345"]))
@example(name="a000000000000", environment="abcdefghijklmnopqrstuvwxyz012345")  # a 64-character role
def test_a_vendor_name_is_one_iam_and_cloudformation_accept(name, environment):
    deployment = Deployment(environment)
    try:
        check_vendor_name(name, deployment)
    except ValueError as error:
        clean(str(error), "the rule")
        return
    assert IAM_ROLE_NAME.match(role_name(deployment, name)), name
    assert IAM_POLICY_NAME.match(f"{role_name(deployment, name)}-access"), name  # its managed policy
    for what in ("Role", "Policy", "RoleArn", "ExternalId", "InputStreamArn"):
        assert CLOUDFORMATION_ID.match(output_key(name, what)), name
    assert "/" not in name
    assert ".." not in name
    assert name == name.strip()
    assert name.isascii()


@PROPERTY
@given(plausible_names, plausible_names)
def test_two_vendors_never_share_stack_outputs(first, second):
    assume(first != second)
    try:
        check_vendor_names([first, second])
    except ValueError:
        assert output_key(first, "") == output_key(second, "")
    else:
        assert output_key(first, "") != output_key(second, "")


@pytest.mark.parametrize("name", ["a[/]", "../../etc", "x\x1b[31m", "Acme", "a--b", "-a", "a-", "a b", "é", "x" * 33])
def test_a_malformed_vendor_name_is_refused_everywhere(name, tmp_path):
    with pytest.raises(ValueError, match="vendor name"):
        parse_vendor(f"{name}:produces")
    shown = run("local", "up", "--vendor", f"{name}:produces", "--state", str(tmp_path / "state"))
    one_line_exit_2(shown)
    assert not (tmp_path / "state").exists()  # said before anything started
    one_line_exit_2(run("vendor", "config", name, "--url", "kinesis://dev?region=eu-west-2"))
    context = orjson.loads((Path(__file__).parents[2] / "cdk.json").read_bytes())["context"]["rdss"]
    context["environments"]["dev"]["vendors"] = {name: {"principal": "123456789012", "external_id": "abcdef"}}
    with pytest.raises(ConfigError, match="vendor name"):
        load(context, "dev", environ={})


@PROPERTY
@given(hostile)
def test_local_up_refuses_any_malformed_vendor_name_with_one_line(name):
    with contextlib.suppress(ValueError):
        check_vendor_name(name)
        assume(False)  # a well-formed one would start the runtime: the rule's own test covers it
    with tempfile.TemporaryDirectory() as scratch:
        state = Path(scratch) / "state"
        one_line_exit_2(run("local", "up", "--vendor", f"{name}:produces", "--state", str(state)))
        assert not state.exists()
    one_line_exit_2(run("vendor", "config", name, "--url", "kinesis://dev?region=eu-west-2"))


def test_role_names_stay_within_iam_s_limit_and_vendors_their_outputs(tmp_path):
    long_env = "abcdefghijklmnopqrstuvwxyz012345"
    shown = run("local", "up", "--env", long_env, "--vendor", "a" * 20 + ":produces", "--state", str(tmp_path))
    one_line_exit_2(shown)
    assert "takes at most 19 characters" in shown.err
    shown = run("local", "up", "--vendor", "lib-1:produces", "--vendor", "lib1:produces", "--state", str(tmp_path))
    one_line_exit_2(shown)
    assert "lib-1 and lib1 would share their stack outputs" in shown.err


# -- the banner of rdss local up ----------------------------------------------------------------


def banner(state: str, vendors: list[str], state_home: str) -> Shown:
    endpoint = SimpleNamespace(
        url="http://127.0.0.1:4566", region="eu-west-2", environment=lambda: {"AWS_ENDPOINT_URL": "http://127.0.0.1"}
    )
    runtime = SimpleNamespace(deployment=Deployment("local"))
    recovery = SimpleNamespace(snapshot_index=3, replayed=2, seconds=0.1, diverged=0, salvaged=state)
    saved = os.environ.get("XDG_STATE_HOME")
    os.environ["XDG_STATE_HOME"] = state_home
    try:
        with terminal() as (out, err):
            pointer = Path(state_home) / "rdss" / "running" / "1.json"
            _banner(endpoint, runtime, Path(state), recovery, dict.fromkeys(vendors), pointer)
    finally:
        if saved is None:
            os.environ.pop("XDG_STATE_HOME", None)
        else:
            os.environ["XDG_STATE_HOME"] = saved
    shown = Shown(0, out.getvalue().decode("utf-8"), err.getvalue().decode("utf-8"))
    clean(shown.out, "the banner")
    return shown


@PROPERTY
@given(hostile, st.lists(hostile, max_size=3), hostile)
def test_the_banner_shows_any_state_path_and_vendor_name_as_text(state, vendors, state_home):
    home = file_name(state_home)  # an environment variable holds no NUL, and only encodable text
    shown = banner("/tmp/" + state, vendors, f"/x/{home}")
    assert f"state      {display.printable(str(Path('/tmp/' + state)))}  (" in shown.out
    for name in vendors:
        assert f"vendor {display.printable(name)}: rdss vendor config {display.printable(name)}" in shown.out


def test_the_banner_named_cases():
    shown = banner("/tmp/st\x1b[31mate[/]", ["a[/]", "../../etc"], "/x")
    assert "state      /tmp/st\\x1b[31mate[/]  (" in shown.out
    assert "vendor a[/]: rdss vendor config a[/]" in shown.out


# -- file names ---------------------------------------------------------------------------------


def _message(**header: Any) -> bytes:
    """A MetadataCreate Event with these header fields (JSON escapes for what is not UTF-8)."""
    message = skeletons.skeleton("MetadataCreate", "Event")
    message["messageHeader"] |= header
    return json.dumps(message).encode()


@COMMANDS
@given(hostile)
def test_file_names_are_shown_as_text_by_every_command_that_names_them(text):
    name = file_name(text)
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        missing = str(root / (name or "missing") / "x.json")
        for argv in (("validate", missing), ("validate", "--json", missing), ("split", missing, "--out", scratch)):
            shown = run(*argv)
            assert shown.code == 2, shown
        one_line_exit_2(run("join", missing))
        bus = f"hostile-{uuid.uuid4().hex[:8]}"
        one_line_exit_2(run("send", missing, "--url", f"memory://{bus}"))
        if name is None:
            return
        path = root / name
        path.write_bytes(_message())
        shown = run("validate", str(path))
        assert (shown.code, shown.out) == (0, f"{display.printable(str(path))}: valid\n")
        said = json.loads(run("validate", "--json", str(path)).out)  # a name not UTF-8 is JSON's \\udcff
        assert (said["file"], said["valid"]) == (str(path), True)
        out = root / "parts" / name
        shown = run("split", str(path), "--out", str(out), "--limit", "600")
        assert shown.code == 0, shown
        assert display.printable(str(out)) in shown.out
        assert run("join", *map(str, sorted(out.iterdir()))).code == 0
        shown = run("send", str(path), "--url", f"memory://{bus}", "--log-format", "text")
        assert shown.code == 0, shown
        assert shown.out.startswith(f"{display.printable(str(path))}: sent ")
        path.write_bytes(_message(messageClass="Nonsense"))
        shown = run("send", str(path), "--url", f"memory://{bus}", "--log-format", "text")
        assert shown.code == 1, shown
        memory_backend.discard(bus)


def test_split_names_its_files_as_text(tmp_path):
    """The named case: ``rdss split`` printed the file and the directory as given."""
    path = tmp_path / "deposit\x1b[2J.json"
    path.write_bytes(_message())
    out = tmp_path / "parts\x1b]0;owned\x07"
    shown = run("split", str(path), "--out", str(out), "--limit", "600")
    assert shown.code == 0
    assert f"{tmp_path}/deposit\\x1b[2J.json: " in shown.out
    assert "parts\\x1b]0;owned\\x07" in shown.out


# -- message fields -----------------------------------------------------------------------------


@COMMANDS
@given(hostile)
@example("\ud800\udc00")  # a surrogate pair, escaped: JSON reads U+10000
def test_message_fields_are_shown_as_text(text):
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        bus = f"fields-{uuid.uuid4().hex[:8]}"
        valid = root / "valid.json"
        valid.write_bytes(_message(generator=text))
        invalid = root / "invalid.json"
        invalid.write_bytes(_message(messageClass=text, generator=text))
        shown = run("validate", str(valid), str(invalid))
        assert shown.code in (0, 1), shown
        run("validate", "--json", str(valid), str(invalid))
        run("send", str(invalid), "--url", f"memory://{bus}", "--log-format", "text", "-vv")
        run("send", str(valid), "--to", "metadata", "--url", f"memory://{bus}", "--log-format", "text", "-vv")
        tailed = run("tail", "metadata", "--from-start", "--count", "1", "--idle", "0.05", "--url", f"memory://{bus}")
        if shown.out.startswith(f"{valid}: valid\n"):  # sent, and tail prints the record as JSON
            # the generator as JSON reads it back: escapes of a surrogate pair are one character
            assert orjson.loads(tailed.out)["messageHeader"]["generator"] == json.loads(json.dumps(text))
        else:
            assert tailed.out == ""
        memory_backend.discard(bus)


# -- arguments ----------------------------------------------------------------------------------


@COMMANDS
@given(hostile)
def test_any_argument_is_shown_as_text(text):
    # nothing here may reach AWS, start a runtime or run a command for real: a URL is left to the
    # URL tests, and each command line below is one its parser or its first check refuses
    assume("://" not in text)
    valid = str(EXAMPLES / "valid" / "metadata-create-event.json")
    bus = f"memory://args-{uuid.uuid4().hex[:8]}"
    kinesis = "kinesis://dev?region=eu-west-2&endpoint=http://127.0.0.1:9"
    for argv in (
        ("send", valid, "--to", text, "--url", bus),
        ("send", valid, "--url", text),
        ("send", valid, "--url", bus, "--application", text),
        ("tail", text, "--url", bus, "--count", "1", "--idle", "0.01", "--interval", "0.01"),
        ("new", text),
        ("trace", text, "--since", text + "\x00", "--url", kinesis),
        ("local", "up", "--env", text, "--shards", "0"),
        ("local", "up", "--port", text, "--shards", "0"),
        ("bench", "cost", "--env", text, "--rate", "1"),
        ("adaptor", "oai-pmh", text, "--once", "--url", bus),
        ("redrive", "--url", text),
        ("vendor", "config", "acme", "--url", text),
        ("bridge", "--url", text, "--to", bus, "--idle", "0.01"),
        ("archive", "--url", text, "--to", "/dev/null/x", "--idle", "0.01"),
        (text, "--no-such-option"),
    ):
        shown = run(*argv)
        assert shown.code != 0 or argv[0] in ("send", "tail"), shown
        if shown.code:
            assert shown.err, shown


def test_bridge_and_archive_say_their_urls_as_text(tmp_path):
    bus = f"memory://say-{uuid.uuid4().hex[:8]}?partitions=1"
    target = tmp_path / "audit\x1b[31m[/]"
    shown = run("archive", "--url", bus, "--to", str(target), "--idle", "0.05", "--log-format", "text")
    assert shown.code == 0, shown
    assert "audit\\x1b[31m[/]" in shown.err
    shown = run("bridge", "--url", bus, "--to", f"{bus}x\x1b[2J", "--idle", "0.05", "--log-format", "text")
    assert "\\x1b[2J" in shown.err


@COMMANDS
@given(hostile)
@example("")
@example(" ")
@example("a b")
@example("x" * 256)
@example("-:")
def test_a_consumer_group_is_one_word_of_text_or_refused_in_one_line(group):
    # an empty group would have RabbitMQ name the bridge's queue itself: one no restart finds again
    bus = f"memory://group-{uuid.uuid4().hex[:8]}"
    fit = 0 < len(group.encode("utf-8", "surrogatepass")) <= 255 and all(
        not c.isspace() and c.isprintable() for c in group
    )
    for argv in (
        # OPTION=VALUE: a group may start with "-" ("-:"), which argparse would take for an option
        ("bridge", "--url", bus, "--to", bus + "x", f"--group={group}", "--idle", "0.01"),
        ("bridge", "--url", bus, "--to", bus + "x", f"--declare={group}", "--idle", "0.01"),
    ):
        shown = run(*argv)
        if fit:
            assert shown.code == 0, shown
        else:
            assert shown.code == 2, shown
            assert shown.err.count("\n") == 1, shown
            assert "a consumer group is 1 to 255 bytes of text" in shown.err or "not UTF-8 text" in shown.err, shown


def test_a_channel_named_twice_is_bridged_once():
    bus = f"memory://twice-{uuid.uuid4().hex[:8]}"
    shown = run(
        "bridge", "--url", bus, "--to", bus + "x", "--channel", "metadata", "--channel", "metadata", "--idle", "0.01"
    )
    assert shown.code == 0, shown
    assert f"bridging metadata: {bus} -> {bus}x" in shown.err


# -- the demo's summary -------------------------------------------------------------------------


@PROPERTY
@given(hostile, hostile, hostile)
def test_the_demo_summary_shows_file_names_codes_and_traces_as_text(name, code, line):
    result = Accounting(
        inputs=[Accounted(name, 1, "invalid", ["invalid"], code), Accounted(name + "2", 1, "routed", [line], None)],
        channels={"input": 2, "invalid": 1},
        audit_objects=1,
        audit_records=[],
    )
    body = {
        "channels": result.channels,
        "audit": {"objects": 1, "records": 2},
        "analytics": {"skipped": line},
        "trace": {"input": name, "command": f"rdss trace {name}", "lines": [line, name], "timeline": {}},
        "kept": {"state": f"/tmp/{name}", "serve": f"rdss local up --env demo --state /tmp/{name}"},
    }
    with terminal() as (out, _):
        _render(Console(emoji=False), result, body, 1.0, builtin=False)
    shown = out.getvalue().decode("utf-8")
    clean(shown, "the demo's summary")
    assert display.printable(name) in shown


def test_the_tour_shows_example_names_and_their_values_as_text(tmp_path):
    """``rdss tour --examples DIR``: a directory and file names of the user's, and the values their
    messages hold (quoted by the verdicts), printed as written."""
    root = tmp_path / "ex[/]\x1b[2J"
    (root / "valid").mkdir(parents=True)
    (root / "invalid").mkdir()
    (root / "valid" / "a[red]b\\[x\x1b]0;x\x07.json").write_bytes(_message())
    (root / "invalid" / "GENERR004-[bold]\u202e.json").write_bytes(_message(messageClass="[/]\x1b[31m"))
    shown = run("tour", "--examples", str(root), "--messages", "10")
    assert shown.code == 0, shown
    assert "a[red]b\\[x\\x1b]0;x\\x07.json" in shown.out
    assert "GENERR004-[bold]\\u202e.json" in shown.out
