"""Online migration between classic and consumer groups on a three-broker cluster: the
conversion's records are replicated with `__consumer_offsets`, so when the coordinator of an
upgraded group is killed (-9) the new one serves the same mixed group (its classic member at
its epoch, its consumer-protocol member), and downgrades it when the consumer-protocol member
leaves."""
from __future__ import annotations

import uuid
from typing import Any

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.coordinator.internal_topic import partition_for
from tests.cluster.brokers import Cluster, create_topic, running_cluster
from tests.integration.group_requests import (
    _consumer_join, _consumer_leave, _group_type, _raw_classic_member,
)
from tests.integration.group_topics import PARTITIONS
from tests.integration.raw import RawConnection, send_request

OFFSETS = "__consumer_offsets"
OFFSETS_PARTITIONS = 3


def _coordinator(cluster: Cluster, group: str, exclude: tuple[int, ...] = ()
                 ) -> tuple[str, int]:
    """The address and node of the group's coordinator, once it serves the group."""
    bootstrap = cluster.bootstrap(exclude=exclude).split(",")[0]

    def serving() -> tuple[str, int] | None:
        found = send_request(bootstrap, ApiKey.FIND_COORDINATOR, 4, {
            "key_type": 0, "coordinator_keys": [group]}).coordinators[0]
        if found.error_code:
            return None
        address = f"{found.host}:{found.port}"
        described = send_request(address, ApiKey.DESCRIBE_GROUPS, 5, {
            "groups": [group], "include_authorized_operations": False}).groups[0]
        if described.error_code in (ErrorCode.NOT_COORDINATOR,
                                    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
            return None
        return address, found.node_id
    return cluster.wait_until(serving, 60, f"a coordinator serving {group}")


def _described(address: str, group: str) -> Any:
    return send_request(address, ApiKey.CONSUMER_GROUP_DESCRIBE, 1, {
        "group_ids": [group], "include_authorized_operations": False}).groups[0]


def test_an_upgraded_group_survives_its_coordinators_death(tmp_path: Any,
                                                           zookeeper: Any) -> None:
    with running_cluster(tmp_path, zookeeper.connect, **{
            "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS)}) as cluster:
        create_topic(cluster, "mig", partitions=PARTITIONS)
        address, broker = _coordinator(cluster, "g")
        node = cluster.node_of(broker)  # the node that runs it (PYBROKER_NUM_CORES)
        with RawConnection(address) as conn:
            member_id, generation = _raw_classic_member(conn, "g", "mig")
            joined = _consumer_join(conn, "g", "mig", str(uuid.uuid4()))
            assert joined.error_code == ErrorCode.NONE
        before = _described(address, "g")
        assert sorted(m.member_type for m in before.members) == [0, 1]

        index = partition_for("g", OFFSETS_PARTITIONS)
        assert cluster.state(OFFSETS, index)["leader"] == broker
        cluster.kill(node)
        cluster.wait_until(lambda: cluster.leader(OFFSETS, index) not in (node, -1), 30,
                           "a new coordinator")
        address, _ = _coordinator(cluster, "g", exclude=(node,))
        after = _described(address, "g")
        assert after.error_code == ErrorCode.NONE
        assert sorted((m.member_id, m.member_epoch, m.member_type) for m in after.members) == \
            sorted((m.member_id, m.member_epoch, m.member_type) for m in before.members)
        with RawConnection(address) as conn:
            assert conn.request(ApiKey.HEARTBEAT, 4, {
                "group_id": "g", "generation_id": generation, "member_id": member_id,
                "group_instance_id": None}).error_code == ErrorCode.REBALANCE_IN_PROGRESS
            consumer = next(m for m in after.members if m.member_type == 1)
            assert _consumer_leave(conn, "g", consumer.member_id,
                                   consumer.member_epoch) == ErrorCode.NONE
        assert _group_type(address, "g") == "classic"
