"""Pure logic of the gateway: URLs, the lease protocol, the throttle, selectors."""

from __future__ import annotations

import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rdss.gateway import TransportError, URLError, backend, select
from rdss.gateway.backend import Settings, open_backend
from rdss.gateway.checkpoints import LATEST, SHARD_END, TRIM_HORIZON, Lease, MemoryLeaseStore
from rdss.gateway.leases import LeaseCoordinator, PartitionInfo
from rdss.gateway.throttle import Throttle
from rdss.gateway.url import parse


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


# -- URLs ------------------------------------------------------------------------------------------
def test_kinesis_urls_name_a_deployment_and_take_endpoint_region_prefix():
    url = parse("kinesis://dev?endpoint=http://127.0.0.1:5000&region=eu-west-2&prefix=acme")
    assert (url.scheme, url.name) == ("kinesis", "dev")
    assert url.params == {"endpoint": "http://127.0.0.1:5000", "region": "eu-west-2", "prefix": "acme"}


def test_memory_urls_name_a_bus():
    url = parse("memory://tests?partitions=4")
    assert (url.scheme, url.name, url.param("partitions")) == ("memory", "tests", "4")


@pytest.mark.parametrize(
    ("url", "complaint"),
    [
        ("dev", "not a gateway URL"),
        ("kinesis://", "needs one name"),
        ("kinesis://dev/extra", "needs one name"),
        ("kinesis://dev?endpoint=localhost:5000", "endpoint must be an http(s) URL"),
        ("kinesis://dev?shards=2", "unknown parameter(s) shards"),
        ("memory://x?partitions=0", "partitions must be"),
        ("memory://x?ldr=sqlite:///a.sqlite&ldr=dynamodb://t", "parameter(s) ldr given more than once"),
        ("amqp://u:p@host/?heartbeat=30&heartbeat=0", "parameter(s) heartbeat given more than once"),
        ("memory://x#frag", "no #fragment"),
        ("kinesis://dev?region=eu-west-2#", "no #fragment"),
    ],
)
def test_bad_urls_say_what_is_wrong(url, complaint):
    with pytest.raises(URLError, match=complaint.replace("(", r"\(").replace(")", r"\)")):
        parse(url)


_PARAMETERS = {
    "kinesis": ["endpoint", "region", "prefix", "ldr"],
    "memory": ["partitions", "ldr"],
    "amqp": ["heartbeat"],
}
_VALUES = {"endpoint": "http://127.0.0.1:5000", "partitions": "2", "ldr": "memory://x"}


@given(
    st.sampled_from(sorted(_PARAMETERS)).flatmap(
        lambda s: st.tuples(st.just(s), st.lists(st.sampled_from(_PARAMETERS[s]), min_size=1, max_size=5))
    )
)
def test_a_parameter_given_twice_is_refused_once_is_kept(scheme_and_names):
    # parse_qsl then dict() kept the last of two ldr= silently: which store a gateway used was a guess
    scheme, names = scheme_and_names
    query = "&".join(f"{name}={_VALUES.get(name, 'eu-west-2')}" for name in names)
    url = f"{scheme}://dev?{query}"
    if len(set(names)) < len(names):
        with pytest.raises(URLError, match="given more than once"):
            parse(url)
    else:
        assert set(parse(url).params) == set(names)


def test_other_schemes_are_left_to_their_backend():
    url = parse("amqp://guest:guest@rabbit:5672/rdss?heartbeat=30")
    assert (url.scheme, url.name, url.params) == ("amqp", "rabbit", {"heartbeat": "30"})
    assert url.raw.startswith("amqp://guest:guest@")


def test_an_unregistered_or_missing_backend_is_a_transport_error(monkeypatch):
    with pytest.raises(TransportError, match="no gateway backend for nats://"):
        open_backend(parse("nats://x"), Settings())
    monkeypatch.setitem(backend._FACTORIES, "mqtt", "rdss.gateway.not_written_yet:open_backend")
    with pytest.raises(TransportError, match="mqtt:// backend is not available"):
        open_backend(parse("mqtt://broker"), Settings())


def test_backends_register_by_scheme(monkeypatch):
    opened = []

    def factory(url, settings):
        opened.append((url.name, settings.application))
        return "a backend"

    monkeypatch.setitem(backend._FACTORIES, "fake", "x:y")
    backend.register("fake", factory)
    assert open_backend(parse("fake://here"), Settings(application="app")) == "a backend"
    assert opened == [("here", "app")]
    assert {"amqp", "kinesis", "memory", "fake"} <= set(backend.schemes())


# -- leases ----------------------------------------------------------------------------------------
def coordinator(store, name, partitions, clock, **kwargs):
    return LeaseCoordinator(store, name, lambda: partitions, lease_duration=3.0, clock=clock, **kwargs)


FOUR = [PartitionInfo(f"shard-{i}") for i in range(4)]


def run(c: LeaseCoordinator) -> None:
    """A tick, then what the consumer does with hand-off requests: commit and release."""
    c.tick()
    for partition in c.handoffs():
        c.release(partition)


def owners(store):
    found: dict[str | None, set[str]] = {}
    for lease in store.leases():
        found.setdefault(lease.owner, set()).add(lease.partition)
    return found


def test_a_lone_worker_takes_every_lease():
    store, clock = MemoryLeaseStore(), Clock()
    a = coordinator(store, "a", FOUR, clock)
    a.tick()
    assert set(a.held()) == {p.id for p in FOUR}
    assert all(lease.checkpoint == TRIM_HORIZON for lease in store.leases())


def test_a_second_worker_is_handed_leases_toward_an_even_share_and_then_stops():
    store, clock = MemoryLeaseStore(), Clock()
    a, b = coordinator(store, "a", FOUR, clock), coordinator(store, "b", FOUR, clock)
    run(a)
    run(b)  # b asks a for one lease
    [asked] = [lease for lease in store.leases() if lease.handoff == "b"]
    assert asked.owner == "a"
    run(a)  # a sees the request at its renewal, stops reading the shard and releases it
    assert asked.partition not in a.held()
    assert asked.partition not in {lease.partition for lease in store.leases() if lease.owner}
    run(b)  # b takes it, free, and asks for another
    assert asked.partition in b.held()
    for _ in range(4):
        clock.sleep(1)
        run(a)
        run(b)
    assert len(a.held()) == len(b.held()) == 2
    assert set(a.held()).isdisjoint(b.held())
    history = []
    for _ in range(20):  # stable: no lease changes hands once balanced
        clock.sleep(1)
        run(a)
        run(b)
        history.append((frozenset(a.held()), frozenset(b.held())))
    assert len(set(history)) == 1


def test_an_owner_that_ignores_a_hand_off_request_loses_the_lease_after_two_durations():
    store, clock = MemoryLeaseStore(), Clock()
    a, b = coordinator(store, "a", FOUR[:2], clock), coordinator(store, "b", FOUR[:2], clock)
    a.tick()
    b.tick()  # asks
    for _ in range(10):  # a renews but never releases (stuck in a handler, say)
        clock.sleep(1)
        a.tick()
        b.tick()
        if b.held():
            break
    assert len(b.held()) == 1
    assert clock.now - 1000.0 > 2 * 3.0


def test_an_odd_count_settles_without_ping_pong():
    store, clock = MemoryLeaseStore(), Clock()
    three = FOUR[:3]
    a, b = coordinator(store, "a", three, clock), coordinator(store, "b", three, clock)
    run(a)
    counts = []
    for _ in range(15):
        clock.sleep(1)
        run(b)
        run(a)
        counts.append((len(a.held()), len(b.held())))
    assert counts[-1] in ((2, 1), (1, 2))
    assert len(set(counts[-8:])) == 1


def test_the_leases_of_a_dead_worker_expire_and_are_taken_over():
    store, clock = MemoryLeaseStore(), Clock()
    a, b = coordinator(store, "a", FOUR, clock), coordinator(store, "b", FOUR, clock)
    run(a)
    run(b)
    for _ in range(5):
        clock.sleep(1)
        run(a)
        run(b)
    assert len(b.held()) == 2
    # a dies: its counters stop moving; b notices after lease_duration by its own clock
    clock.sleep(1)
    run(b)
    assert len(b.held()) == 2
    for _ in range(4):
        clock.sleep(1)
        run(b)
    assert set(b.held()) == {p.id for p in FOUR}
    assert owners(store) == {"b": {p.id for p in FOUR}}


def test_a_stolen_lease_cannot_be_checkpointed_by_its_old_owner():
    store, clock = MemoryLeaseStore(), Clock()
    a = coordinator(store, "a", FOUR[:1], clock)
    a.tick()
    [lease] = store.leases()
    assert store.take(lease, "thief") is not None
    assert a.checkpoint("shard-0", "42") is False
    assert a.held() == {}
    assert store.leases()[0].checkpoint == TRIM_HORIZON


def test_released_leases_are_taken_at_once():
    store, clock = MemoryLeaseStore(), Clock()
    a, b = coordinator(store, "a", FOUR, clock), coordinator(store, "b", FOUR, clock)
    a.tick()
    a.checkpoint("shard-1", "7")
    a.close()
    b.tick()  # no waiting for expiry
    assert len(b.held()) == 4
    assert {lease.partition: lease.checkpoint for lease in store.leases()}["shard-1"] == "7"


def test_children_wait_until_their_parents_are_finished():
    store, clock = MemoryLeaseStore(), Clock()
    listing = [
        PartitionInfo("parent", (), closed=True),
        PartitionInfo("child-a", ("parent",)),
        PartitionInfo("child-b", ("parent",)),
    ]
    a = coordinator(store, "a", listing, clock)
    a.tick()
    assert set(a.held()) == {"parent"}
    assert a.checkpoint("parent", SHARD_END)
    a.tick()
    assert set(a.held()) == {"child-a", "child-b"}
    finished = {lease.partition: lease for lease in store.leases()}["parent"]
    assert finished.finished
    assert finished.owner is None


def test_a_group_starting_at_latest_skips_history_but_reads_later_children_in_full():
    store, clock = MemoryLeaseStore(), Clock()
    listing = [PartitionInfo("old", (), closed=True), PartitionInfo("new", ("old",))]
    a = coordinator(store, "a", listing, clock, start=LATEST)
    a.tick()
    assert {lease.partition: lease.checkpoint for lease in store.leases()} == {"old": SHARD_END, "new": LATEST}
    listing.extend([PartitionInfo("split-1", ("new",)), PartitionInfo("split-2", ("new",))])
    a.tick()
    rows = {lease.partition: lease.checkpoint for lease in store.leases()}
    assert rows["split-1"] == rows["split-2"] == TRIM_HORIZON


def test_lease_writes_are_conditional_on_owner_and_counter():
    store = MemoryLeaseStore()
    assert store.create(Lease("p", None, 0, TRIM_HORIZON))
    assert not store.create(Lease("p", None, 0, TRIM_HORIZON))
    mine = store.take(store.leases()[0], "me")
    assert mine is not None
    assert mine.counter == 1
    assert store.take(Lease("p", None, 0, TRIM_HORIZON), "you") is None  # stale view
    assert store.renew(Lease("p", "me", 0, TRIM_HORIZON)) is None
    renewed = store.renew(mine)
    assert renewed is not None
    assert store.checkpoint(mine, "1") is None  # the counter moved on
    assert store.checkpoint(renewed, "1") is not None


# -- throttle and selectors ------------------------------------------------------------------------
def test_the_throttle_allows_at_most_n_in_any_second():
    clock = Clock()
    throttle = Throttle(5, clock=clock, sleep=clock.sleep)
    times = []
    for _ in range(23):
        throttle.wait()
        times.append(clock.now)
    for index, start in enumerate(times):
        assert sum(1 for t in times[index:] if t < start + 1.0) <= 5
    assert times[4] == times[0]  # a burst of five is not slowed
    assert times[-1] - times[0] == pytest.approx(4.0)  # then five a second


def test_a_fractional_rate_spaces_messages_out():
    clock = Clock()
    throttle = Throttle(0.5, clock=clock, sleep=clock.sleep)
    for _ in range(3):
        throttle.wait()
    assert clock.now == pytest.approx(1004.0)


def test_selectors_match_type_and_class():
    creates = select(message_type="MetadataCreate")
    reads = select(message_type=["MetadataRead", "VocabularyRead"], message_class="Command")
    assert creates({"messageType": "MetadataCreate", "messageClass": "Event"})
    assert not creates({"messageType": "MetadataDelete", "messageClass": "Event"})
    assert reads({"messageType": "VocabularyRead", "messageClass": "Command"})
    assert not reads({"messageType": "VocabularyRead", "messageClass": "Document"})


def test_a_backend_whose_extra_is_missing_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "pika", None)  # what an absent package looks like to import
    # a backend module's first import of pika, without re-importing (and duplicating) ours
    monkeypatch.setitem(backend._FACTORIES, "amqp", "pika.not_imported_yet:open_backend")
    with pytest.raises(TransportError) as raised:
        open_backend(parse("amqp://guest:guest@rabbit:5672/"), Settings())
    assert str(raised.value) == (
        "the amqp:// backend is not available: it needs the amqp extra (pika is not installed): "
        "pip install 'rdss-messaging[amqp]'"
    )
