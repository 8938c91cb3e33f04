"""A group id belongs to one kind of group: classic, consumer (KIP-848) or share (KIP-932).
Asking for a live group as another kind gets Kafka's GROUP_ID_NOT_FOUND ("not a ... group")
instead of a second membership under the same id, except where online migration between
classic and consumer groups takes the member in (tests/integration/test_group_migration.py):
a classic JoinGroup into a live consumer group, under every policy, as Kafka 4.1; a consumer
heartbeat into a live classic group whose subscriptions parse, as the policy allows. An empty
consumer group gives its id to a classic JoinGroup, as Kafka under every policy."""
from __future__ import annotations

import uuid
from pathlib import Path

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from tests.helpers import serving_broker
from tests.integration.raw import (
    RawConnection, coordinator_address, create_topic, enable_share_groups,
)


def _join(conn: RawConnection, group: str) -> int:
    return conn.request(ApiKey.JOIN_GROUP, 9, {
        "group_id": group, "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
        "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b""}], "reason": None}).error_code


def _consumer_heartbeat(conn: RawConnection, group: str, member_id: str = "",
                        epoch: int = 0) -> int:
    return conn.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, {
        "group_id": group, "member_id": member_id or str(uuid.uuid4()), "member_epoch": epoch,
        "instance_id": None, "rack_id": None,
        "rebalance_timeout_ms": 30000 if epoch == 0 else -1,
        "subscribed_topic_names": ["t"] if epoch == 0 else None,
        "subscribed_topic_regex": None, "server_assignor": None,
        "topic_partitions": [] if epoch == 0 else None}).error_code


def _join_as_member(conn: RawConnection, group: str) -> tuple[str, int]:
    """A classic member through JoinGroup v9's two rounds: its id and generation."""
    request = {"group_id": group, "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
               "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
               "protocols": [{"name": "range", "metadata": b""}], "reason": None}
    first = conn.request(ApiKey.JOIN_GROUP, 9, request)
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
    joined = conn.request(ApiKey.JOIN_GROUP, 9, {**request, "member_id": first.member_id})
    assert joined.error_code == ErrorCode.NONE
    return joined.member_id, joined.generation_id


def _listed(conn: RawConnection) -> list[tuple[str, str]]:
    return [(g.group_id, g.group_type) for g in conn.request(
        ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": []}).groups]


def _described_state(conn: RawConnection, group: str) -> str:
    return conn.request(ApiKey.DESCRIBE_GROUPS, 5, {
        "groups": [group], "include_authorized_operations": False}).groups[0].group_state


def _share_heartbeat(conn: RawConnection, group: str) -> int:
    return conn.request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, {
        "group_id": group, "member_id": str(uuid.uuid4()), "member_epoch": 0,
        "rack_id": None, "subscribed_topic_names": ["t"]}).error_code


def test_each_group_id_is_one_kind_of_group(tmp_path: Path) -> None:
    with serving_broker(tmp_path / "logs") as info:
        enable_share_groups(info.bootstrap)
        create_topic(info.bootstrap, "t")
        # Each group's requests to its coordinator (on a node, any of its brokers).
        to = {group: RawConnection(coordinator_address(info.bootstrap, group))
              for group in ("consumer", "share", "classic")}
        try:
            assert _consumer_heartbeat(to["consumer"], "consumer") == ErrorCode.NONE
            assert _share_heartbeat(to["share"], "share") == ErrorCode.NONE
            assert _join(to["classic"], "classic") == ErrorCode.MEMBER_ID_REQUIRED  # may join

            # a classic member of the consumer group (online migration): asked for its id
            assert _join(to["consumer"], "consumer") == ErrorCode.MEMBER_ID_REQUIRED
            assert _share_heartbeat(to["consumer"], "consumer") == ErrorCode.GROUP_ID_NOT_FOUND
            assert _join(to["share"], "share") == ErrorCode.GROUP_ID_NOT_FOUND
            assert _consumer_heartbeat(to["share"], "share") == ErrorCode.GROUP_ID_NOT_FOUND
            assert _share_heartbeat(to["classic"], "classic") == ErrorCode.GROUP_ID_NOT_FOUND
        finally:
            for conn in to.values():
                conn.close()


def test_an_empty_consumer_group_gives_its_id_to_a_classic_join(tmp_path: Path) -> None:
    """Kafka's maybeDeleteEmptyConsumerGroup: the consumer group's records are tombstoned, so
    the id lists and describes as classic, its classic member commits with its generation,
    and a restart loads the classic group alone."""
    with serving_broker(tmp_path / "logs") as info:
        create_topic(info.bootstrap, "t")
        with RawConnection(coordinator_address(info.bootstrap, "g")) as conn:
            member = str(uuid.uuid4())
            assert _consumer_heartbeat(conn, "g", member) == ErrorCode.NONE
            assert _consumer_heartbeat(conn, "g", member, epoch=-1) == ErrorCode.NONE
            assert _listed(conn) == [("g", "consumer")]  # empty, still a consumer group

            member_id, generation = _join_as_member(conn, "g")
            assert _listed(conn) == [("g", "classic")]
            assert _described_state(conn, "g") == "CompletingRebalance"
            synced = conn.request(ApiKey.SYNC_GROUP, 3, {
                "group_id": "g", "generation_id": generation, "member_id": member_id,
                "group_instance_id": None,
                "assignments": [{"member_id": member_id, "assignment": b""}]})
            assert synced.error_code == ErrorCode.NONE
            assert _described_state(conn, "g") == "Stable"
            committed = conn.request(ApiKey.OFFSET_COMMIT, 8, {
                "group_id": "g", "generation_id_or_member_epoch": generation,
                "member_id": member_id, "topics": [{"name": "t", "partitions": [
                    {"partition_index": 0, "committed_offset": 0,
                     "committed_metadata": None}]}]})
            assert committed.topics[0].partitions[0].error_code == ErrorCode.NONE
            # the id is now a live classic group's, whose member's subscription (b"") does
            # not parse: it cannot be upgraded, and a consumer heartbeat is refused
            assert _consumer_heartbeat(conn, "g") == ErrorCode.GROUP_ID_NOT_FOUND
    with serving_broker(tmp_path / "logs") as info:
        with RawConnection(coordinator_address(info.bootstrap, "g")) as conn:
            assert _listed(conn) == [("g", "classic")]


def test_a_share_groups_id_stays_a_share_group_after_an_offset_commit_names_it(
        tmp_path: Path) -> None:
    """A standalone OffsetCommit (generation -1) with a share group's id is refused with
    GROUP_ID_NOT_FOUND, as Kafka 4.1.1 answers it (tests/reference/
    test_kafka_share_group_commits.py), so no classic group takes the id beside the share
    group: ListGroups lists the share group alone, and the id still answers as the share
    group at every API that asks its kind (handlers/_group_kind.py)."""
    with serving_broker(tmp_path / "logs") as info:
        enable_share_groups(info.bootstrap)
        create_topic(info.bootstrap, "t")
        with RawConnection(coordinator_address(info.bootstrap, "s")) as conn:
            assert _share_heartbeat(conn, "s") == ErrorCode.NONE
            committed = conn.request(ApiKey.OFFSET_COMMIT, 8, {
                "group_id": "s", "generation_id_or_member_epoch": -1, "member_id": "",
                "topics": [{"name": "t", "partitions": [
                    {"partition_index": 0, "committed_offset": 0,
                     "committed_metadata": None}]}]})
            assert committed.topics[0].partitions[0].error_code == \
                ErrorCode.GROUP_ID_NOT_FOUND
            assert _listed(conn) == [("s", "share")]
            assert _share_heartbeat(conn, "s") == ErrorCode.NONE
            assert _join(conn, "s") == ErrorCode.GROUP_ID_NOT_FOUND
            assert _consumer_heartbeat(conn, "s") == ErrorCode.GROUP_ID_NOT_FOUND
            described = conn.request(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 0, {"groups": [
                {"group_id": "s", "topics": None}]}).groups[0]
            assert described.error_code == ErrorCode.NONE
