"""Each consumer reads the version it speaks (issue 31): a gateway told ``reads`` hands every
message over in that version, translated where the producer wrote another; one with no form
there goes to ``error`` with a code and a description, never dropped; request-reply works across
versions with the correlation kept. On the memory backend; tests/integration and tests/amqp run
the same exchange on the local runtime and on RabbitMQ (tests/support/versions.py)."""

from __future__ import annotations

import uuid
from typing import Any

import orjson
import pytest

from rdss.gateway import Gateway
from rdss.gateway.log import memory as memory_backend
from rdss.model.retry import Backoff
from rdss.model.validation import validate
from rdss.model.workload import Workload, Workload4
from tests.support import versions

FAST = Backoff(max_retries=3, base=0.001)


@pytest.fixture
def bus_name():
    name = f"v-{uuid.uuid4().hex[:8]}"
    yield name
    memory_backend.discard(name)


def _gateway(bus_name: str, application: str, **kwargs: Any) -> Gateway:
    return Gateway(f"memory://{bus_name}", application=application, backoff=FAST, reply_poll_interval=0.02, **kwargs)


@pytest.mark.parametrize(("written", "read"), [("3.0.2", "4.0.0"), ("4.0.0", "3.0.2")])
def test_a_producer_and_a_consumer_of_different_versions_exchange_create_update_delete_and_a_read(
    bus_name: str, written: str, read: str
) -> None:
    versions.exchange(
        lambda application, **options: _gateway(bus_name, application, **options),
        written=written,
        read=read,
        channel="metadata",
        request_channel="input",
    )


def test_a_message_with_no_form_in_the_version_read_goes_to_error_with_a_code(bus_name: str) -> None:
    producer = _gateway(bus_name, "repository")
    vocabulary = Workload(3).message("VocabularyPatch", "Event")
    create = Workload(4).message("MetadataCreate", "Event")
    producer.send_all([vocabulary, create], channel="vocabulary")
    consumer = _gateway(bus_name, "preservation", reads="4.0.0", tenant_jisc_id=versions.TENANT)
    with consumer.receiver("vocabulary", poll_interval=0.01) as inbox:
        got = inbox.receive(timeout=2)
        assert got is not None
        assert got.message_id == create["messageHeader"]["messageId"]  # the one behind it is not held up
        assert got.header["version"] == "4.0.0"
        inbox.ack(got)
        assert inbox.receive(timeout=0.2) is None
        assert inbox.stats.untranslatable == 1
    [moved] = memory_backend.bus(bus_name).payloads("error")
    header = orjson.loads(moved)["messageHeader"]
    assert header["messageId"] == vocabulary["messageHeader"]["messageId"]
    assert header["errorCode"] == "GENERR006"
    assert "cannot be translated to 4.0.0 for preservation: GENERR002 VocabularyPatch" in header["errorDescription"]
    assert header["version"] == "3.0.2"  # moved as it was sent, decorated


def test_a_consumer_with_no_version_gets_each_message_as_written(bus_name: str) -> None:
    producer = _gateway(bus_name, "repository")
    create = Workload(5).message("MetadataCreate", "Event")
    producer.send(create, channel="metadata")
    with _gateway(bus_name, "reader").receiver("metadata", poll_interval=0.01) as inbox:
        got = inbox.receive(timeout=2)
        assert got is not None
        assert got.message["messageBody"] == create["messageBody"]


def test_reads_must_be_a_version_the_translators_write(bus_name: str) -> None:
    with pytest.raises(ValueError, match="reads"):
        _gateway(bus_name, "reader", reads="5.0.0")


# -- what cdk.json declares ------------------------------------------------------------------------


def _context(**changes: Any) -> dict[str, Any]:
    import copy

    from rdss.deployment.settings import read_context

    context = copy.deepcopy(read_context())
    context["environments"]["prod"].update(changes)
    return context


def test_a_vendor_declares_the_version_it_reads_and_the_deployment_its_tenant() -> None:
    from rdss.deployment.settings import load

    prod = _context()["environments"]["prod"]
    vendors = {name: dict(vendor) for name, vendor in prod["vendors"].items()}
    reader = next(name for name, vendor in vendors.items() if vendor.get("consumes"))
    vendors[reader]["reads"] = "4.0.0"
    config = load(_context(vendors=vendors, tenant_jisc_id=1234), "prod", environ={})
    assert config.vendors[reader].reads == "4.0.0"
    assert config.tenant_jisc_id == 1234
    assert {v.reads for n, v in config.vendors.items() if n != reader} == {"3.0.2"}  # the default
    assert load(_context(), "prod", environ={}).tenant_jisc_id is None


@pytest.mark.parametrize(("where", "value"), [("reads", "4.1.0"), ("reads", 4), ("tenant_jisc_id", "1234")])
def test_a_version_or_tenant_cdk_json_cannot_mean_is_refused_naming_the_key(where: str, value: Any) -> None:
    from rdss.deployment.settings import ConfigError, load

    prod = _context()["environments"]["prod"]
    if where == "reads":
        vendors = {name: {**vendor, "reads": value} for name, vendor in prod["vendors"].items()}
        context = _context(vendors=vendors)
    else:
        context = _context(tenant_jisc_id=value)
    with pytest.raises(ConfigError, match=where):
        load(context, "prod", environ={})


# -- the command line ------------------------------------------------------------------------------


def test_rdss_tail_reads_a_version_and_names_what_has_no_form_in_it(
    bus_name: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from rdss.cli import main

    url = f"memory://{bus_name}"
    monkeypatch.setenv("RDSS_GATEWAY_URL", url)
    create = Workload(6).message("MetadataCreate", "Event")
    patch = Workload(6).message("VocabularyPatch", "Event")
    _gateway(bus_name, "repository").send_all([create, patch], channel="vocabulary")
    tail = ["tail", "vocabulary", "--from-start", "--count", "2", "--log-format", "text"]
    assert main([*tail, "--reads", "4.0.0", "--tenant-jisc-id", "77"]) == 0
    out, err = capsys.readouterr()
    [line] = out.splitlines()
    printed = orjson.loads(line)
    assert printed["messageHeader"]["messageId"] == create["messageHeader"]["messageId"]
    assert printed["messageHeader"]["tenantJiscID"] == 77
    assert printed["messageBody"]["objectUUID"] == create["messageBody"]["objectUuid"]
    assert "no form in 4.0.0: GENERR002 VocabularyPatch" in err
    assert len(memory_backend.bus(bus_name).payloads("vocabulary")) == 2  # tail moves nothing
    assert main([*tail]) == 0
    assert [orjson.loads(line)["messageHeader"]["version"] for line in capsys.readouterr().out.splitlines()] == [
        "3.0.2",
        "3.0.2",
    ]


@pytest.mark.parametrize(("written", "read"), [("3.0.2", "4.0.0"), ("4.0.0", "3.0.2")])
def test_a_failure_reply_crosses_versions_too(bus_name: str, written: str, read: str) -> None:
    import threading

    from rdss.gateway import RequestFailed, select

    responder = _gateway(bus_name, "responder", reads=read, tenant_jisc_id=versions.TENANT)

    def run() -> None:
        responder.listen(
            "input",
            lambda received: responder.reply_error(received, "APPERRMET003", "no such object"),
            max_messages=1,
            idle_timeout=5,
            poll_interval=0.02,
            selector=select(message_class="Command"),
        )

    thread = threading.Thread(target=run)
    thread.start()
    requester = _gateway(bus_name, "requester", reads=written, tenant_jisc_id=versions.TENANT)
    request = versions.in_version(Workload(8).message("MetadataRead", "Command"), written)
    try:
        with pytest.raises(RequestFailed) as failed:
            requester.request(request, timeout=10)
    finally:
        thread.join(10)
    assert failed.value.error_code == "APPERRMET003"
    header = failed.value.reply["messageHeader"]
    assert header["correlationId"] == request["messageHeader"]["messageId"]
    assert header["version"] == written
    assert versions.object_id(failed.value.reply) == versions.object_id(request)
    assert validate(orjson.dumps(failed.value.reply), check_expiry=False).valid


def test_a_preservation_event_is_routed_to_metadata_and_moved_to_error_for_a_3_0_2_reader(bus_name: str) -> None:
    event = Workload4(31).message("PreservationEvent", "Event")
    create = Workload(32).message("MetadataCreate", "Event")
    _gateway(bus_name, "archivematica", reads="4.0.0", tenant_jisc_id=versions.TENANT).send_all(
        [event, create], channel="metadata"
    )
    preservation = _gateway(bus_name, "preservation", reads="4.0.0", tenant_jisc_id=versions.TENANT)
    with preservation.receiver("metadata", poll_interval=0.01) as inbox:
        got = inbox.receive(timeout=2)  # a 4.0.0 reader takes it as written
        assert got is not None
        assert got.message_id == event["messageHeader"]["messageId"]
        assert got.header["messageType"] == "PreservationEvent"
    with _gateway(bus_name, "repository", reads="3.0.2").receiver("metadata", poll_interval=0.01) as inbox:
        got = inbox.receive(timeout=2)
        assert got is not None
        assert got.message_id == create["messageHeader"]["messageId"]  # the event is not delivered
        assert inbox.stats.untranslatable == 1
    [moved] = memory_backend.bus(bus_name).payloads("error")
    header = orjson.loads(moved)["messageHeader"]
    assert header["messageId"] == event["messageHeader"]["messageId"]
    assert header["errorCode"] == "GENERR006"
    assert "cannot be translated to 3.0.2 for repository: GENERR002 PreservationEvent" in header["errorDescription"]
