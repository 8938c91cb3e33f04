"""Consumer groups with real clients against a real broker (issue #4).

Members run in their own processes (`group_member`), each committing every record before the
next, so a test can let them join, leave (SIGTERM) or die (SIGKILL) and then check that every
record was committed exactly once. The broker allows 1 s session timeouts so deaths are
noticed in seconds. Raw requests cover what the clients cannot be made to send.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode as E
from pybroker.testing import RequestHooks
from tests.helpers import (
    BrokerProcess, broker_in_thread, force_a_lost_join_round, serving_broker,
)
from tests.integration.group_harness import Member, committed_exactly_once, wait_until
from tests.integration.raw import (
    RawConnection, coordinator_address, create_topic, group_beside, known_topics, send_request,
)

CLIENTS = ("confluent", "kafka-python", "aiokafka")


@pytest.fixture
def fast_broker(tmp_path: Path) -> Iterator[Any]:
    with serving_broker(tmp_path / "logs", group_min_session_timeout_ms="1000") as info:
        yield info


@pytest.fixture
def members() -> Iterator[list[Member]]:
    started: list[Member] = []
    yield started
    for m in started:
        m.ensure_dead()
        print(m.debug())  # shown when the test failed


def produce(bootstrap: str, topic: str, values: list[str], partitions: int = 6) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i, value in enumerate(values):
        producer.produce(topic, value=value.encode(), partition=i % partitions)
    assert producer.flush(30) == 0


def batch(name: str, n: int = 60) -> list[str]:
    return [f"{name}-{i}" for i in range(n)]


def start(members: list[Member], *args: Any, **kwargs: Any) -> Member:
    member = Member(*args, **kwargs)
    members.append(member)
    return member


def covered(values: list[str], *ms: Member, killed: tuple[Member, ...] = ()) -> bool:
    done = {v for m in ms for v in m.committed_values()}
    done |= {v for m in killed for v in m.taken_values()}
    return set(values) <= done


# -- membership with each client ---------------------------------------------------------------

@pytest.mark.parametrize("client", CLIENTS)
def test_three_members_share_join_leave_and_die(fast_broker: Any, members: list[Member],
                                                client: str) -> None:
    """Two members share six partitions; a third joins (rebalance: two partitions each); one
    leaves and one dies, and their partitions move on. Every record is committed once."""
    bootstrap = fast_broker.bootstrap
    create_topic(bootstrap, "t", 6)
    everything = batch("a")
    produce(bootstrap, "t", everything)
    m1 = start(members, client, bootstrap, "t", "g")
    m2 = start(members, client, bootstrap, "t", "g")
    wait_until(lambda: covered(everything, m1, m2), 30, "the first batch")
    wait_until(lambda: m1.assignment | m2.assignment == set(range(6))
               and bool(m1.assignment) and bool(m2.assignment), 30, "a shared assignment")

    m3 = start(members, client, bootstrap, "t", "g")  # a member joins: rebalance
    wait_until(lambda: [len(m.assignment) for m in (m1, m2, m3)] == [2, 2, 2], 30,
               "three members with two partitions each")
    produce(bootstrap, "t", more := batch("b"))
    everything += more
    wait_until(lambda: covered(everything, m1, m2, m3), 30, "the second batch")

    m2.stop()  # leaves the group: its partitions move at once
    wait_until(lambda: m1.assignment | m3.assignment == set(range(6)), 30, "m2's partitions")
    produce(bootstrap, "t", more := batch("c"))
    everything += more
    wait_until(lambda: covered(everything, m1, m2, m3), 30, "the third batch")

    m3.kill()  # dies: its partitions move when its session times out
    wait_until(lambda: m1.assignment == set(range(6)), 30, "m3's partitions after its death")
    produce(bootstrap, "t", more := batch("d"))
    everything += more
    wait_until(lambda: covered(everything, m1, m2, m3, killed=(m3,)), 30, "the last batch")
    m1.stop()
    committed_exactly_once((m1, m2, m3), everything, killed=(m3,))


def test_two_groups_each_receive_every_record(fast_broker: Any, members: list[Member]) -> None:
    bootstrap = fast_broker.bootstrap
    create_topic(bootstrap, "t", 6)
    values = batch("x", 120)
    produce(bootstrap, "t", values)
    g1 = [start(members, "confluent", bootstrap, "t", "g1") for _ in range(2)]
    g2 = [start(members, "aiokafka", bootstrap, "t", "g2"),
          start(members, "kafka-python", bootstrap, "t", "g2")]
    wait_until(lambda: covered(values, *g1) and covered(values, *g2), 60, "both groups")
    for m in g1 + g2:
        m.stop()
    committed_exactly_once(g1, values)
    committed_exactly_once(g2, values)


def test_cooperative_sticky_rebalances_incrementally(fast_broker: Any,
                                                     members: list[Member]) -> None:
    """librdkafka's cooperative-sticky: a joining member takes partitions without the others
    giving up the rest, and nothing committed is lost or doubled."""
    bootstrap = fast_broker.bootstrap
    create_topic(bootstrap, "t", 6)
    everything = batch("a")
    produce(bootstrap, "t", everything)

    def coop() -> Member:
        return start(members, "confluent", bootstrap, "t", "g", strategy="cooperative-sticky")

    m1 = coop()
    wait_until(lambda: m1.assignment == set(range(6)) and covered(everything, m1), 30)
    m2 = coop()
    m3 = coop()
    wait_until(lambda: [len(m.assignment) for m in (m1, m2, m3)] == [2, 2, 2], 30,
               "an even cooperative assignment")
    revocations = [set(e["partitions"]) for e in m1.of("revoked")]
    assert revocations and all(len(r) < 6 for r in revocations), revocations
    produce(bootstrap, "t", more := batch("b"))
    everything += more
    wait_until(lambda: covered(everything, m1, m2, m3), 30, "the second batch")
    m2.stop()
    wait_until(lambda: m1.assignment | m3.assignment == set(range(6)), 30)
    produce(bootstrap, "t", more := batch("c"))
    everything += more
    wait_until(lambda: covered(everything, m1, m2, m3), 30, "the third batch")
    m1.stop()
    m3.stop()
    committed_exactly_once((m1, m2, m3), everything)


@pytest.mark.in_process("reads the group coordinator's state")
def test_static_member_restarts_without_rebalance(fast_broker: Any,
                                                  members: list[Member]) -> None:
    bootstrap = fast_broker.bootstrap
    groups = fast_broker.broker.groups.state.groups
    create_topic(bootstrap, "t", 6)
    s1 = start(members, "confluent", bootstrap, "t", "g", instance="one", session_ms=10_000)
    s2 = start(members, "confluent", bootstrap, "t", "g", instance="two", session_ms=10_000)
    wait_until(lambda: len(s1.assignment) == 3 and len(s2.assignment) == 3, 30)
    wait_until(lambda: groups["g"].state.value == "Stable", 10)
    generation = groups["g"].generation
    before = s2.assignment
    s1_events = len(s1.events)
    s2.stop()  # a static member does not leave the group on close
    s2b = start(members, "confluent", bootstrap, "t", "g", instance="two", session_ms=10_000)
    wait_until(lambda: s2b.assignment == before, 30, "the restarted member's partitions")
    time.sleep(1)
    assert groups["g"].generation == generation and groups["g"].state.value == "Stable"
    assert not [e for e in s1.events[s1_events:] if e["event"] in ("revoked", "assigned")]
    values = batch("a")
    produce(bootstrap, "t", values)
    wait_until(lambda: covered(values, s1, s2b), 30)


# -- durability --------------------------------------------------------------------------------

def _commit(bootstrap: str, group: str, offsets: dict[int, tuple[int, str]]) -> None:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    consumer.commit(offsets=[TopicPartition("t", p, o, metadata=m)
                             for p, (o, m) in offsets.items()], asynchronous=False)
    consumer.close()


def _committed(bootstrap: str, group: str) -> dict[int, tuple[int, str]]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    found = consumer.committed([TopicPartition("t", p) for p in range(3)], timeout=20)
    consumer.close()
    return {tp.partition: (tp.offset, tp.metadata) for tp in found if tp.offset >= 0}


def _first_consumed(bootstrap: str, group: str) -> dict[int, int]:
    """The first offset a new group member reads from each partition.

    Each poll waits as long as the test still does: kafka-python 3.0.12 loses a join round
    that completes after a poll gave up waiting for it, when the round was started by its
    metadata (the topic's partitions arriving after the member's first join, which then
    assigned nothing): need_rejoin is already False, so the assignment is never taken up and
    the heartbeat stays off; the member reads nothing until its session expires, then is
    silently out of the group. With 200 ms polls that happened under load (2 of 20 runs).
    A poll returns as soon as records arrive, so waiting longer costs nothing."""
    from kafka import KafkaConsumer

    consumer = KafkaConsumer("t", bootstrap_servers=bootstrap, group_id=group,
                             enable_auto_commit=False, auto_offset_reset="earliest",
                             session_timeout_ms=6000, heartbeat_interval_ms=500)
    first: dict[int, int] = {}
    deadline = time.monotonic() + 30
    while len(first) < 3 and (left := deadline - time.monotonic()) > 0:
        for tp, msgs in consumer.poll(timeout_ms=max(1, int(left * 1000))).items():
            first.setdefault(tp.partition, msgs[0].offset)
    consumer.close()
    return first


def _list_groups(bootstrap: str) -> dict[str, str]:
    """ListGroups to every broker Metadata names, merged, as Kafka's admin client lists
    groups: each broker lists those it coordinates (a node of several brokers has several)."""
    brokers = send_request(bootstrap, ApiKey.METADATA, 12, {
        "topics": [], "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False}).brokers
    found: dict[str, str] = {}
    for broker in brokers:
        resp = send_request(f"{broker.host}:{broker.port}", ApiKey.LIST_GROUPS, 4,
                            {"states_filter": []})
        found.update({g.group_id: g.group_state for g in resp.groups})
    return found


def test_commits_and_empty_groups_survive_restart_and_kill(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "logs").start()
    try:
        create_topic(broker.bootstrap, "t", 3)
        produce(broker.bootstrap, "t", batch("v", 30), partitions=3)
        _commit(broker.bootstrap, "g", {0: (4, "meta-0"), 1: (7, ""), 2: (9, "x" * 100)})
        # A group that had members and is now empty.
        assert _first_consumed(broker.bootstrap, "empty") == {0: 0, 1: 0, 2: 0}
        assert _list_groups(broker.bootstrap)["empty"] == "Empty"

        assert broker.stop() == 0
        broker.start()
        assert _committed(broker.bootstrap, "g") == \
            {0: (4, "meta-0"), 1: (7, ""), 2: (9, "x" * 100)}
        assert _list_groups(broker.bootstrap).get("empty") == "Empty"

        _commit(broker.bootstrap, "g", {0: (5, "after-restart"), 1: (8, "m")})
        broker.kill()  # acknowledged commits are in the log before the client hears of them
        broker.start()
        assert _committed(broker.bootstrap, "g") == \
            {0: (5, "after-restart"), 1: (8, "m"), 2: (9, "x" * 100)}
        assert _list_groups(broker.bootstrap).get("empty") == "Empty"
        # A consumer resumes exactly after its group's last commit.
        assert _first_consumed(broker.bootstrap, "g") == {0: 5, 1: 8, 2: 9}
    finally:
        if broker.proc and broker.proc.poll() is None:
            broker.kill()


def test_consumer_resumes_after_its_last_commit(fast_broker: Any) -> None:
    from confluent_kafka import Consumer, TopicPartition

    bootstrap = fast_broker.bootstrap
    create_topic(bootstrap, "t", 3)
    produce(bootstrap, "t", batch("v", 30), partitions=3)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "g",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.subscribe(["t"])
    seen = 0
    while seen < 12:
        msg = consumer.poll(1)
        if msg is not None and not msg.error():
            seen += 1
            consumer.commit(msg, asynchronous=False)
    positions = {tp.partition: tp.offset
                 for tp in consumer.committed([TopicPartition("t", p) for p in range(3)])}
    consumer.close()
    produce(bootstrap, "t", batch("w", 30), partitions=3)  # every partition has more now
    first = _first_consumed(bootstrap, "g")
    assert first == {p: o for p, o in positions.items() if o >= 0} | \
        {p: 0 for p, o in positions.items() if o < 0}


@pytest.mark.in_process("delays Metadata and SyncGroup answers (request hooks)")
def test_a_new_member_reads_although_kafka_python_loses_a_join_round(tmp_path: Path) -> None:
    """The round `_first_consumed` must survive, forced: the member's Metadata for the topic
    comes a second late, so its first join (as leader) assigns nothing and its metadata then
    starts a second round, whose SyncGroup is held past a 200 ms poll. kafka-python 3.0.12
    drops that round's result; with 200 ms polls the member read nothing in 30 s."""
    hooks = RequestHooks()
    force_a_lost_join_round(hooks.control, "t")
    with broker_in_thread(tmp_path / "logs", hooks=hooks) as info:
        create_topic(info.bootstrap, "t", 3)
        produce(info.bootstrap, "t", batch("v", 30), partitions=3)
        assert _first_consumed(info.bootstrap, "g") == {0: 0, 1: 0, 2: 0}


def test_offsets_of_a_deleted_topic_go_away(fast_broker: Any) -> None:
    bootstrap = fast_broker.bootstrap
    create_topic(bootstrap, "t", 3)
    _commit(bootstrap, "g", {0: (1, "")})
    assert _committed(bootstrap, "g") == {0: (1, "")}
    resp = send_request(bootstrap, ApiKey.DELETE_TOPICS, 4,
                        {"topic_names": ["t"], "timeout_ms": 5000})
    assert resp.responses[0].error_code == 0
    create_topic(bootstrap, "t", 3)
    assert _committed(bootstrap, "g") == {}


# -- bad input, with raw requests --------------------------------------------------------------

CONSUMER_META = b"\x00\x00\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff"


def _join(conn: RawConnection, member_id: str = "", group: str = "g", version: int = 5,
          session: int = 10_000, instance: str | None = None) -> Any:
    return conn.request(ApiKey.JOIN_GROUP, version, {
        "group_id": group, "session_timeout_ms": session, "rebalance_timeout_ms": 10_000,
        "member_id": member_id, "group_instance_id": instance, "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": CONSUMER_META}]})


def _join_member(bootstrap: str, group: str = "g") -> tuple[RawConnection, Any]:
    conn = RawConnection(coordinator_address(bootstrap, group), timeout=30)
    first = _join(conn, group=group)
    assert first.error_code == E.MEMBER_ID_REQUIRED
    return conn, _join(conn, first.member_id, group=group)


def _sync(conn: RawConnection, member_id: str, generation: int,
          assignments: dict[str, bytes] | None = None, group: str = "g") -> Any:
    return conn.request(ApiKey.SYNC_GROUP, 3, {
        "group_id": group, "generation_id": generation, "member_id": member_id,
        "assignments": [{"member_id": m, "assignment": a}
                        for m, a in (assignments or {}).items()]})


def _commit_raw(bootstrap: str, member_id: str, generation: int, group: str = "g") -> int:
    resp = send_request(coordinator_address(bootstrap, group), ApiKey.OFFSET_COMMIT, 8, {
        "group_id": group, "generation_id_or_member_epoch": generation,
        "member_id": member_id, "topics": [{"name": "t", "partitions": [
            {"partition_index": 0, "committed_offset": 3, "committed_metadata": "m"}]}]})
    return int(resp.topics[0].partitions[0].error_code)


def test_bad_group_input(fast_broker: Any) -> None:
    bootstrap = fast_broker.bootstrap
    create_topic(bootstrap, "t", 1)
    with RawConnection(coordinator_address(bootstrap, "g")) as conn:
        assert _join(conn, group="").error_code == E.INVALID_GROUP_ID
        assert _join(conn, session=10).error_code == E.INVALID_SESSION_TIMEOUT
        assert _join(conn, session=10**8).error_code == E.INVALID_SESSION_TIMEOUT
        hb = conn.request(ApiKey.HEARTBEAT, 3, {"group_id": "g", "generation_id": 1,
                                                 "member_id": "ghost"})
        assert hb.error_code == E.UNKNOWN_MEMBER_ID
        assert _join(conn, "ghost").error_code == E.UNKNOWN_MEMBER_ID
    conn, joined = _join_member(bootstrap)
    with conn:
        assert joined.error_code == 0 and joined.generation_id == 1
        assert _sync(conn, joined.member_id, 1, {joined.member_id: b"A"}).assignment == b"A"
        assert _commit_raw(bootstrap, joined.member_id, 1) == E.NONE
        assert _commit_raw(bootstrap, joined.member_id, 0) == E.ILLEGAL_GENERATION
        assert _commit_raw(bootstrap, "", -1) == E.UNKNOWN_MEMBER_ID  # group has members
        stale = conn.request(ApiKey.HEARTBEAT, 3, {"group_id": "g", "generation_id": 0,
                                                    "member_id": joined.member_id})
        assert stale.error_code == E.ILLEGAL_GENERATION


@pytest.mark.in_process("waits for the group's PreparingRebalance state in the coordinator")
def test_sync_from_non_leader_with_assignments(fast_broker: Any) -> None:
    bootstrap = fast_broker.bootstrap
    leader_conn, first = _join_member(bootstrap)
    leader = first.member_id
    _sync(leader_conn, leader, 1, {leader: b"solo"})
    results: dict[str, Any] = {}

    def join_follower() -> None:
        conn, joined = _join_member(bootstrap)
        results["follower"] = (conn, joined)

    thread = threading.Thread(target=join_follower)
    thread.start()
    wait_until(lambda: fast_broker.broker.groups.state.groups["g"].state.value
               == "PreparingRebalance", 10)
    rejoined = _join(leader_conn, leader)
    thread.join(10)
    conn, follower = results["follower"]
    assert rejoined.leader == leader and follower.leader == leader
    assert rejoined.generation_id == follower.generation_id == 2
    assert len(rejoined.members) == 2 and follower.members == []

    def follower_sync() -> None:
        results["sync"] = _sync(conn, follower.member_id, 2,
                                {follower.member_id: b"mine!", leader: b"nothing"})

    thread = threading.Thread(target=follower_sync)
    thread.start()
    time.sleep(0.3)
    assert "sync" not in results  # the follower waits for the leader
    mine = _sync(leader_conn, leader, 2, {leader: b"L", follower.member_id: b"F"})
    thread.join(10)
    assert mine.assignment == b"L" and results["sync"].assignment == b"F"
    conn.close()
    leader_conn.close()


@pytest.mark.parametrize("client", ["kafka-python", "confluent-kafka"])
def test_a_group_on_a_fresh_broker_reads_everything(tmp_path: Path, client: str) -> None:
    """The consumer's own FindCoordinator is the broker's first: it is answered
    COORDINATOR_NOT_AVAILABLE while __consumer_offsets is created (as by Kafka 4.1.1), and the
    stock client asks again and reads every record in its group."""
    from tests.integration.clients import ADAPTERS, Rec
    with serving_broker(tmp_path / "logs") as info:
        topic = "fresh-group"
        create_topic(info.bootstrap, topic, 2)
        sent = [Rec(f"k{i}".encode(), f"v{i}".encode()) for i in range(20)]
        adapter = ADAPTERS[client]
        adapter.produce(info.bootstrap, topic, sent)
        assert "__consumer_offsets" not in known_topics(info.bootstrap)
        got = adapter.consume_group(info.bootstrap, topic, "fresh", len(sent))
        assert sorted(g.value for g in got) == sorted(r.value for r in sent)


# -- the group APIs' layouts -------------------------------------------------------------------

@pytest.mark.in_process("reads the internal topics' image and config objects")
def test_find_coordinator_versions(fast_broker: Any) -> None:
    """The first ask of each key type answers COORDINATOR_NOT_AVAILABLE at once and has the
    internal topic created in the background, and a later ask names the broker, as Apache
    Kafka 4.1.1 answers (v3 and v4 on a fresh node: 15 within about 0.03 s, the group's
    coordinator named about 0.08 s later, the transactional id's 0.8 to 1.1 s later)."""
    bootstrap, port = fast_broker.bootstrap, fast_broker.port
    topics = fast_broker.broker.metadata.image.topics
    assert "__consumer_offsets" not in topics and "__transaction_state" not in topics

    def until_named(ask: Callable[[], Any]) -> Any:
        deadline = time.monotonic() + 30
        while (answer := ask()).error_code == E.COORDINATOR_NOT_AVAILABLE:
            assert time.monotonic() < deadline, "no coordinator named"
            time.sleep(0.02)
        return answer
    v1 = send_request(bootstrap, ApiKey.FIND_COORDINATOR, 1, {"key": "g", "key_type": 0})
    assert (v1.error_code, v1.error_message, v1.node_id, v1.port) == (
        E.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available.", -1, -1)
    v1 = until_named(lambda: send_request(bootstrap, ApiKey.FIND_COORDINATOR, 1,
                                          {"key": "g", "key_type": 0}))
    assert (v1.error_code, v1.port) == (0, port)
    v0 = send_request(bootstrap, ApiKey.FIND_COORDINATOR, 0, {"key": "g"})
    assert (v0.error_code, v0.node_id, v0.port) == (0, fast_broker.broker.node_id, port)
    first = send_request(bootstrap, ApiKey.FIND_COORDINATOR, 4,
                         {"key_type": 1, "coordinator_keys": ["tx"]}).coordinators
    assert [(c.key, c.error_code, c.node_id, c.port) for c in first] == [
        ("tx", E.COORDINATOR_NOT_AVAILABLE, -1, -1)]
    txn = until_named(lambda: send_request(bootstrap, ApiKey.FIND_COORDINATOR, 3,
                                           {"key": "tx", "key_type": 1}))
    assert (txn.error_code, txn.port) == (0, port)
    assert "__transaction_state" in fast_broker.broker.metadata.image.topics
    v4 = send_request(bootstrap, ApiKey.FIND_COORDINATOR, 6,
                      {"key_type": 0, "coordinator_keys": ["a", "b"]})
    assert [(c.key, c.error_code, c.port) for c in v4.coordinators] == \
        [("a", 0, port), ("b", 0, port)]
    info = fast_broker.broker.metadata.image.topics["__consumer_offsets"]
    assert info.internal and len(info.partitions) == 5  # the test broker's setting
    assert fast_broker.broker.topic_configs.topic_config("__consumer_offsets").compact


def test_offset_fetch_layouts(fast_broker: Any) -> None:
    create_topic(fast_broker.bootstrap, "t", 2)
    other = group_beside(fast_broker.bootstrap, "g", "other")
    bootstrap = coordinator_address(fast_broker.bootstrap, "g")  # it coordinates both
    committed = send_request(bootstrap, ApiKey.OFFSET_COMMIT, 2, {
        "group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "",
        "retention_time_ms": -1, "topics": [{"name": "t", "partitions": [
            {"partition_index": 0, "committed_offset": 5, "committed_metadata": "five"},
            {"partition_index": 1, "committed_offset": 6, "committed_metadata": None}]}]})
    assert [p.error_code for p in committed.topics[0].partitions] == [0, 0]
    v1 = send_request(bootstrap, ApiKey.OFFSET_FETCH, 1, {
        "group_id": "g", "topics": [{"name": "t", "partition_indexes": [0, 1]}]})
    assert [(p.committed_offset, p.metadata) for p in v1.topics[0].partitions] == \
        [(5, "five"), (6, "")]
    v7 = send_request(bootstrap, ApiKey.OFFSET_FETCH, 7,
                      {"group_id": "g", "topics": None, "require_stable": True})
    assert v7.error_code == 0
    assert sorted((p.partition_index, p.committed_offset) for p in v7.topics[0].partitions) \
        == [(0, 5), (1, 6)]
    v8 = send_request(bootstrap, ApiKey.OFFSET_FETCH, 8, {"groups": [
        {"group_id": "g", "topics": [{"name": "t", "partition_indexes": [1, 9]}]},
        {"group_id": other, "topics": None}], "require_stable": False})
    assert [(g.group_id, g.error_code) for g in v8.groups] == [("g", 0), (other, 0)]
    assert [(p.partition_index, p.committed_offset) for p in v8.groups[0].topics[0].partitions] \
        == [(1, 6), (9, -1)]
    assert v8.groups[1].topics == []


def test_admin_apis(fast_broker: Any) -> None:
    bootstrap = fast_broker.bootstrap
    create_topic(bootstrap, "t", 1)
    # One request names several groups: each is answered by the broker it goes to, which must
    # coordinate them all (on a node of several brokers, one of them).
    idle, nope = group_beside(bootstrap, "busy", "idle"), group_beside(bootstrap, "busy", "nope")
    home = coordinator_address(bootstrap, "busy")
    _commit(bootstrap, idle, {0: (1, "")})
    conn, joined = _join_member(bootstrap, "busy")
    with conn:
        _sync(conn, joined.member_id, 1, {joined.member_id: b"A"}, group="busy")
        described = send_request(home, ApiKey.DESCRIBE_GROUPS, 5, {
            "groups": ["busy", nope], "include_authorized_operations": True})
        busy, dead = described.groups
        assert (busy.group_state, busy.protocol_type, busy.protocol_data) == \
            ("Stable", "consumer", "range")
        assert [(m.member_id, m.member_assignment, m.client_id) for m in busy.members] == \
            [(joined.member_id, b"A", "raw-test")]
        assert busy.authorized_operations == (1 << 3) | (1 << 6) | (1 << 8)
        assert (dead.error_code, dead.group_state) == (0, "Dead")
        assert _list_groups(bootstrap) == {idle: "Empty", "busy": "Stable"}
        stable = send_request(home, ApiKey.LIST_GROUPS, 5,
                              {"states_filter": ["Stable"], "types_filter": ["classic"]})
        assert [(g.group_id, g.group_type) for g in stable.groups] == [("busy", "classic")]
        deleted = send_request(home, ApiKey.DELETE_GROUPS, 2,
                               {"groups_names": ["busy", idle, nope]})
        assert [(r.group_id, r.error_code) for r in deleted.results] == \
            [("busy", E.NON_EMPTY_GROUP), (idle, 0), (nope, E.GROUP_ID_NOT_FOUND)]
        _commit_raw(bootstrap, joined.member_id, 1, group="busy")
        od = send_request(home, ApiKey.OFFSET_DELETE, 0, {"group_id": "busy", "topics": [
            {"name": "t", "partitions": [{"partition_index": 0}]},
            {"name": "zz", "partitions": [{"partition_index": 0}]}]})
        assert od.error_code == 0
        assert [p.error_code for t in od.topics for p in t.partitions] == \
            [E.GROUP_SUBSCRIBED_TO_TOPIC, E.UNKNOWN_TOPIC_OR_PARTITION]
        left = conn.request(ApiKey.LEAVE_GROUP, 5, {"group_id": "busy", "members": [
            {"member_id": joined.member_id}, {"member_id": "ghost"}]})
        assert [m.error_code for m in left.members] == [0, E.UNKNOWN_MEMBER_ID]
        assert _list_groups(bootstrap) == {"busy": "Empty"}
        gone = send_request(home, ApiKey.OFFSET_DELETE, 0, {"group_id": "busy", "topics": [
            {"name": "t", "partitions": [{"partition_index": 0}]}]})
        assert [p.error_code for t in gone.topics for p in t.partitions] == [0]
        assert _list_groups(bootstrap) == {}


def test_an_empty_group_id_is_invalid_on_every_broker_of_a_cluster() -> None:
    """Kafka checks a group id before whether the broker coordinates it: JoinGroup, SyncGroup,
    Heartbeat and LeaveGroup for "" answer INVALID_GROUP_ID on every broker, where the brokers
    that do not coordinate "" answered NOT_COORDINATOR (the integration tier at
    PYBROKER_NUM_CORES=2 found it: a node's two brokers, one coordinating "")."""
    from pybroker.testing import Cluster

    with Cluster(2) as cluster:
        for address in cluster.bootstrap.split(","):
            with RawConnection(address) as conn:
                assert _join(conn, group="").error_code == E.INVALID_GROUP_ID, address
                assert _sync(conn, "m", 1, group="").error_code == E.INVALID_GROUP_ID, address
                beat = conn.request(ApiKey.HEARTBEAT, 3, {"group_id": "", "generation_id": 1,
                                                          "member_id": "m"})
                assert beat.error_code == E.INVALID_GROUP_ID, address
                left = conn.request(ApiKey.LEAVE_GROUP, 5, {"group_id": "", "members": [
                    {"member_id": "m", "group_instance_id": None, "reason": None}]})
                assert left.error_code == E.INVALID_GROUP_ID, address
