"""The share offsets admin APIs and DeleteGroups on a cluster answer for the whole group
(issue #34): the group's coordinator reads, starts afresh and deletes the state of a
share-partition that two other brokers serve, one leading the data partition and the other
coordinating its state in `__share_group_state`, as Kafka's group coordinator does through
the share coordinator APIs (ReadShareGroupStateSummary, InitializeShareGroupState,
DeleteShareGroupState). A new consumer of the group then reads from the offset the alter set:
the data partition's leader drops its own view of the share-partition when a new share
session finds the state changed at its coordinator, and after the group is deleted a new
consumer of it starts afresh rather than from the leader's view of the deleted state.

When the share coordinator of some of the group's share-partitions is down, only those
partitions fail, as Kafka 4.1.1's group coordinator answers through its persister: a describe
gives them StartOffset -1 with no error and the others their offsets, a
DeleteShareGroupOffsets deletes the state it can and gives the topic the error, and a
DeleteGroups deletes what it can and keeps the group with the error until it is sent again.

Three subprocess brokers on a real ZooKeeper, a confluent-kafka ShareConsumer (librdkafka's)
for the group's records, raw requests for the admin APIs, each sent to the group's
coordinator (the leader of its `__consumer_offsets` partition).
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from confluent_kafka import AcknowledgeType

from compat.differential.share_scenarios import _consumer, _fetching_consumer, _produce
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.coordinator.internal_topic import partition_for
from pybroker.coordinator.share_records import ShareStateKey, state_key_text
from tests.cluster.brokers import create_topic, running_cluster
from tests.cluster.share_cluster import (
    OFFSETS_PARTITIONS, SETTINGS, STATE_PARTITIONS, _state_partition, _topic_id, share_topic,
)
from tests.integration.raw import RawConnection, enable_share_groups
from tests.integration.share_offsets import alter, alter_codes, delete, describe, starts

pytestmark = pytest.mark.cluster


def _summary(conn: RawConnection, group: str, topic_id: Any, partition: int = 0
             ) -> tuple[int, int]:
    """(error, start offset) of the group's share-partition q-`partition` at its share
    coordinator."""
    r = conn.request(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, 0, {
        "group_id": group, "topics": [{"topic_id": topic_id, "partitions": [
            {"partition": partition, "leader_epoch": -1}]}]})
    p = r.results[0].partitions[0]
    return p.error_code, p.start_offset


def test_the_group_coordinator_answers_for_state_kept_on_other_brokers(
        tmp_path: Path, zookeeper: Any) -> None:
    with running_cluster(tmp_path, zookeeper.connect, **SETTINGS) as cluster:
        data_leader, topic_id = share_topic(cluster)
        group = None
        for i in range(10_000):  # three roles, three brokers
            candidate = f"sg-{i}"
            state = cluster.leader("__share_group_state", _state_partition(candidate, topic_id))
            offsets = cluster.leader("__consumer_offsets",
                                     partition_for(candidate, OFFSETS_PARTITIONS))
            if len({state, offsets, data_leader}) == 3:
                group = candidate
                break
        assert group is not None
        # a node's worker K is not at the node's first port: the leaders' own addresses
        coordinator = cluster.leader_address("__consumer_offsets",
                                             partition_for(group, OFFSETS_PARTITIONS))
        state_coordinator = cluster.leader_address("__share_group_state",
                                                   _state_partition(group, topic_id))
        c = _fetching_consumer(cluster.bootstrap(), group, "q")  # accepts what it gets
        c.commit_sync(30)
        c.close()
        with RawConnection(coordinator) as conn, RawConnection(state_coordinator) as at_state:
            code, start = _summary(at_state, group, topic_id)
            assert code == 0 and start > 0, (code, start)
            # describe, the partitions named and all of them
            named = describe(conn, group, [{"topic_name": "q", "partitions": [0]}])
            assert (named.error_code, starts(named)) == (0, {("q", 0): start})
            assert starts(describe(conn, group)) == {("q", 0): start}
            # alter: the member has left (its heartbeat with epoch -1 came with close())
            altered = alter(conn, {("q", 0): 0}, group)
            assert (altered.error_code, alter_codes(altered)) == (0, {("q", 0): 0})
            assert starts(describe(conn, group)) == {("q", 0): 0}
            assert _summary(at_state, group, topic_id) == (0, 0)
            # a new consumer reads from offset 0 again, at the data partition's leader
            again = _consumer(cluster.bootstrap(), group, "q")
            offsets_got: set[int] = set()
            deadline = time.monotonic() + 60
            try:
                while 0 not in offsets_got and time.monotonic() < deadline:
                    for m in again.poll(0.5):
                        if m.error() is None:
                            offsets_got.add(m.offset())
                            again.acknowledge(m, AcknowledgeType.RELEASE)
                again.commit_sync(30)
            finally:
                again.close()
            assert 0 in offsets_got, f"after the alter to 0 the group got {sorted(offsets_got)}"
            # delete the topic's offsets, then the group
            deleted = cluster.wait_until(
                lambda: (r := delete(conn, ["q"], group)).error_code
                != ErrorCode.NON_EMPTY_GROUP and r, 30, "the group to be empty")
            assert (deleted.error_code, [(t.topic_name, t.error_code)
                                         for t in deleted.responses]) == (0, [("q", 0)])
            assert _summary(at_state, group, topic_id) == (0, -1)
            assert starts(describe(conn, group)) == {}
            assert alter_codes(alter(conn, {("q", 0): 1}, group)) == {("q", 0): 0}
            assert _summary(at_state, group, topic_id) == (0, 1)
            removed = conn.request(ApiKey.DELETE_GROUPS, 2, {"groups_names": [group]})
            assert [r.error_code for r in removed.results] == [0]
            assert _summary(at_state, group, topic_id) == (0, -1)
            listed = conn.request(ApiKey.LIST_GROUPS, 5, {"states_filter": [],
                                                           "types_filter": []})
            assert group not in [g.group_id for g in listed.groups]
        # the data partition's leader held the group's share-partition throughout (the
        # consumer above released what it got): a new consumer of the group starts afresh
        # (latest), not from that deleted view
        with RawConnection(cluster.leader_address("q", 0)) as at_leader:
            end = at_leader.request(ApiKey.LIST_OFFSETS, 7, {
                "replica_id": -1, "isolation_level": 0, "topics": [{"name": "q", "partitions": [
                    {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]}
                ).topics[0].partitions[0].offset
        fresh = _consumer(cluster.bootstrap(), group, "q")
        delivered: list[tuple[int, bytes | None]] = []
        deadline = time.monotonic() + 60
        try:
            while b"after" not in [v for _, v in delivered] and time.monotonic() < deadline:
                _produce(cluster.bootstrap(), "q", [b"after"])
                for m in fresh.poll(0.5):
                    if m.error() is None:
                        delivered.append((m.offset(), m.value()))
                        fresh.acknowledge(m, AcknowledgeType.ACCEPT)
        finally:
            fresh.close()
        assert delivered and min(o for o, _ in delivered) >= end, (end, delivered)


PARTITIONS = 6


def test_a_share_coordinator_down_fails_only_its_partitions(
        tmp_path: Path, zookeeper: Any) -> None:
    # __share_group_state with one replica: a stopped broker's state partitions have no
    # leader (their share coordinator is down, none elected) until it is back
    with running_cluster(tmp_path, zookeeper.connect, **{
            **SETTINGS, "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1"}) as cluster:
        enable_share_groups(cluster.brokers[cluster.ids[0]].bootstrap)
        create_topic(cluster, "q", PARTITIONS)
        topic_id = _topic_id(cluster, "q")
        _fetching_consumer(cluster.bootstrap(), "warm", "q").close()  # both internal topics
        state_leaders = [cluster.wait_until(
            lambda p=p: cluster.leader("__share_group_state", p) >= 0 and [
                int(cluster.state("__share_group_state", p)["leader"])], 30,
            f"__share_group_state-{p} to have a leader")[0] for p in range(STATE_PARTITIONS)]

        def at_broker(group: str, p: int) -> int:  # the broker of q-p's share coordinator
            return state_leaders[partition_for(
                state_key_text(ShareStateKey(group, topic_id, p)), STATE_PARTITIONS)]

        def at(group: str, p: int) -> int:  # the node of q-p's share coordinator
            return cluster.node_of(at_broker(group, p))

        def at_address(group: str, p: int) -> str:  # a node's worker K: not its first port
            return cluster.address(at_broker(group, p))
        chosen = None
        for i in range(10_000):  # the group coordinator lives; some partitions' state does not
            group = f"sg-{i}"
            coordinator = cluster.leader("__consumer_offsets",
                                         partition_for(group, OFFSETS_PARTITIONS))
            for victim in set(cluster.ids) - {coordinator}:
                down = {p for p in range(PARTITIONS) if at(group, p) == victim}
                if down and len(down) < PARTITIONS:
                    chosen = group, coordinator, victim, down
                    break
            if chosen:
                break
        assert chosen is not None, state_leaders
        group, coordinator, victim, down = chosen
        up = set(range(PARTITIONS)) - down
        everything = [{"topic_name": "q", "partitions": list(range(PARTITIONS))}]
        with RawConnection(cluster.leader_address(
                "__consumer_offsets", partition_for(group, OFFSETS_PARTITIONS))) as conn:
            altered = alter(conn, {("q", p): 0 for p in range(PARTITIONS)}, group)
            assert alter_codes(altered) == {("q", p): 0 for p in range(PARTITIONS)}
            cluster.stop(victim)

            def offsets(r: Any) -> dict[int, tuple[int, int, int]]:
                return {p.partition_index: (p.start_offset, p.leader_epoch, p.error_code)
                        for t in r.topics for p in t.partitions}
            # a describe: -1, epoch 0 and no error for the partitions it could not read
            for asked in (everything, None):
                described = describe(conn, group, asked)
                assert described.error_code == 0, (asked, described)
                assert [t.topic_name for t in described.topics] == ["q"]
                got = offsets(described)
                assert {p: got[p] for p in down} == {p: (-1, 0, 0) for p in down}, asked
                assert {p: got[p][::2] for p in up} == {p: (0, 0) for p in up}, asked
            # the other partitions' state goes; the topic has the error, with its id
            deleted = delete(conn, ["q", "nosuch"], group)
            assert deleted.error_code == 0
            assert [(t.topic_name, t.topic_id, t.error_code) for t in deleted.responses] == [
                ("q", topic_id, ErrorCode.COORDINATOR_NOT_AVAILABLE),
                ("nosuch", UUID(int=0), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
            for p in up:
                with RawConnection(at_address(group, p)) as at_state:
                    assert _summary(at_state, group, topic_id, p) == (0, -1), p
            assert starts(describe(conn, group)) == {}  # no state it can see in q now
            assert {p: s[0] for p, s in offsets(describe(conn, group, everything)).items()} \
                == {p: -1 for p in range(PARTITIONS)}
            # an alter starts afresh the partitions it can reach, each with its own code
            assert alter_codes(alter(conn, {("q", p): 1 for p in range(PARTITIONS)}, group)) \
                == {("q", p): ErrorCode.COORDINATOR_NOT_AVAILABLE if p in down else 0
                    for p in range(PARTITIONS)}
            # DeleteGroups: the group's error (Kafka's), what could be deleted is, the group
            # stays; an unknown group beside it is answered as ever
            unknown = next(g for i in range(10_000) if partition_for(
                g := f"no-such-group-{i}", OFFSETS_PARTITIONS) == partition_for(
                    group, OFFSETS_PARTITIONS))  # coordinated here too
            removed = conn.request(ApiKey.DELETE_GROUPS, 2, {"groups_names": [group, unknown]})
            assert [(r.group_id, r.error_code) for r in removed.results] == [
                (group, ErrorCode.COORDINATOR_NOT_AVAILABLE),
                (unknown, ErrorCode.GROUP_ID_NOT_FOUND)]
            for p in up:
                with RawConnection(at_address(group, p)) as at_state:
                    assert _summary(at_state, group, topic_id, p) == (0, -1), p
            listed = conn.request(ApiKey.LIST_GROUPS, 5, {"states_filter": [],
                                                           "types_filter": []})
            assert group in [g.group_id for g in listed.groups]
            # the coordinator back, the group is deleted with the state it kept
            cluster.start(victim)
            p_down = min(down)
            with RawConnection(at_address(group, p_down)) as at_state:
                cluster.wait_until(lambda: _summary(at_state, group, topic_id, p_down)
                                   == (0, 0), 60, "the state to be back")
                removed = cluster.wait_until(
                    lambda: (r := conn.request(ApiKey.DELETE_GROUPS, 2, {
                        "groups_names": [group]})).results[0].error_code
                    != ErrorCode.COORDINATOR_NOT_AVAILABLE and r, 60, "the group deleted")
                assert [r.error_code for r in removed.results] == [0]
                assert {p: _summary(at_state, group, topic_id, p) for p in down} \
                    == {p: (0, -1) for p in down}
