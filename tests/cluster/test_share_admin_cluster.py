"""The share offsets admin APIs and DeleteGroups on a cluster answer for the whole group
(issue #34): the group's coordinator reads, starts afresh and deletes the state of a
share-partition that two other brokers serve, one leading the data partition and the other
coordinating its state in `__share_group_state`, as Kafka's group coordinator does through
the share coordinator APIs (ReadShareGroupStateSummary, InitializeShareGroupState,
DeleteShareGroupState). A new consumer of the group then reads from the offset the alter set:
the data partition's leader drops its own view of the share-partition when a new share
session finds the state changed at its coordinator, and after the group is deleted a new
consumer of it starts afresh rather than from the leader's view of the deleted state.

Three subprocess brokers on a real ZooKeeper, a confluent-kafka ShareConsumer (librdkafka's)
for the group's records, raw requests for the admin APIs, each sent to the group's
coordinator (the leader of its `__consumer_offsets` partition).
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType

from compat.differential.share_scenarios import _consumer, _fetching_consumer, _produce
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.coordinator.internal_topic import partition_for
from tests.cluster.brokers import running_cluster
from tests.cluster.test_share_failover import (
    OFFSETS_PARTITIONS, SETTINGS, _state_partition, share_topic,
)
from tests.integration.raw import RawConnection
from tests.integration.test_share_admin import alter, alter_codes, delete, describe, starts

pytestmark = pytest.mark.cluster


def _summary(conn: RawConnection, group: str, topic_id: Any) -> tuple[int, int]:
    """(error, start offset) of the group's share-partition q-0 at its share coordinator."""
    r = conn.request(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, 0, {
        "group_id": group, "topics": [{"topic_id": topic_id, "partitions": [
            {"partition": 0, "leader_epoch": -1}]}]})
    p = r.results[0].partitions[0]
    return p.error_code, p.start_offset


def test_the_group_coordinator_answers_for_state_kept_on_other_brokers(
        tmp_path: Path, zookeeper: Any) -> None:
    with running_cluster(tmp_path, zookeeper.connect, **SETTINGS) as cluster:
        data_leader, topic_id = share_topic(cluster)
        group = coordinator = state_coordinator = None
        for i in range(10_000):  # three roles, three brokers
            candidate = f"sg-{i}"
            state = cluster.leader("__share_group_state", _state_partition(candidate, topic_id))
            offsets = cluster.leader("__consumer_offsets",
                                     partition_for(candidate, OFFSETS_PARTITIONS))
            if len({state, offsets, data_leader}) == 3:
                group, coordinator, state_coordinator = candidate, offsets, state
                break
        assert group is not None and coordinator is not None and state_coordinator is not None
        c = _fetching_consumer(cluster.bootstrap(), group, "q")  # accepts what it gets
        c.commit_sync(30)
        c.close()
        with RawConnection(cluster.brokers[coordinator].bootstrap) as conn, \
                RawConnection(cluster.brokers[state_coordinator].bootstrap) as at_state:
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
        with RawConnection(cluster.brokers[data_leader].bootstrap) as at_leader:
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
