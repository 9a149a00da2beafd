"""The logging set-up: RFC 5424 to a syslog socket, JSON or text on standard error, the
environment's settings, and the fields of a line about one message."""

from __future__ import annotations

import io
import logging
import os

import orjson
import pytest

from rdss import __version__
from rdss.model.workload import Workload
from rdss.observability.outside import LogSettings, configure, message_fields, parse_address
from tests.support.syslog import fake_syslog, parse


def test_syslog_lines_go_to_the_socket_and_pass_a_strict_parser():
    header = Workload(1).message("MetadataCreate", "Event")["messageHeader"]
    with fake_syslog() as syslog:
        configure("my-repository", version="1.2.0", settings=LogSettings("syslog", address=syslog.address))
        logging.getLogger("rdss.test").info("Message sent", extra=message_fields(header, "input"))
        logging.getLogger("rdss.test").warning("Message refused", extra={"errorCode": "GENERR004"})
        logging.getLogger("rdss.test").debug("not at INFO")
        first, second = syslog.lines()
    line = parse(first)
    assert (line.facility, line.severity, line.app, line.procid) == (16, 6, "my-repository-1.2.0", str(os.getpid()))
    assert line.msg == (
        f"[INFO] Message sent messageId={header['messageId']} messageType=MetadataCreate messageClass=Event "
        "channel=input"
    )
    assert parse(second).severity == 4
    assert parse(second).msg == "[WARNING] Message refused errorCode=GENERR004"


def test_the_facility_and_level_come_from_the_environment():
    with fake_syslog() as syslog:
        settings = LogSettings.from_environment(
            {"RDSS_SYSLOG_ADDRESS": syslog.address, "RDSS_SYSLOG_FACILITY": "local7", "RDSS_LOG_LEVEL": "warning"}
        )
        configure("app", settings=settings)
        logging.getLogger("rdss.test").info("quiet")
        logging.getLogger("rdss.test").error("loud")
        [line] = syslog.lines()
    assert (parse(line).facility, parse(line).severity, parse(line).app) == (23, 3, f"app-{__version__}")


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        ({"RDSS_LOG_FORMAT": "xml"}, "RDSS_LOG_FORMAT must be one of syslog, json, text"),
        ({"RDSS_LOG_LEVEL": "chatty"}, "RDSS_LOG_LEVEL must be DEBUG, INFO"),
        ({"RDSS_SYSLOG_FACILITY": "daemon"}, "RDSS_SYSLOG_FACILITY must be local0..local7"),
        ({"RDSS_SYSLOG_ADDRESS": "udp:loghost"}, "expected udp:HOST:PORT"),
        ({"RDSS_SYSLOG_ADDRESS": "relative/path"}, "expected unix:PATH"),
    ],
)
def test_malformed_settings_are_named(variables: dict[str, str], message: str):
    with pytest.raises(ValueError, match=message):
        LogSettings.from_environment(variables)


def test_addresses():
    assert parse_address("/dev/log") == ("/dev/log", None)
    assert parse_address("unix:/run/log.sock") == ("/run/log.sock", None)
    assert parse_address("udp:logs.example:514")[0] == ("logs.example", 514)


def test_without_a_syslog_socket_only_warnings_reach_standard_error_unless_asked(tmp_path):
    stream = io.StringIO()
    configure("app", settings=LogSettings(address=str(tmp_path / "no-such-socket")), stream=stream)
    logging.getLogger("rdss.test").info("Message sent")
    logging.getLogger("rdss.test").warning("Message refused", extra={"errorCode": "GENERR001"})
    [line] = stream.getvalue().splitlines()
    assert line.endswith(f"app-{__version__}[{os.getpid()}] [WARNING] Message refused errorCode=GENERR001")
    # syslog asked for by name but missing: the same RFC 5424 lines, on standard error
    stream = io.StringIO()
    configure("app", settings=LogSettings("syslog", address=str(tmp_path / "none")), stream=stream)
    logging.getLogger("rdss.test").info("Message sent")
    assert parse(stream.getvalue().strip()).msg == "[INFO] Message sent"


def test_json_lines_carry_the_fields_as_members():
    stream = io.StringIO()
    configure("app", version="2.0.0", settings=LogSettings("json"), stream=stream)
    extra = {"messageId": "m", "channel": "metadata", "errorCode": "GENERR002"}
    logging.getLogger("rdss.test").warning("Message refused", extra=extra)
    line = orjson.loads(stream.getvalue())
    assert line["level"] == "WARNING"
    assert line["application"] == "app-2.0.0"
    assert line["pid"] == os.getpid()
    assert {k: line[k] for k in extra} == extra
    assert line["timestamp"].endswith("Z")
    assert "T" in line["timestamp"]


def test_configuring_again_replaces_the_handler():
    configure("one", settings=LogSettings("text"), stream=io.StringIO())
    stream = io.StringIO()
    configure("two", settings=LogSettings("text"), stream=stream)
    ours = [h for h in logging.getLogger().handlers if getattr(h, "_rdss_logs", False)]
    assert len(ours) == 1
    logging.getLogger("rdss.test").info("hello")
    assert "two-" in stream.getvalue()


def test_message_fields_of_a_part():
    part = {"messageId": "p", "messageType": "MetadataCreate", "messageClass": "Event"}
    part["messageSequence"] = {"sequence": "s", "position": 2, "total": 3}  # type: ignore[assignment]
    assert message_fields(part, "sequence", errorCode=None) == {
        "messageId": "p",
        "messageType": "MetadataCreate",
        "messageClass": "Event",
        "channel": "sequence",
        "sequence": "s",
        "position": 2,
        "total": 3,
    }


def test_in_lambda_the_package_modules_write_the_processors_json_lines():
    """rdss.observability.powertools, imported in a Lambda function, gives the ``rdss`` loggers the
    processor logger's handler: one JSON line each, its keys and level, the module's name."""
    import subprocess
    import sys

    script = (
        "import logging, rdss.observability.powertools as o\n"
        "logging.getLogger('rdss.aws.putrecords').warning('gave up', extra={'errorCode': 'GENERR005'})\n"
        "logging.getLogger('rdss.aws.putrecords').debug('below the level')\n"
        "o.logger.info('own line')\n"
    )
    environment = {
        **os.environ,
        "AWS_LAMBDA_FUNCTION_NAME": "rdss-dev-broker",
        "POWERTOOLS_SERVICE_NAME": "broker",
        "POWERTOOLS_LOG_LEVEL": "INFO",
        "AWS_DEFAULT_REGION": "eu-west-2",
    }
    done = subprocess.run([sys.executable, "-c", script], env=environment, capture_output=True, text=True, check=True)
    lines = [orjson.loads(line) for line in (done.stdout + done.stderr).splitlines() if line.startswith("{")]
    assert [(line["level"], line["message"], line["name"]) for line in lines] == [
        ("WARNING", "gave up", "rdss.aws.putrecords"),
        ("INFO", "own line", "broker"),
    ]
    assert lines[0]["service"] == "broker"
    assert lines[0]["errorCode"] == "GENERR005"
