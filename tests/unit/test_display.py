"""What reaches a person: secrets redacted, control characters escaped, long values cut - in
the CLI's own lines, its usage errors, the gateway's URL errors and every log format."""

from __future__ import annotations

import io
import json
import logging

import pytest

from rdss.cli import main
from rdss.gateway import Gateway
from rdss.gateway.url import URLError, parse
from rdss.host import display
from rdss.observability.outside import JSONFormatter, LogSettings, TextFormatter, configure
from rdss.observability.syslog import SyslogFormatter

SECRET = "S3cretPw"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (f"amqp://user:{SECRET}@host:5672/%2F?bogus=1", "amqp://user:***@host:5672/%2F?bogus=1"),
        (f"'amqps://u:{SECRET}@[::1/x': Invalid IPv6 URL", "'amqps://u:***@[::1/x': Invalid IPv6 URL"),
        (f"kinesis://dev?region=x&password={SECRET}&token={SECRET}", "kinesis://dev?region=x&password=***&token=***"),
        (f"http://h/oai?x=1&api_key={SECRET}", "http://h/oai?x=1&api_key=***"),
        (
            f"set secret_key={SECRET} and aws_secret_access_key: {SECRET}",
            "set secret_key=*** and aws_secret_access_key: ***",
        ),
        ("http://h/oai?verb=ListRecords&resumptionToken=abc", "http://h/oai?verb=ListRecords&resumptionToken=abc"),
        ("amqp://guest@localhost/%2F", "amqp://guest@localhost/%2F"),
        ("partition key moved:acme", "partition key moved:acme"),
    ],
)
def test_secrets_are_redacted_and_the_rest_kept(text, shown):
    assert display.redact(text) == shown
    assert SECRET not in display.redact_url(text)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain text, unicode é ✓", "plain text, unicode é ✓"),
        ("two\nlines\r\tand a tab", "two\\nlines\\r\\tand a tab"),
        ("\x1b[2J\x1b[31mred\x07\x00\x7f", "\\x1b[2J\\x1b[31mred\\x07\\x00\\x7f"),
        ("\x9b31m C1 and \u202eoiduts\u2066 bidi \u2028", "\\x9b31m C1 and \\u202eoiduts\\u2066 bidi \\u2028"),
    ],
)
def test_control_characters_are_escaped(text, shown):
    assert display.printable(text) == shown


def test_json_stays_json_with_its_raw_controls_escaped():
    value = {"generator": "a\x9b\u202e\n\x1b"}
    raw = json.dumps(value, ensure_ascii=False).encode()
    safe = display.printable_json(raw)
    assert json.loads(safe) == value
    assert not any(ch in safe.decode() for ch in "\x9b\u202e\x1b\n")


def test_long_values_are_cut_saying_how_much():
    assert display.shorten("x" * 10, 20) == "x" * 10
    assert display.shorten("x" * 1000, 20) == "x" * 20 + "... (980 more characters)"


def test_a_url_error_never_holds_the_password():
    with pytest.raises(URLError) as error:
        parse(f"amqp://user:{SECRET}@[::1/%2F")
    assert SECRET not in str(error.value)
    with pytest.raises(URLError) as error:
        parse(f"kinesis://dev?bogus=1&password={SECRET}")
    assert SECRET not in str(error.value)
    with pytest.raises(URLError) as error:
        Gateway(f"amqp://user:{SECRET}@127.0.0.1:1/%2F?confirm_timeout=nan")
    assert SECRET not in str(error.value)


def _record(message: str, *args: object, **extra: object) -> logging.LogRecord:
    record = logging.LogRecord("rdss.test", logging.WARNING, __file__, 1, message, args, None)
    record.__dict__.update(extra)
    return record


@pytest.mark.parametrize(
    "formatter",
    [TextFormatter("app", "1.0"), JSONFormatter("app", "1.0"), SyslogFormatter("app", "1.0")],
    ids=["text", "json", "syslog"],
)
def test_every_log_format_redacts_and_escapes(formatter):
    line = formatter.format(
        _record("connecting to %s failed", f"amqp://user:{SECRET}@host/%2F\n[ERROR] forged", messageId="a\x1b[31mb")
    )
    assert SECRET not in line
    assert "\n" not in line
    assert "\x1b" not in line
    assert "amqp://user:***@host/%2F" in line


def test_the_cli_says_one_line_without_the_password(capsys):
    code = main(["send", "-", "--url", f"amqp://user:{SECRET}@[::1/%2F"])
    err = capsys.readouterr().err
    assert code == 2
    assert SECRET not in err
    assert err.count("\n") == 1


def test_a_usage_error_is_one_line_escaped(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["tail", "metadata", "--idle", "\x1b[31mnan\n", "--url", "memory://x"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert err.count("\n") == 1
    assert "\x1b" not in err
    assert "rdss tail: argument --idle: expected a number of seconds above 0" in err


def test_log_lines_reach_a_stream_redacted():
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(TextFormatter("app", "1.0"))
    logger = logging.getLogger("rdss.test.display")
    logger.addHandler(handler)
    try:
        logger.warning("url %s", f"amqp://u:{SECRET}@h/")
    finally:
        logger.removeHandler(handler)
    assert SECRET not in stream.getvalue()


def test_a_library_s_traceback_is_logged_as_one_line():
    """botocore logs a failed credential refresh with its traceback before raising it: the line
    it leaves is one line naming the exception (which the caller reports itself)."""
    stream = io.StringIO()
    configure("app", settings=LogSettings(format="text"), stream=stream)
    try:
        raise ValueError("Invalid length for parameter ExternalId, value: 1,\nvalid min length: 2")
    except ValueError:
        logging.getLogger("botocore.credentials").warning("Refreshing temporary credentials failed", exc_info=True)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1
    assert lines[0].endswith(
        "Refreshing temporary credentials failed (ValueError: Invalid length for parameter ExternalId, value: 1, "
        "valid min length: 2)"
    )
    assert "Traceback" not in stream.getvalue()
