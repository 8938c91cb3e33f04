"""KIP-848 consumer groups with a stock client: confluent-kafka (librdkafka) with
`group.protocol=consumer`, against real brokers (in process, or a subprocess to restart).

librdkafka pins ConsumerGroupHeartbeat v1 and needs OffsetCommit/OffsetFetch v9; it
reconciles as the broker tells it (revoking before it is assigned more)."""
from __future__ import annotations

import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any, Callable

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from tests.helpers import BrokerProcess, serving_broker
from tests.integration.group_topics import PARTITIONS, _produce
from tests.integration.raw import coordinator_address, create_topic, send_request


def _consumer(bootstrap: str, group: str, **extra: Any):  # type: ignore[no-untyped-def]
    from confluent_kafka import Consumer
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                     "group.protocol": "consumer", "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, **extra})


def _poll_until(consumers: list, done: Callable[[], bool], timeout: float = 60,
                seen: dict[int, list] | None = None) -> None:
    """Poll every consumer in turn until `done()`; each message goes to `seen[i]`."""
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "timed out"
        for i, consumer in enumerate(consumers):
            msg = consumer.poll(0.1)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            if seen is not None:
                seen.setdefault(i, []).append((msg.partition(), msg.value()))


def _describe(bootstrap: str, group: str):  # type: ignore[no-untyped-def]
    """ConsumerGroupDescribe to the group's coordinator (on a node of several brokers, or a
    cluster, maybe not `bootstrap`)."""
    resp = send_request(coordinator_address(bootstrap, group), ApiKey.CONSUMER_GROUP_DESCRIBE, 0,
                        {"group_ids": [group], "include_authorized_operations": False})
    return resp.groups[0]


def _partitions(consumer) -> set[int]:  # type: ignore[no-untyped-def]
    return {tp.partition for tp in consumer.assignment()}


def test_one_consumer_joins_reads_and_commits(tmp_path: Path) -> None:
    with serving_broker(tmp_path / "logs") as info:
        topic = f"kip848-{uuid.uuid4().hex[:6]}"
        create_topic(info.bootstrap, topic, PARTITIONS)
        sent = _produce(info.bootstrap, topic, 60, "a")
        consumer = _consumer(info.bootstrap, "one")
        consumer.subscribe([topic])
        seen: dict[int, list] = {}
        _poll_until([consumer], lambda: len(seen.get(0, [])) >= 60, seen=seen)
        assert {v for _, v in seen[0]} == sent
        assert _partitions(consumer) == set(range(PARTITIONS))
        consumer.commit(asynchronous=False)
        described = _describe(info.bootstrap, "one")
        assert (described.error_code, described.group_state) == (0, "Stable")
        assert [m.member_epoch for m in described.members] == [described.assignment_epoch]
        consumer.close()
        # a second consumer of the group resumes after the commit: nothing old is read again
        later = _produce(info.bootstrap, topic, 12, "b")
        again = _consumer(info.bootstrap, "one")
        again.subscribe([topic])
        seen = {}
        _poll_until([again], lambda: len(seen.get(0, [])) >= 12, seen=seen)
        time.sleep(1)
        assert again.poll(0.5) is None
        assert {v for _, v in seen[0]} == later
        coordinator = coordinator_address(info.bootstrap, "one")  # on a node, any broker
        listed = send_request(coordinator, ApiKey.LIST_GROUPS, 5,
                              {"states_filter": [], "types_filter": ["consumer"]}).groups
        assert [(g.group_id, g.group_type, g.protocol_type, g.group_state) for g in listed] \
            == [("one", "consumer", "consumer", "Stable")]
        # DescribeGroups up to v5 sees no classic group there: Dead, as Kafka answers
        classic = send_request(coordinator, ApiKey.DESCRIBE_GROUPS, 5,
                               {"groups": ["one"], "include_authorized_operations": False})
        assert (classic.groups[0].error_code, classic.groups[0].group_state) == (0, "Dead")
        delete = {"groups_names": ["one"]}
        busy = send_request(coordinator, ApiKey.DELETE_GROUPS, 2, delete)
        assert busy.results[0].error_code == ErrorCode.NON_EMPTY_GROUP
        again.close()
        deleted = send_request(coordinator, ApiKey.DELETE_GROUPS, 2, delete)
        assert deleted.results[0].error_code == ErrorCode.NONE
        assert _describe(info.bootstrap, "one").error_code == ErrorCode.GROUP_ID_NOT_FOUND
        assert send_request(coordinator, ApiKey.LIST_GROUPS, 5,
                            {"states_filter": [], "types_filter": []}).groups == []


def test_one_then_three_consumers_share_six_partitions(tmp_path: Path) -> None:
    with serving_broker(tmp_path / "logs") as info:
        topic = f"kip848-{uuid.uuid4().hex[:6]}"
        create_topic(info.bootstrap, topic, PARTITIONS)
        consumers = [_consumer(info.bootstrap, "three")]
        consumers[0].subscribe([topic])
        _poll_until(consumers, lambda: _partitions(consumers[0]) == set(range(PARTITIONS)))
        for _ in range(2):
            consumers.append(_consumer(info.bootstrap, "three"))
            consumers[-1].subscribe([topic])

        def settled() -> bool:
            owned = [_partitions(c) for c in consumers]
            return sorted(len(o) for o in owned) == [2, 2, 2] and \
                set().union(*owned) == set(range(PARTITIONS))

        _poll_until(consumers, settled)
        assert _describe(info.bootstrap, "three").group_state == "Stable"
        sent = _produce(info.bootstrap, topic, 120, "c")
        seen: dict[int, list] = {}
        _poll_until(consumers, lambda: sum(len(v) for v in seen.values()) >= 120, seen=seen)
        values = [v for got in seen.values() for _, v in got]
        assert len(values) == len(set(values)) and set(values) == sent  # none read twice
        for i, got in seen.items():
            assert {p for p, _ in got} <= _partitions(consumers[i])
        for consumer in consumers:
            consumer.close()


_MEMBER = textwrap.dedent("""
    import sys
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                  "group.protocol": "consumer", "auto.offset.reset": "earliest"})
    c.subscribe([sys.argv[3]])
    reported = None
    while True:
        c.poll(0.1)
        owned = sorted(tp.partition for tp in c.assignment())
        if owned != reported:
            print(",".join(map(str, owned)), flush=True)
            reported = owned
""")


def test_killed_members_partitions_move_after_the_session_timeout(tmp_path: Path) -> None:
    with serving_broker(tmp_path / "logs",
                          group_consumer_session_timeout_ms="3000",
                          group_consumer_min_session_timeout_ms="1000",
                          group_consumer_heartbeat_interval_ms="500",
                          group_consumer_min_heartbeat_interval_ms="100") as info:
        topic = f"kip848-{uuid.uuid4().hex[:6]}"
        create_topic(info.bootstrap, topic, PARTITIONS)
        child = subprocess.Popen([sys.executable, "-c", _MEMBER, info.bootstrap, "kill", topic],
                                 stdout=subprocess.PIPE, text=True)
        try:
            assert child.stdout is not None
            deadline = time.monotonic() + 30
            while child.stdout.readline().strip() != "0,1,2,3,4,5":
                assert time.monotonic() < deadline
            survivor = _consumer(info.bootstrap, "kill")
            survivor.subscribe([topic])
            _poll_until([survivor], lambda: len(_partitions(survivor)) == 3)
            child.kill()
            child.wait()
            killed_at = time.monotonic()
            _poll_until([survivor], lambda: _partitions(survivor) == set(range(PARTITIONS)))
            took = time.monotonic() - killed_at
            assert took >= 2.5, f"moved after {took:.1f}s, before the session timeout"
            assert len(_describe(info.bootstrap, "kill").members) == 1
            survivor.close()
        finally:
            child.kill()
            child.wait()


def test_a_broker_restart_resumes_the_group(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "logs").start()
    try:
        topic = f"kip848-{uuid.uuid4().hex[:6]}"
        create_topic(broker.bootstrap, topic, PARTITIONS)
        consumers = [_consumer(broker.bootstrap, "restart") for _ in range(2)]
        for consumer in consumers:
            consumer.subscribe([topic])
        _poll_until(consumers, lambda: sorted(len(_partitions(c)) for c in consumers) == [3, 3])
        _poll_until(consumers, lambda: _describe(broker.bootstrap, "restart").group_state
                    == "Stable")
        before = _describe(broker.bootstrap, "restart")
        epochs = {m.member_id: m.member_epoch for m in before.members}
        broker.kill()
        broker = BrokerProcess(tmp_path / "logs", port=broker.port).start()
        after = _describe(broker.bootstrap, "restart")
        assert {m.member_id: m.member_epoch for m in after.members} == epochs
        assert (after.group_epoch, after.assignment_epoch) == \
            (before.group_epoch, before.assignment_epoch)
        # the members carry on at their epochs: none rejoins, and new records are read
        sent = _produce(broker.bootstrap, topic, 30, "r")
        seen: dict[int, list] = {}
        _poll_until(consumers, lambda: sum(len(v) for v in seen.values()) >= 30, seen=seen)
        assert {v for got in seen.values() for _, v in got} == sent
        final = _describe(broker.bootstrap, "restart")
        assert {m.member_id: m.member_epoch for m in final.members} == epochs
        for consumer in consumers:
            consumer.close()
    finally:
        broker.kill()


def test_a_regex_subscription_picks_up_a_new_topic(tmp_path: Path) -> None:
    with serving_broker(tmp_path / "logs", group_consumer_heartbeat_interval_ms="500",
                          group_consumer_min_heartbeat_interval_ms="100") as info:
        b = info.bootstrap
        create_topic(b, "rx-1", 2)
        create_topic(b, "not-rx-1", 1)
        consumer = _consumer(b, "regex")
        consumer.subscribe(["^rx-.*"])  # librdkafka sends it as SubscribedTopicRegex

        def owned() -> set[tuple[str, int]]:
            return {(tp.topic, tp.partition) for tp in consumer.assignment()}

        _poll_until([consumer], lambda: owned() == {("rx-1", 0), ("rx-1", 1)})
        create_topic(b, "rx-2", 1)
        _poll_until([consumer], lambda: owned() == {("rx-1", 0), ("rx-1", 1), ("rx-2", 0)})
        # librdkafka joins its regexes as (a)|(b)
        assert _describe(b, "regex").members[0].subscribed_topic_regex == "(^rx-.*)"
        consumer.close()


def test_a_static_member_restarts_without_a_rebalance(tmp_path: Path) -> None:
    with serving_broker(tmp_path / "logs") as info:
        b = info.bootstrap
        topic = f"kip848-{uuid.uuid4().hex[:6]}"
        create_topic(b, topic, PARTITIONS)
        consumers = [_consumer(b, "static", **{"group.instance.id": f"i{n}"}) for n in range(2)]
        for consumer in consumers:
            consumer.subscribe([topic])
        _poll_until(consumers, lambda: sorted(len(_partitions(c)) for c in consumers) == [3, 3])
        _poll_until(consumers, lambda: _describe(b, "static").group_state == "Stable")
        before = _describe(b, "static")
        held = _partitions(consumers[1])
        consumers[1].close()  # a static member leaves with epoch -2: its partitions wait
        gone = _describe(b, "static")
        assert [m.member_epoch for m in gone.members if m.instance_id == "i1"] == [-2]
        assert _partitions(consumers[0]) == set(range(PARTITIONS)) - held
        again = _consumer(b, "static", **{"group.instance.id": "i1"})
        again.subscribe([topic])
        _poll_until([consumers[0], again], lambda: _partitions(again) == held)
        after = _describe(b, "static")
        assert after.group_epoch == before.group_epoch  # no rebalance
        duplicate = _consumer(b, "static", **{"group.instance.id": "i1"})
        duplicate.subscribe([topic])
        deadline = time.monotonic() + 10
        error = None
        while error is None and time.monotonic() < deadline:
            msg = duplicate.poll(0.2)
            if msg is not None and msg.error():
                error = msg.error()
        assert error is not None and "instance" in error.str().lower(), error
        for consumer in (consumers[0], again):
            consumer.close()
