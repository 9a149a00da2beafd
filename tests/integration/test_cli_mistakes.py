"""Every subcommand against a table of users' mistakes: bad arguments, URLs, environment values
and files. Each gets one line on standard error and exit 2 (usage) or 1 (a verdict), never a
traceback, never a secret echoed back, within 15 s - the unreachable-endpoint cases included,
each timed in a process of its own.

Each case runs ``python -m rdss`` in a fresh process with a minimal environment (no
``RDSS_GATEWAY_URL``, no ``AWS_ENDPOINT_URL`` unless the case sets one), so what is checked is
what a user sees. The cases that need a deployment that answers (a stream that is not there)
use the endpoint under test; "unreachable" is a loopback port nothing listens on, or a name in
the reserved ``.invalid`` domain, which never resolves. Only those cases depend on the endpoint:
on another one than the embedded emulator (the LocalStack run) they alone run - the rest are the
same processes with the same arguments whatever the endpoint, run once by the moto suite.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import pytest

from rdss.local.emulator import Endpoint
from rdss.model.sequences import split
from tests.conftest import EXAMPLES

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
#: A password that must never appear in any output.
SECRET = "S3cretPw"
#: The most a user waits for the one line.
LIMIT = 15.0
VALID = str(EXAMPLES / "valid" / "metadata-create-command.json")
READ = str(EXAMPLES / "valid" / "metadata-read-command.json")
# a log line of the text format: time, APP-NAME[pid], [LEVEL]
_LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\dT[\d:.]+Z \S+\[\d+\] \[(DEBUG|INFO|WARNING|ERROR|CRITICAL)\] ")


@dataclass(frozen=True)
class Case:
    name: str
    argv: tuple[str, ...]
    #: exit codes accepted: 2 usage (the default), or 1 where the input was understood and found wanting
    exits: frozenset[int] = frozenset({2})
    env: dict[str, str] = field(default_factory=dict)
    stdin: str | None = None
    #: an unreachable-endpoint case: its time is reported
    timed: bool = False


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def cases(tmp: Path, emulator: str | None) -> Iterator[Case]:
    port = _closed_port()
    refused = f"http://127.0.0.1:{port}"
    unresolved = "http://rdss-nowhere.invalid:4566"
    a_file = tmp / "file.txt"
    a_file.write_text("not a directory\n")
    big = "/dev/zero"

    def case(name: str, *argv: str, exits: tuple[int, ...] = (2,), **options: object) -> Case:
        return Case(name, tuple(argv), frozenset(exits), **options)  # type: ignore[arg-type]

    # --- URLs, for every command that takes one ------------------------------------------------
    bad_urls = {
        "ipv6-endpoint": "kinesis://local?endpoint=http://[::1",
        "port-out-of-range": "kinesis://local?endpoint=http://127.0.0.1:99999&region=eu-west-2",
        "no-name": "kinesis://",
        "unknown-scheme": "gopher://x",
        "not-a-url": "dev",
        "unknown-parameter": "kinesis://dev?bogus=1",
        "amqp-password": f"amqp://user:{SECRET}@127.0.0.1:{port}/%2F?bogus=1",
        "amqp-password-ipv6": f"amqp://user:{SECRET}@[::1/%2F",
        "amqp-nan-timeout": f"amqp://user:{SECRET}@127.0.0.1:{port}/%2F?confirm_timeout=nan",
        "memory-partitions": "memory://x?partitions=0",
        "external-id-short": "kinesis://dev?region=eu-west-2&role=arn:aws:iam::123456789012:role/r&external_id=x",
        "ldr-passwd": "memory://x?ldr=sqlite:///etc/passwd",
        "ldr-directory": f"memory://x?ldr=sqlite://{tmp}",
        "ldr-nowhere": f"memory://x?ldr=sqlite://{tmp}/no/such/dir/ldr.sqlite",
        "ldr-scheme": "memory://x?ldr=redis://h",
    }
    takers = {  # every command that takes a gateway URL, and how
        "tail": lambda url: ("tail", "metadata", "--idle", "1", "--url", url),
        "request": lambda url: ("request", READ, "--timeout", "1", "--url", url),
        "trace": lambda url: ("trace", "0b3f1d4e-8a4c-4a55-9b4a-7f2f1a1d2c3e", "--url", url),
        "adaptor": lambda url: ("adaptor", "oai-pmh", "http://127.0.0.1:1/oai", "--once", "--url", url),
        "archive": lambda url: ("archive", "--url", url, "--to", str(tmp / "archive"), "--idle", "1"),
        "bridge-source": lambda url: ("bridge", "--url", url, "--to", "memory://b", "--idle", "1"),
        "bridge-target": lambda url: ("bridge", "--url", "memory://a", "--to", url, "--idle", "1"),
        "redrive": lambda url: ("redrive", "--url", url, "--dry-run"),
        "vendor-config": lambda url: ("vendor", "config", "acme", "--url", url),
    }
    for label, url in bad_urls.items():  # every bad URL to send; the ones of each kind to every taker
        yield case(f"send-url-{label}", "send", VALID, "--url", url)
        if label in ("ipv6-endpoint", "amqp-password", "ldr-passwd", "unknown-parameter"):
            for name, argv in takers.items():
                yield case(f"{name}-url-{label}", *argv(url))
    yield case("send-env-url-garbage", "send", VALID, env={"RDSS_GATEWAY_URL": f"amqp://u:{SECRET}@[::1"})
    for command in (
        ("send", VALID),
        ("tail", "metadata", "--idle", "1"),
        ("request", READ, "--timeout", "1"),
        ("trace", "0b3f1d4e-8a4c-4a55-9b4a-7f2f1a1d2c3e"),
        ("adaptor", "oai-pmh", "http://127.0.0.1:1/oai", "--once"),
        ("redrive", "--dry-run"),
        ("vendor", "config", "acme"),
        ("archive", "--to", str(tmp / "archive"), "--idle", "1"),
        ("bridge", "--to", "memory://b", "--idle", "1"),
    ):
        yield case(f"{command[0]}-no-deployment-named", *command)
    no_region = {"AWS_DEFAULT_REGION": ""}  # an empty value is dropped: no region anywhere
    for name in ("tail", "trace", "redrive", "vendor-config"):  # the Kinesis-only takers
        yield case(f"{name}-no-region", *takers[name]("kinesis://dev"), env=no_region)
    yield case("send-no-region", "send", VALID, "--url", "kinesis://dev", env=no_region)

    # --- unreachable: connection refused, a name that does not resolve (timed) -----------------
    for label, endpoint in (("refused", refused), ("unresolved", unresolved)):
        url = f"kinesis://dev?endpoint={endpoint}&region=eu-west-2"
        yield case(f"send-{label}", "send", VALID, "--url", url, timed=True)
        yield case(f"tail-{label}", "tail", "metadata", "--idle", "1", "--url", url, timed=True)
        yield case(f"request-{label}", "request", READ, "--timeout", "5", "--url", url, timed=True)
        yield case(f"trace-{label}", "trace", "0b3f1d4e-8a4c-4a55-9b4a-7f2f1a1d2c3e", "--url", url, timed=True)
        yield case(f"redrive-{label}", "redrive", "--url", url, "--dry-run", timed=True)
        yield case(f"vendor-config-{label}", "vendor", "config", "acme", "--url", url, timed=True)
        yield case(f"bridge-{label}", "bridge", "--url", url, "--to", "memory://b", "--idle", "1", timed=True)
        yield case(f"bridge-target-{label}", "bridge", "--url", "memory://a", "--to", url, "--idle", "1", timed=True)
        yield case(f"send-aws-endpoint-{label}", "send", VALID, "--url", "kinesis://dev?region=eu-west-2",
                   env={"AWS_ENDPOINT_URL": endpoint}, timed=True)  # fmt: skip
        oai = f"{endpoint}/oai"
        yield case(f"adaptor-repository-{label}", "adaptor", "oai-pmh", oai, "--once", "--retries", "0",
                   "--url", "memory://x", exits=(1,), timed=True)  # fmt: skip
        yield case(f"adaptor-gateway-{label}", "adaptor", "oai-pmh", "http://127.0.0.1:1/oai", "--once",
                   "--url", url, timed=True)  # fmt: skip
    amqp = f"amqp://user:{SECRET}@127.0.0.1:{port}/%2F"
    yield case("send-amqp-refused", "send", VALID, "--url", amqp, timed=True)
    yield case("tail-amqp-refused", "tail", "metadata", "--idle", "1", "--url", amqp, timed=True)
    yield case("archive-amqp-refused", "archive", "--url", amqp, "--to", str(tmp / "archive"), "--idle", "1",
               timed=True)  # fmt: skip
    yield case("bridge-amqp-refused", "bridge", "--url", "memory://a", "--from", amqp, "--idle", "1", timed=True)
    amqp_dns = f"amqp://user:{SECRET}@rdss-nowhere.invalid/%2F"
    yield case("send-amqp-unresolved", "send", VALID, "--url", amqp_dns, timed=True)

    # --- a deployment that answers, without the environment or stream named ----------------
    if emulator is not None:
        missing = f"kinesis://nosuchenv?endpoint={emulator}&region=eu-west-2"
        yield case("send-missing-environment", "send", VALID, "--url", missing, timed=True)
        yield case("tail-missing-environment", "tail", "metadata", "--idle", "1", "--url", missing, timed=True)
        yield case("request-missing-environment", "request", READ, "--timeout", "2", "--url", missing, timed=True)
        yield case("tail-unknown-channel", "tail", "nosuch", "--idle", "1", "--url", missing)
        yield case("adaptor-missing-environment", "adaptor", "oai-pmh", "http://127.0.0.1:1/oai", "--once",
                   "--url", missing, timed=True)  # fmt: skip
        yield case("bridge-missing-environment", "bridge", "--url", missing, "--to", "memory://b", "--idle", "1",
                   timed=True)  # fmt: skip
        yield case("vendor-config-missing-environment", "vendor", "config", "acme", "--url", missing)
        yield case("redrive-missing-environment", "redrive", "--url", missing, "--dry-run", exits=(1, 2))

    # --- the environment -----------------------------------------------------------------------
    kinesis = "kinesis://dev?region=eu-west-2"
    for label, env in {
        "aws-endpoint-garbage": {"AWS_ENDPOINT_URL": "garbage"},
        "aws-endpoint-ipv6": {"AWS_ENDPOINT_URL": "http://[::1"},
        "xdg-state-file": {"XDG_STATE_HOME": str(a_file)},
        "xdg-state-dev-null": {"XDG_STATE_HOME": "/dev/null/state"},
        "log-format": {"RDSS_LOG_FORMAT": "loud"},
        "log-level": {"RDSS_LOG_LEVEL": "loud"},
        "syslog-address": {"RDSS_SYSLOG_ADDRESS": "udp:nowhere"},
        "syslog-facility": {"RDSS_SYSLOG_FACILITY": "local9"},
    }.items():
        yield case(f"send-{label}", "send", VALID, "--url", kinesis, env=env)
        yield case(f"tail-{label}", "tail", "metadata", "--idle", "1", "--url", kinesis, env=env)
    yield case("trace-aws-endpoint-garbage", "trace", "x", "--url", kinesis, env={"AWS_ENDPOINT_URL": "garbage"})
    yield case(
        "redrive-aws-endpoint-garbage", "redrive", "--url", "kinesis://dev", "--dry-run",
        env={"AWS_ENDPOINT_URL": "garbage"},
    )  # fmt: skip
    yield case("vendor-aws-endpoint-garbage", "vendor", "config", "acme", "--url", "kinesis://dev",
               env={"AWS_ENDPOINT_URL": "garbage"})  # fmt: skip
    no_region = f"kinesis://dev?endpoint={refused}"
    yield case("redrive-no-region", "redrive", "--url", no_region, "--dry-run", env={"AWS_DEFAULT_REGION": ""})
    yield case("vendor-no-region", "vendor", "config", "acme", "--url", no_region, env={"AWS_DEFAULT_REGION": ""})
    yield case("redrive-amqp", "redrive", "--url", amqp, "--dry-run")
    yield case("vendor-config-memory", "vendor", "config", "acme", "--url", "memory://x")
    yield case("adaptor-xdg-state-file", "adaptor", "oai-pmh", "http://127.0.0.1:1/oai", "--once", "--url",
               "memory://x", env={"XDG_STATE_HOME": str(a_file)})  # fmt: skip
    yield case("send-amqp-xdg-state-file", "send", VALID, "--url", amqp, env={"XDG_STATE_HOME": str(a_file)})
    yield case("trace-xdg-state-file", "trace", "x", "--application", "a", "--url",
               f"kinesis://dev?endpoint={refused}&region=eu-west-2", env={"XDG_STATE_HOME": str(a_file)})  # fmt: skip

    # --- numbers: finite and in range, checked at parse time -----------------------------------
    for value in ("nan", "inf", "-inf", "-1", "0", "1e400", "x", ""):
        yield case(f"tail-idle-{value}", "tail", "metadata", "--idle", value, "--url", "memory://x")
        yield case(f"request-timeout-{value}", "request", READ, "--timeout", value, "--url", "memory://x")
        yield case(f"adaptor-interval-{value}", "adaptor", "oai-pmh", "http://127.0.0.1:1/oai", "--url", "memory://x",
                   "--interval", value)  # fmt: skip
    for argv in (
        ("tail", "metadata", "--interval", "nan"),
        ("tail", "metadata", "--count", "0"),
        ("tail", "metadata", "--count", "1.5"),
        ("request", READ, "--timeout", "1", "--interval", "inf"),
        ("adaptor", "oai-pmh", "http://127.0.0.1:1/oai", "--interval", "0.001"),
        ("adaptor", "oai-pmh", "http://127.0.0.1:1/oai", "--retries", "-1"),
        ("adaptor", "oai-pmh", "http://127.0.0.1:1/oai", "--retries", "1000"),
        ("adaptor", "oai-pmh", "http://127.0.0.1:1/oai", "--max-bytes", "nan"),
        ("adaptor", "oai-pmh", "http://127.0.0.1:1/oai", "--max-bytes", "0"),
        ("adaptor", "oai-pmh", "http://127.0.0.1:1/oai", "--deadline", "inf"),
        ("archive", "--url", "memory://x", "--to", str(tmp), "--buffer-mb", "nan"),
        ("archive", "--url", "memory://x", "--to", str(tmp), "--buffer-seconds", "inf"),
        ("archive", "--url", "memory://x", "--to", str(tmp), "--count", "-3"),
        ("bridge", "--url", "memory://a", "--to", "memory://b", "--batch", "0"),
        ("bridge", "--url", "memory://a", "--to", "memory://b", "--batch", "100000"),
        ("bridge", "--url", "memory://a", "--to", "memory://b", "--lease-duration", "nan"),
        ("bridge", "--url", "memory://a", "--to", "memory://b", "--idle", "nan"),
        ("bridge", "--url", "memory://a", "--to", "memory://b", "--from", "memory://c"),
        ("bridge", "--url", "memory://a"),
        ("split", VALID, "--out", str(tmp / "parts"), "--limit", "0"),
        ("split", VALID, "--out", str(tmp / "parts"), "--limit", "nan"),
        ("bench", "validate", "--messages", "0"),
        ("bench", "validate", "--rounds", "nan"),
        ("bench", "broker", "--batch", "-1"),
        ("bench", "send", "--shards", "0"),
        ("bench", "glue", "--broken-every", "-1"),
        ("bench", "coldstart", "--rounds", "0"),
        ("tour", "--messages", "0"),
        ("tour", "--messages", "inf"),
    ):
        yield case(f"{'-'.join(argv[:1])}-{argv[-2]}-{argv[-1]}", *argv)

    # --- files and standard input ----------------------------------------------------------------
    yield case("validate-dev-zero", "validate", big)
    yield case("validate-directory", "validate", str(tmp))
    yield case("validate-missing", "validate", str(tmp / "missing.json"))
    yield case("validate-stdin-huge", "validate", "-", stdin="x" * (65 * 1024 * 1024))
    yield case("validate-garbage", "validate", str(a_file), exits=(1,))
    yield case("translate-directory", "translate", "--to", "4.0.0", str(tmp))
    yield case("translate-missing", "translate", "--to", "4.0.0", str(tmp / "missing.json"))
    yield case("translate-dev-zero", "translate", "--to", "4.0.0", big)
    yield case("translate-unknown-version", "translate", "--to", "5.0.0", VALID)
    yield case("translate-unknown-environment", "translate", "--to", "4.0.0", "--env", "nowhere", VALID)
    yield case("translate-garbage", "translate", "--to", "4.0.0", "--tenant-jisc-id", "1", str(a_file), exits=(1,))
    yield case("translate-no-tenant", "translate", "--to", "4.0.0", VALID, exits=(1,))
    yield case("send-dev-zero", "send", big, "--url", "memory://x")
    yield case("send-directory", "send", str(tmp), "--url", "memory://x")
    yield case("send-invalid", "send", str(a_file), "--url", "memory://x", exits=(1,))
    yield case("send-token-dev-zero", "send", VALID, "--url", "memory://x", "--auth-token-file", big)
    yield case("send-token-missing", "send", VALID, "--url", "memory://x", "--auth-token-file", str(tmp / "no"))
    yield case("send-context-not-json", "send", VALID, "--url", "memory://x", "--context", "{nope")
    deep = tmp / "deep.json"  # past orjson's 1,024 levels, and the standard library's recursion limit
    deep.write_bytes(b"[" * 5_000 + b"]" * 5_000)
    # a memory:// bus lives in one process: the command's, which ends with it (nothing sent, nothing to tail)
    yield case("send-memory", "send", VALID, "--url", "memory://x")
    yield case("request-memory", "request", READ, "--url", "memory://x")
    yield case("tail-memory", "tail", "metadata", "--idle", "1", env={"RDSS_GATEWAY_URL": "memory://x"})
    yield case("send-deep-json", "send", str(deep), "--url", "memory://x", exits=(1,))
    yield case("request-deep-json", "request", str(deep), "--url", "memory://x", exits=(1,))
    yield case("request-dev-zero", "request", big, "--timeout", "1", "--url", "memory://x")
    yield case("request-not-a-request", "request", VALID, "--url", "memory://x")
    yield case("split-dev-zero", "split", big, "--out", str(tmp / "parts"))
    yield case("split-out-file", "split", VALID, "--out", str(a_file), "--limit", "2000")
    yield case("join-dev-zero", "join", big)
    yield case("join-garbage", "join", str(a_file), exits=(1,))
    for label, total in (("10e8", 10**8), ("2e31", 2**31), ("10e30", 10**30)):  # one part of a huge total
        lone = tmp / f"part-of-{label}.json"
        part = split(orjson.loads(Path(VALID).read_bytes()), 1500)[0]
        part["messageHeader"]["messageSequence"]["total"] = total
        lone.write_text(json.dumps(part))  # orjson writes no integer beyond 64 bits
        yield case(f"join-total-{label}", "join", str(lone), exits=(1,))
    yield case("adaptor-profile-dev-zero", "adaptor", "oai-pmh", "http://127.0.0.1:1/oai", "--once", "--url",
               "memory://x", "--profile", big)  # fmt: skip
    yield case("adaptor-profile-directory", "adaptor", "oai-pmh", "http://127.0.0.1:1/oai", "--once", "--url",
               "memory://x", "--profile", str(tmp))  # fmt: skip
    yield case("adaptor-state-directory", "adaptor", "oai-pmh", "http://127.0.0.1:1/oai", "--once", "--url",
               "memory://x", "--state", str(tmp))  # fmt: skip
    yield case("adaptor-state-dev-zero", "adaptor", "oai-pmh", "http://127.0.0.1:1/oai", "--once", "--url",
               "memory://x", "--state", big)  # fmt: skip
    yield case("adaptor-state-nowhere", "adaptor", "oai-pmh", "http://127.0.0.1:1/oai", "--once", "--url",
               "memory://x", "--state", str(a_file / "state.json"))  # fmt: skip
    yield case("adaptor-endpoint-ftp", "adaptor", "oai-pmh", "ftp://example.org/oai", "--url", "memory://x")
    yield case("adaptor-endpoint-ipv6", "adaptor", "oai-pmh", "http://[::1/oai", "--url", "memory://x")
    yield case("adaptor-endpoint-password", "adaptor", "oai-pmh", f"http://u:{SECRET}@127.0.0.1:{port}/oai",
               "--once", "--retries", "0", "--url", "memory://x", exits=(1,))  # fmt: skip
    yield case("archive-to-file", "archive", "--url", "memory://x", "--to", str(a_file / "x"), "--idle", "1")
    yield case("archive-to-s3-no-bucket", "archive", "--url", "memory://x", "--to", "s3://", "--idle", "1")
    dev = "kinesis://dev"
    yield case("vendor-cdk-out-missing", "vendor", "config", "acme", "--url", dev, "--cdk-out", str(tmp / "no"))
    yield case("vendor-cdk-out-file", "vendor", "config", "acme", "--url", dev, "--cdk-out", str(a_file))
    manifest = orjson.dumps({"artifacts": {"rdss-dev": {"environment": "aws://123456789012/eu-west-2"}}})
    for label, template in (
        ("deep", b"[" * 5_000 + b"]" * 5_000),
        ("not-utf8", b'{"Outputs": "\xff"}'),
        ("not-json", b'{"Outputs": '),
        ("fifo", None),
    ):
        synthesised = tmp / f"cdk-out-{label}"
        synthesised.mkdir()
        (synthesised / "manifest.json").write_bytes(manifest)
        if template is None:
            os.mkfifo(synthesised / "rdss-dev.template.json")
        else:
            (synthesised / "rdss-dev.template.json").write_bytes(template)
        yield case(f"vendor-cdk-out-{label}", "vendor", "config", "acme", "--url", dev, "--cdk-out", str(synthesised))
    yield case("vendor-ldr-memory", "vendor", "config", "acme", "--url", dev, "--cdk-out", str(tmp),
               "--ldr", "memory://")  # fmt: skip
    yield case("trace-since-garbage", "trace", "x", "--url", kinesis, "--since", "yesterday")
    yield case("trace-ldr-passwd", "trace", "x", "--url", f"kinesis://dev?endpoint={refused}&region=eu-west-2",
               "--application", "a", "--ldr", "sqlite:///etc/passwd")  # fmt: skip
    yield case("trace-ldr-without-application", "trace", "x", "--url", kinesis, "--ldr", "sqlite:///tmp/x")
    yield case("trace-amqp", "trace", "x", "--url", amqp)
    yield case("bench-reference-missing", "bench", "validate", "--messages", "10", "--rounds", "1",
               "--reference-schemas", str(tmp / "no"))  # fmt: skip
    yield case("tour-examples-missing", "tour", "--examples", str(tmp / "no"), "--messages", "10")
    yield case("local-demo-messages-file", "local", "demo", "--messages", str(a_file))
    yield case("new-unknown-type", "new", "Nonsense")
    yield case("unknown-command", "nonsense")
    yield case("vendor-consumes-unknown-channel", "local", "up", "--vendor", "a:consumes=nosuch")
    yield case("control-characters-in-argument", "tail", "metadata", "--idle", "\x1b[31mred\n", "--url", "memory://x")


def _environment(tmp: Path, extra: dict[str, str]) -> dict[str, str]:
    environment = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp / "home"),
        "XDG_STATE_HOME": str(tmp / "state"),
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "eu-west-2",
        "AWS_EC2_METADATA_DISABLED": "true",
        "RDSS_LOG_FORMAT": "text",
        "RDSS_LOG_LEVEL": "WARNING",
        "PYTHONPATH": str(ROOT),
    }
    environment.update(extra)
    return {k: v for k, v in environment.items() if v}


@dataclass(frozen=True)
class Outcome:
    case: Case
    code: int | None
    out: str
    err: str
    seconds: float


def _run(case: Case, tmp: Path) -> Outcome:
    started = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "rdss", *case.argv],
            cwd=tmp,
            env=_environment(tmp, case.env),
            input=case.stdin.encode() if case.stdin is not None else b"",
            capture_output=True,
            timeout=LIMIT * 3,
            check=False,
        )
    except subprocess.TimeoutExpired as expired:
        return Outcome(case, None, _text(expired.stdout), _text(expired.stderr), time.monotonic() - started)
    return Outcome(case, done.returncode, _text(done.stdout), _text(done.stderr), time.monotonic() - started)


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data if isinstance(data, str) else data.decode("utf-8", "replace")


def _problems(outcome: Outcome) -> list[str]:
    case, problems = outcome.case, []
    if outcome.code not in case.exits:
        problems.append(f"exit {outcome.code}, expected {sorted(case.exits)}")
    if "Traceback" in outcome.out + outcome.err:
        problems.append("a traceback")
    if SECRET in outcome.out + outcome.err:
        problems.append("the password echoed back")
    if "\x1b" in outcome.out + outcome.err:
        problems.append("a raw escape character")
    said = [line for line in outcome.err.splitlines() if not _LOG_LINE.match(line)]
    if outcome.code == 1:  # a verdict: a line per input (on stdout or stderr), and at most a summary
        verdicts = [line for line in outcome.out.splitlines() + said if line.strip()]
        if not 1 <= len(verdicts) <= 2:
            problems.append(f"{len(verdicts)} line(s) said for a verdict, expected one or two")
    elif len(said) != 1 or not said[0].startswith("rdss"):
        problems.append(f"{len(said)} line(s) said, expected one 'rdss ...' line")
    if outcome.seconds > LIMIT:
        problems.append(f"{outcome.seconds:.1f} s, over {LIMIT:g} s")
    return problems


def test_no_mistake_gets_a_traceback_a_hang_or_a_secret(tmp_path: Path, endpoint: Endpoint) -> None:
    (tmp_path / "home").mkdir()
    # the emulator loads a service's code on its first call: done now, so that the time measured
    # is the command's, not the emulator's start-up
    warm_ups = {
        "kinesis": ("list_streams", {}),
        "cloudformation": ("describe_stacks", {"StackName": "rdss-warm-up"}),
        "sqs": ("list_queues", {}),
        "lambda": ("list_functions", {}),
        "dynamodb": ("list_tables", {}),
        "s3": ("list_buckets", {}),
    }
    for service, (operation, arguments) in warm_ups.items():
        with contextlib.suppress(Exception):  # a refusal warms it up as well
            getattr(endpoint.client(service), operation)(**arguments)
    table = list(cases(tmp_path, endpoint.url))
    if not endpoint.embedded:
        table = [case for case in table if _talks_to(case, endpoint.url)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        outcomes = list(pool.map(lambda case: _run(case, tmp_path), table))
    failures = []
    for outcome in outcomes:
        problems = _problems(outcome)
        if problems:
            tail = "\n    ".join((outcome.err or outcome.out).strip().splitlines()[-6:])
            failures.append(f"{outcome.case.name}: {'; '.join(problems)}\n    {tail}")
    timed = sorted((o for o in outcomes if o.case.timed), key=lambda o: -o.seconds)
    print(f"\n{len(outcomes)} cases; unreachable endpoints, slowest first:")
    for outcome in timed:
        last = outcome.err.strip().splitlines()[-1] if outcome.err.strip() else ""
        print(f"  {outcome.seconds:5.1f} s  exit {outcome.code}  {outcome.case.name}: {last[:150]}")
    assert not failures, f"{len(failures)} of {len(outcomes)} cases:\n" + "\n".join(failures)
    assert len(timed) >= (20 if endpoint.embedded else 5)


def _talks_to(case: Case, url: str) -> bool:
    """Whether the case's command is pointed at ``url`` (by an argument or the environment)."""
    return any(url in text for text in (*case.argv, *case.env.values()))
