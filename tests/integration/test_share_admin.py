"""Share groups (KIP-932) under administration: ListGroups and DescribeGroups as Kafka 4.1
answers them for a share group, and the offsets admin APIs (DescribeShareGroupOffsets,
AlterShareGroupOffsets, DeleteShareGroupOffsets) with their bad input, over the wire and
through confluent-kafka's AdminClient, against a real broker on an ephemeral port."""
from __future__ import annotations

import warnings
from pathlib import Path
from typing import Iterator
from uuid import UUID

import pytest
from confluent_kafka import ConsumerGroupState
from confluent_kafka.admin import AclOperation, AdminClient, NewTopic, ResourceType

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from tests.helpers import Broker, serving_broker
from tests.integration.acl_clients import AUTHORIZER, ONE_BROKER, PRINCIPAL, allow
from tests.integration.raw import (
    RawConnection, coordinator_address, create_topic, enable_share_groups, group_beside,
)
from tests.integration.share_member import (
    ACCEPT, SHORT, Member, ack_codes, acquired, started,
)
from tests.integration.share_offsets import alter, alter_codes, delete, describe, starts

ZERO_ID = UUID(int=0)


@pytest.fixture
def bootstrap(tmp_path: Path) -> Iterator[str]:
    with serving_broker(tmp_path / "logs", **SHORT) as info:
        yield info.bootstrap


def list_groups(conn: RawConnection, version: int = 5, states: list[str] = (),  # type: ignore[assignment]
                types: list[str] = ()) -> list[tuple]:  # type: ignore[assignment]
    r = conn.request(ApiKey.LIST_GROUPS, version, {"states_filter": list(states),
                                                    "types_filter": list(types)})
    assert r.error_code == 0
    return [(g.group_id, g.protocol_type, g.get("group_state"), g.get("group_type"))
            for g in r.groups]


def test_list_groups_shows_share_groups_and_describe_groups_calls_them_dead(
        bootstrap: str) -> None:
    """As Kafka 4.1.1 answers (checked against it): ProtocolType and GroupType "share", the
    filters case-insensitive; DescribeGroups (classic only) answers Dead with no error."""
    m = started(bootstrap, 0)
    conn = m.conn
    shown = ("sg", "share", "Stable", "share")
    assert list_groups(conn) == [shown]
    assert list_groups(conn, types=["Share"]) == [shown]
    assert list_groups(conn, states=["stable"]) == [shown]
    assert list_groups(conn, types=["classic", "consumer"]) == []
    assert list_groups(conn, states=["Empty"]) == []
    assert list_groups(conn, 4) == [("sg", "share", "Stable", "")]
    assert list_groups(conn, 0) == [("sg", "share", "", "")]
    d = conn.request(ApiKey.DESCRIBE_GROUPS, 5, {"groups": ["sg"],
                                                 "include_authorized_operations": False})
    g = d.groups[0]
    assert (g.error_code, g.group_state, g.protocol_type, list(g.members)) == (0, "Dead", "", [])
    # confluent-kafka over the same answers: its consumer-group listing leaves a share group
    # out (ProtocolType "share"), its legacy listing describes it, Dead
    admin = AdminClient({"bootstrap.servers": bootstrap})
    assert admin.list_consumer_groups().result(10).valid == []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        legacy = admin.list_groups(timeout=10)
    assert [(x.id, x.state) for x in legacy] == [("sg", "Dead")]
    described = admin.describe_consumer_groups(["sg"])["sg"].result(10)
    assert (described.state, described.members) == (ConsumerGroupState.DEAD, [])
    assert m.heartbeat(-1).error_code == 0
    assert list_groups(conn) == [("sg", "share", "Empty", "share")]
    assert list_groups(conn, states=["Empty"], types=["share"]) == [
        ("sg", "share", "Empty", "share")]


def test_describe_alter_and_delete_offsets(tmp_path: Path) -> None:
    with serving_broker(tmp_path / "logs", **SHORT) as info:
        m = started(info.bootstrap, 6)
        conn = m.conn
        assert acquired(m.fetch(max_wait_ms=5000)) == [(0, 5, 1)]
        assert ack_codes(m.acknowledge([(0, 1, ACCEPT)])) == [0]
        g = describe(conn)
        assert (g.error_code, starts(g)) == (0, {("q", 0): 2})
        assert g.topics[0].topic_id == m.topic_id
        # offsets change only on an empty group
        r = alter(conn, {("q", 0): 4})
        assert (r.error_code, r.error_message) == (ErrorCode.NON_EMPTY_GROUP,
                                                   "The group is not empty.")
        assert delete(conn, ["q"]).error_code == ErrorCode.NON_EMPTY_GROUP
        assert m.heartbeat(-1).error_code == 0
        r = alter(conn, {("q", 0): 4})
        assert (r.error_code, alter_codes(r)) == (0, {("q", 0): 0})
        assert r.responses[0].topic_id == m.topic_id
        assert starts(describe(conn)) == {("q", 0): 4}
        conn.close()
    with serving_broker(tmp_path / "logs", **SHORT) as info:  # the SPSO was written
        conn = RawConnection(coordinator_address(info.bootstrap, "sg"))
        assert starts(describe(conn)) == {("q", 0): 4}
        # membership is not durable; the group, known by its state, is Empty
        assert list_groups(conn) == [("sg", "share", "Empty", "share")]
        d = conn.request(ApiKey.SHARE_GROUP_DESCRIBE, 1, {
            "group_ids": ["sg"], "include_authorized_operations": False}).groups[0]
        assert (d.error_code, d.group_state, list(d.members)) == (0, "Empty", [])
        again = Member(info.bootstrap)
        again.join()
        # 2 and 3 were acquired, not acknowledged: the reset passed over them
        assert acquired(again.fetch(max_wait_ms=5000)) == [(4, 5, 1)]
        assert again.heartbeat(-1).error_code == 0
        r = delete(conn, ["q"])
        assert (r.error_code, [(t.topic_name, t.topic_id, t.error_code) for t in r.responses]) \
            == (0, [("q", again.topic_id, 0)])
        assert describe(conn).topics == []
        conn.close()
    with serving_broker(tmp_path / "logs", **SHORT) as info:  # the delete was written
        assert describe(RawConnection(coordinator_address(info.bootstrap, "sg"))).topics == []


def test_bad_input_gets_kafkas_codes_on_a_connection_kept_open(bootstrap: str) -> None:
    m = started(bootstrap, 3)  # its share-partition starts at 0 (latest, before the 3)
    conn = m.conn
    # Groups its coordinator coordinates too: on a node, another broker answers for others.
    nobody = group_beside(bootstrap, "sg", "nobody")
    classic = group_beside(bootstrap, "sg", "classic")
    create_topic(bootstrap, "two", 2)
    assert m.heartbeat(-1).error_code == 0
    # describe: a partition, topic or group without state is -1 with no error (as Kafka)
    g = describe(conn, topics=[{"topic_name": "q", "partitions": [0, 7]},
                               {"topic_name": "nope", "partitions": [0]}])
    assert g.error_code == 0 and starts(g) == {("q", 0): 0, ("q", 7): -1, ("nope", 0): -1}
    assert g.topics[1].topic_id == ZERO_ID
    assert describe(conn, nobody).topics == []
    assert starts(describe(conn, nobody, [{"topic_name": "q", "partitions": [0]}])) == {
        ("q", 0): -1}
    # alter: per partition
    r = alter(conn, {("q", 0): -5, ("q", 3): 0, ("nope", 0): 0, ("two", 1): 1})
    assert r.error_code == 0
    assert alter_codes(r) == {("q", 0): ErrorCode.INVALID_REQUEST,
                              ("q", 3): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                              ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                              ("two", 1): 0}
    assert [t.topic_id == ZERO_ID for t in r.responses] == [False, True, False]
    assert starts(describe(conn)) == {("q", 0): 0, ("two", 1): 1}
    assert alter(conn, {("q", 0): 1}, group="").error_code == ErrorCode.INVALID_GROUP_ID
    # a classic group's id is not a share group's
    committed = conn.request(ApiKey.OFFSET_COMMIT, 2, {
        "group_id": classic, "generation_id_or_member_epoch": -1, "member_id": "",
        "retention_time_ms": -1, "topics": [{"name": "q", "partitions": [
            {"partition_index": 0, "committed_offset": 1, "committed_metadata": ""}]}]})
    assert committed.topics[0].partitions[0].error_code == 0
    assert alter(conn, {("q", 0): 1}, classic).error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert describe(conn, classic).error_code == ErrorCode.GROUP_ID_NOT_FOUND
    # delete: the group must exist; a topic without state is unknown, with the zero id
    r = delete(conn, ["q"], group=nobody)
    assert (r.error_code, r.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND,
                                               f"Group {nobody} not found.")
    assert delete(conn, ["q"], group="").error_code == ErrorCode.INVALID_GROUP_ID
    # no topic to delete: no error and nothing, whatever the group (Kafka 4.1.1's KafkaApis
    # answers before its group coordinator looks at the group)
    for group in ("", nobody):
        r = delete(conn, [], group=group)
        assert (r.error_code, r.responses) == (0, [])
    create_topic(bootstrap, "fresh")
    r = delete(conn, ["nope", "fresh", "two"])
    assert r.error_code == 0
    assert [(t.topic_name, t.topic_id == ZERO_ID, t.error_code) for t in r.responses] == [
        ("nope", True, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ("fresh", True, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ("two", False, 0)]
    assert r.responses[1].error_message == "There is no offset information to delete."
    assert starts(describe(conn)) == {("q", 0): 0}


def test_the_offsets_apis_wait_for_share_version(tmp_path: Path) -> None:
    with serving_broker(tmp_path / "logs", **SHORT) as info:
        conn = RawConnection(coordinator_address(info.bootstrap, "sg"))
        r = conn.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "t",
                                                  "client_software_version": "1"})
        keys = {a.api_key for a in r.api_keys}
        assert not keys & {90, 91, 92}
        assert describe(conn).error_code == ErrorCode.UNSUPPORTED_VERSION
        assert alter(conn, {("q", 0): 1}).error_code == ErrorCode.UNSUPPORTED_VERSION
        assert delete(conn, ["q"]).error_code == ErrorCode.UNSUPPORTED_VERSION
        started(info.bootstrap, 0)
        r = conn.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "t",
                                                  "client_software_version": "1"})
        assert {(a.api_key, a.min_version, a.max_version) for a in r.api_keys
                if a.api_key in (90, 91, 92)} == {(90, 0, 0), (91, 0, 0), (92, 0, 0)}


def test_acls_as_kafka(tmp_path: Path) -> None:
    """DESCRIBE on the group and the topics for DescribeShareGroupOffsets, READ for Alter,
    DELETE on the group and READ on the topics for Delete; ListGroups shows only the groups
    the principal may describe. The principal may READ topic a and group g, nothing else."""
    broker = Broker(log_dir=tmp_path / "logs", authorizer_class_name=AUTHORIZER,
                    super_users=PRINCIPAL, **SHORT, **ONE_BROKER).start()
    try:
        enable_share_groups(broker.bootstrap)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for f in admin.create_topics([NewTopic("a", 1, 1), NewTopic("b", 1, 1)]).values():
            f.result(10)
        for group in ("g", "h"):
            for topic in ("a", "b"):
                m = Member(broker.bootstrap, group=group, topic=topic)
                m.join()
                assert m.fetch().error_code == 0
                assert m.heartbeat(-1).error_code == 0
                m.close()
        grants = [allow(ResourceType.TOPIC, "a", AclOperation.READ),
                  allow(ResourceType.GROUP, "g", AclOperation.READ)]
        for f in admin.create_acls(grants).values():
            f.result(10)
        broker.config["super.users"] = ""
        broker.restart()
        with RawConnection(broker.bootstrap) as conn:
            assert [g[0] for g in list_groups(conn)] == ["g"]
            denied = ErrorCode.GROUP_AUTHORIZATION_FAILED
            assert describe(conn, "h").error_code == denied
            g = describe(conn, "g")
            assert [(t.topic_name, [(p.error_code, p.start_offset) for p in t.partitions])
                    for t in g.topics] == [("a", [(0, 0)]),
                                           ("b", [(ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1)])]
            assert alter(conn, {("a", 0): 0}, "h").error_code == denied
            r = alter(conn, {("a", 0): 0, ("b", 0): 0}, "g")
            assert alter_codes(r) == {("a", 0): 0, ("b", 0): ErrorCode.TOPIC_AUTHORIZATION_FAILED}
            assert delete(conn, ["a"], "g").error_code == denied
            # every refusal was an answer: the connection still serves
            assert conn.request(ApiKey.API_VERSIONS, 0, {}).error_code == 0
    finally:
        broker.stop()
