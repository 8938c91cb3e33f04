"""Online migration between classic and consumer groups (`group.consumer.migration.policy`)
with stock clients: kafka-python members (the classic protocol) and confluent-kafka members
with `group.protocol=consumer` (KIP-848) in one group, replaced one by one each way.

Every member commits what it read after each poll, so a record is read again only when its
partition moved before the commit (at-least-once); none may be lost."""
from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable

import pytest

from compat.clients.kafka_python import await_first_assignment
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.client.consumer_protocol import encode_subscription
from tests.helpers import BrokerProcess, serving_broker
from tests.integration.group_requests import (
    _consumer_join, _consumer_leave, _group_type, _raw_classic_member,
)
from tests.integration.group_topics import PARTITIONS, _produce
from tests.integration.raw import (
    RawConnection, coordinator_address, create_topic, group_beside, send_request,
)


# How long a step may take, and a kafka-python member its first assignment.
JOIN_TIMEOUT = 90
# Group errors librdkafka reports to the application and recovers from by joining again.
REJOIN_ERRORS = frozenset({ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION,
                           ErrorCode.UNKNOWN_MEMBER_ID})


class Member:
    """One consumer of either protocol, polled by a thread of its own, as an application
    polls it.

    kafka-python 3.0.12 throws away a JoinGroup/SyncGroup round that completes while no
    `poll` awaits it (its next poll finds the task done and joins again), so members polled
    in turn by one thread would rebalance for ever; each member therefore polls without a
    pause.

    A round its own metadata started is not joined again but lost: kafka-python joins before
    its topic's metadata is in, so a leader that joined first assigns nothing, and the
    metadata then starts a second round, which is dropped when it completes after the poll
    waiting for it gave up (`need_rejoin()` is already False). The member then stays
    unassigned with its heartbeat off until the coordinator expires it, and the test goes on
    with one classic member fewer. So a kafka-python member first awaits its join whole
    (`await_first_assignment`); then it polls 100 ms at a time, as the later rounds here are
    the coordinator's, which it joins again, or the server's assignment in a consumer group,
    where it is not the leader."""

    def __init__(self, bootstrap: str, group: str, topic: str, kind: str,
                 seen: list[bytes]) -> None:
        self.kind = kind
        if kind == "classic":
            from kafka import KafkaConsumer
            self.client: Any = KafkaConsumer(
                topic, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                auto_offset_reset="earliest", session_timeout_ms=10000,
                heartbeat_interval_ms=500, max_poll_interval_ms=30000)
        else:  # "consumer", or "cooperative": librdkafka's classic protocol, incremental
            from confluent_kafka import Consumer
            protocol = {"group.protocol": "consumer"} if kind == "consumer" else {
                "group.protocol": "classic",
                "partition.assignment.strategy": "cooperative-sticky"}
            self.client = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                    "auto.offset.reset": "earliest",
                                    "enable.auto.commit": False, **protocol})
            self.client.subscribe([topic])
        self._stop = threading.Event()
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(seen,), daemon=True)
        self._thread.start()

    def _run(self, seen: list[bytes]) -> None:
        try:
            if self.kind == "classic":
                await_first_assignment(self.client, time.monotonic() + JOIN_TIMEOUT,
                                       self._stop.is_set)
            while not self._stop.is_set():
                self._poll(seen)
        except BaseException as failure:  # reported to the test's thread by check()
            self._failure = failure

    def _poll(self, seen: list[bytes]) -> None:
        if self.kind == "classic":
            batch = self.client.poll(timeout_ms=100)
            values = [m.value for msgs in batch.values() for m in msgs]
            if values:
                try:
                    self.client.commit()
                except Exception:  # a rebalance took the partitions: read again elsewhere
                    pass
        else:
            msgs = self.client.consume(100, 0.1)
            # librdkafka hands the application a failed JoinGroup as an event, and retries
            # it: a JoinGroup waiting when the group converts is answered
            # REBALANCE_IN_PROGRESS, as Kafka answers it. Only a fatal error fails the test.
            for m in msgs:
                error = m.error()
                assert error is None or (not error.fatal() and error.code() in REJOIN_ERRORS), \
                    error
            values = [m.value() for m in msgs if m.error() is None]
            if values:
                try:
                    self.client.commit(asynchronous=False)
                except Exception:  # the same, on the consumer protocol's side
                    pass
        seen.extend(values)

    def check(self) -> None:
        if self._failure is not None:
            raise self._failure

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        assert not self._thread.is_alive(), "a member's poll did not return"
        self.client.close()
        self.check()


def _pump(members: list[Member], done: Callable[[], bool], timeout: float = JOIN_TIMEOUT,
          what: Callable[[], str] = lambda: "") -> None:
    deadline = time.monotonic() + timeout
    while not done():
        for member in members:
            member.check()
        assert time.monotonic() < deadline, f"timed out: {what()}"
        time.sleep(0.05)  # the members poll on their own threads; this only re-checks


def _step(bootstrap: str, topic: str, members: list[Member], seen: list[bytes],
          sent: set[bytes], tag: str, group: str, kind: str) -> None:
    """Produce a batch and read on until every record sent so far was read, the group being
    of `kind`."""
    sent |= _produce(bootstrap, topic, 60, tag)
    _pump(members, lambda: sent <= set(seen) and _group_type(bootstrap, group) == kind,
          what=lambda: f"at {tag}: {len(sent - set(seen))} records unread, the group "
                       f"{_group_type(bootstrap, group)}, not {kind}")


def _check(sent: set[bytes], seen: list[bytes]) -> None:
    assert set(seen) == sent  # nothing lost, nothing invented
    # at-least-once: a record is read again only when its partition moved before the commit
    repeated = len(seen) - len(set(seen))
    assert repeated <= len(sent) // 2, f"{repeated} of {len(sent)} read twice or more"


@pytest.mark.parametrize("classic", ["classic", "cooperative"])
def test_a_rolling_upgrade_and_back(tmp_path: Path, classic: str) -> None:
    """Classic members (kafka-python's eager protocol, or librdkafka's cooperative-sticky
    one, which sends the partitions it owns) replaced one by one by consumer-protocol
    members, then the other way."""
    with serving_broker(tmp_path / "logs") as info:
        bootstrap, topic, group = info.bootstrap, f"mig-{uuid.uuid4().hex[:6]}", "rolling"
        create_topic(bootstrap, topic, PARTITIONS)
        seen: list[bytes] = []
        sent: set[bytes] = set()
        members = [Member(bootstrap, group, topic, classic, seen) for _ in range(2)]

        def step(tag: str, kind: str) -> None:
            _step(bootstrap, topic, members, seen, sent, tag, group, kind)

        try:
            step("classic", "classic")
            # upgrade: consumer-protocol members replace the classic ones one by one
            for i in range(2):
                members.append(Member(bootstrap, group, topic, "consumer", seen))
                step(f"up-join-{i}", "consumer")
                members.pop(0).close()
                step(f"up-left-{i}", "consumer")
            described = send_request(coordinator_address(bootstrap, group),
                                     ApiKey.CONSUMER_GROUP_DESCRIBE, 1, {
                "group_ids": [group], "include_authorized_operations": False}).groups[0]
            assert [m.member_type for m in described.members] == [1, 1]
            # and back: classic members replace them; the last one leaving makes it classic
            for i in range(2):
                members.append(Member(bootstrap, group, topic, classic, seen))
                step(f"down-join-{i}", "consumer")
                members.pop(0).close()
                step(f"down-left-{i}", "classic" if i == 1 else "consumer")
            _check(sent, seen)
        finally:
            for member in members:
                member.close()


@pytest.mark.parametrize("policy,upgrades,downgrades", [
    ("bidirectional", True, True), ("upgrade", True, False), ("downgrade", False, True),
    ("disabled", False, False)])
def test_each_policy_converts_what_it_allows(tmp_path: Path, policy: str, upgrades: bool,
                                             downgrades: bool) -> None:
    with serving_broker(tmp_path / "logs", **{
            "group.consumer.migration.policy": policy.upper()}) as info:
        topic = "p"
        create_topic(info.bootstrap, topic, 2)
        # One connection, to the coordinator of both groups (on a node, any of its brokers).
        down = group_beside(info.bootstrap, "up", "down")
        coordinator = coordinator_address(info.bootstrap, "up")
        with RawConnection(coordinator) as conn:
            _raw_classic_member(conn, "up", topic)
            joined = _consumer_join(conn, "up", topic, str(uuid.uuid4()))
            assert joined.error_code == (ErrorCode.NONE if upgrades
                                         else ErrorCode.GROUP_ID_NOT_FOUND)
            assert _group_type(coordinator, "up") == ("consumer" if upgrades else "classic")

            # a consumer group with a classic member (taken in under every policy), whose
            # last consumer-protocol member then leaves
            member = str(uuid.uuid4())
            epoch = _consumer_join(conn, down, topic, member).member_epoch
            request = {"group_id": down, "session_timeout_ms": 30000,
                       "rebalance_timeout_ms": 30000, "member_id": "",
                       "group_instance_id": None, "protocol_type": "consumer",
                       "protocols": [{"name": "range",
                                      "metadata": encode_subscription([topic])}],
                       "reason": None}
            first = conn.request(ApiKey.JOIN_GROUP, 9, request)
            assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
            joined_classic = conn.request(ApiKey.JOIN_GROUP, 9,
                                          {**request, "member_id": first.member_id})
            assert joined_classic.error_code == ErrorCode.NONE
            assert joined_classic.leader == ""  # the server assigns
            assert _consumer_leave(conn, down, member, epoch) == ErrorCode.NONE
            assert _group_type(coordinator, down) == \
                ("classic" if downgrades else "consumer")
            heartbeat = conn.request(ApiKey.HEARTBEAT, 4, {
                "group_id": down, "generation_id": joined_classic.generation_id,
                "member_id": first.member_id, "group_instance_id": None}).error_code
            # downgraded: the classic group rebalances; else the consumer group moved on too
            assert heartbeat in (ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION)


def test_a_restart_resumes_a_converted_group(tmp_path: Path) -> None:
    """The conversions' records: after a restart an upgraded group is a consumer group with
    its classic member at its epoch and the offsets committed before the upgrade; after the
    downgrade and another restart, a classic group with that member and those offsets."""
    broker = BrokerProcess(tmp_path / "logs").start()
    try:
        topic = "r"
        create_topic(broker.bootstrap, topic, 2)
        # The group's coordinator (on a node of several brokers, maybe not `bootstrap`).
        coord = coordinator_address(broker.bootstrap, "g")
        with RawConnection(coord) as conn:
            member_id, generation = _raw_classic_member(conn, "g", topic)
            committed = conn.request(ApiKey.OFFSET_COMMIT, 8, {
                "group_id": "g", "generation_id_or_member_epoch": generation,
                "member_id": member_id, "group_instance_id": None, "topics": [{
                    "name": topic, "partitions": [{
                        "partition_index": 0, "committed_offset": 7,
                        "committed_leader_epoch": -1, "committed_metadata": ""}]}]})
            assert committed.topics[0].partitions[0].error_code == ErrorCode.NONE
            assert _consumer_join(conn, "g", topic, str(uuid.uuid4())).error_code == 0
        before = send_request(coord, ApiKey.CONSUMER_GROUP_DESCRIBE, 1, {
            "group_ids": ["g"], "include_authorized_operations": False}).groups[0]
        broker.kill()
        broker = BrokerProcess(tmp_path / "logs", port=broker.port).start()
        coord = coordinator_address(broker.bootstrap, "g")
        after = send_request(coord, ApiKey.CONSUMER_GROUP_DESCRIBE, 1, {
            "group_ids": ["g"], "include_authorized_operations": False}).groups[0]
        assert after.error_code == ErrorCode.NONE
        assert sorted((m.member_id, m.member_epoch, m.member_type) for m in after.members) == \
            sorted((m.member_id, m.member_epoch, m.member_type) for m in before.members)
        assert {m.member_type for m in after.members} == {0, 1}
        assert _group_type(coord, "g") == "consumer"
        fetched = send_request(coord, ApiKey.OFFSET_FETCH, 8, {
            "groups": [{"group_id": "g", "topics": [{"name": topic,
                                                     "partition_indexes": [0]}]}],
            "require_stable": False}).groups[0]
        assert fetched.topics[0].partitions[0].committed_offset == 7
        with RawConnection(coord) as conn:
            heartbeat = conn.request(ApiKey.HEARTBEAT, 4, {
                "group_id": "g", "generation_id": generation, "member_id": member_id,
                "group_instance_id": None}).error_code
            assert heartbeat == ErrorCode.REBALANCE_IN_PROGRESS  # it is still a member
            # the consumer member leaves: the group turns classic, and stays so at a restart
            consumer = next(m for m in after.members if m.member_type == 1)
            assert _consumer_leave(conn, "g", consumer.member_id,
                                   consumer.member_epoch) == ErrorCode.NONE
        assert _group_type(coord, "g") == "classic"
        broker.kill()
        broker = BrokerProcess(tmp_path / "logs", port=broker.port).start()
        coord = coordinator_address(broker.bootstrap, "g")
        assert _group_type(coord, "g") == "classic"
        described = send_request(coord, ApiKey.DESCRIBE_GROUPS, 5, {
            "groups": ["g"], "include_authorized_operations": False}).groups[0]
        assert [m.member_id for m in described.members] == [member_id]
        fetched = send_request(coord, ApiKey.OFFSET_FETCH, 8, {
            "groups": [{"group_id": "g", "topics": [{"name": topic,
                                                     "partition_indexes": [0]}]}],
            "require_stable": False}).groups[0]
        assert fetched.topics[0].partitions[0].committed_offset == 7
    finally:
        broker.kill()
