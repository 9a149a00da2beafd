"""The spec's logging format (RFC 5424) and its network failure behaviour (backoff, GENERR005)."""

from __future__ import annotations

import logging
import re
import socket

import pytest

from rdss.model.retry import SPEC_BACKOFF, Backoff, RetriesExhausted, call_with_backoff
from rdss.observability.syslog import LOCAL0, LOCAL7, SyslogFormatter, SyslogHandler, severity

LINE = re.compile(
    r"^<(?P<pri>\d+)>1 (?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z) (?P<host>\S+) (?P<app>\S+) (?P<pid>\d+) - - "
    r"\[(?P<level>[A-Z]+)\] (?P<msg>.*)$"
)


def _record(level: int, message: str, *args) -> logging.LogRecord:
    return logging.LogRecord("rdss", level, __file__, 1, message, args, None)


def test_lines_follow_rfc5424_and_the_spec_example():
    formatter = SyslogFormatter("msgsender", "1.2.0", facility=LOCAL0, hostname="mymachine.example.com")
    line = formatter.format(_record(logging.INFO, "Message sent."))
    match = LINE.match(line)
    assert match, line
    assert match["pri"] == "134"  # local0 (16) * 8 + informational (6), as in the spec's example
    assert match["host"] == "mymachine.example.com"
    assert match["app"] == "msgsender-1.2.0"
    assert match["level"] == "INFO"
    assert match["msg"] == "Message sent."


@pytest.mark.parametrize(
    ("level", "value"),
    [(logging.DEBUG, 7), (logging.INFO, 6), (logging.WARNING, 4), (logging.ERROR, 3), (logging.CRITICAL, 2)],
)
def test_levels_map_to_severities(level: int, value: int):
    assert severity(level) == value
    line = SyslogFormatter("app", "1.0.0", facility=LOCAL7).format(_record(level, "x"))
    assert line.startswith(f"<{23 * 8 + value}>1 ")


def test_only_local_facilities_are_allowed():
    with pytest.raises(ValueError, match="local0-local7"):
        SyslogFormatter("app", "1.0.0", facility=1)


def test_long_and_multi_line_messages_stay_one_bounded_line():
    formatter = SyslogFormatter("app", "1.0.0", hostname="h")
    line = formatter.format(_record(logging.ERROR, "first\nsecond " + "é" * 3000))
    assert "\n" not in line
    assert len(line.encode()) <= 2048
    line.encode("utf-8")  # never cut inside a character


def test_exceptions_are_summarised_on_the_line():
    formatter = SyslogFormatter("app", "1.0.0", hostname="h")
    try:
        raise ConnectionError("stream unreachable")
    except ConnectionError:
        import sys

        record = logging.LogRecord("rdss", logging.ERROR, __file__, 1, "send failed", (), sys.exc_info())
    assert formatter.format(record).endswith("[ERROR] send failed (ConnectionError: stream unreachable)")


def test_the_handler_sends_the_line_unprefixed_over_udp():
    receiver = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    receiver.bind(("127.0.0.1", 0))
    receiver.settimeout(5)
    handler = SyslogHandler(address=receiver.getsockname())
    handler.setFormatter(SyslogFormatter("app", "2.0.0", hostname="h"))
    logger = logging.getLogger("rdss.test.syslog")
    logger.addHandler(handler)
    try:
        logger.warning("Message received")
        data, _ = receiver.recvfrom(4096)
    finally:
        logger.removeHandler(handler)
        handler.close()
        receiver.close()
    assert re.match(rb"^<132>1 \S+ h app-2\.0\.0 \d+ - - \[WARNING\] Message received$", data)


def test_the_spec_backoff_doubles_from_200_ms_for_ten_retries():
    assert list(SPEC_BACKOFF.delays()) == [0.2 * 2**i for i in range(10)]
    assert Backoff(max_retries=3, cap=0.5).delay(3) == 0.5
    with pytest.raises(ValueError):
        SPEC_BACKOFF.delay(0)


def test_retries_stop_at_the_first_success():
    sleeps: list[float] = []
    outcomes = iter([ConnectionError("down"), ConnectionError("down"), "sent"])

    def send() -> str:
        outcome = next(outcomes)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    assert call_with_backoff(send, retry_on=lambda e: isinstance(e, ConnectionError), sleep=sleeps.append) == "sent"
    assert sleeps == [0.2, 0.4]


def test_giving_up_logs_generr005(caplog: pytest.LogCaptureFixture):
    sleeps: list[float] = []

    def send() -> None:
        raise ConnectionError("down")

    with caplog.at_level(logging.ERROR), pytest.raises(RetriesExhausted) as caught:
        call_with_backoff(send, retry_on=lambda e: True, sleep=sleeps.append)
    assert len(sleeps) == 10
    assert caught.value.error_code == "GENERR005"
    assert any("GENERR005" in r.getMessage() and "11 attempts" in r.getMessage() for r in caplog.records)


def test_errors_that_are_not_retryable_propagate_at_once():
    def send() -> None:
        raise ValueError("bad message")

    with pytest.raises(ValueError):
        call_with_backoff(send, retry_on=lambda e: isinstance(e, ConnectionError), sleep=lambda s: None)
