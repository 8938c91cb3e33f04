"""Share groups (KIP-932) over the wire, request by request: what the stock clients cannot be
made to send on cue (a wrong session epoch, an acknowledgement of a record not held, a member
that vanishes holding records), against a real broker on an ephemeral port."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Iterator

import pytest

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from tests.helpers import serving_broker
from tests.integration.raw import RawConnection, create_topic, enable_share_groups, group_beside
from tests.integration.share_member import (
    ACCEPT, LOCK_MS, RELEASE, REJECT, SHORT, Member, ack_codes, acquired, produce, started,
)


@pytest.fixture
def bootstrap(tmp_path: Path) -> Iterator[str]:
    with serving_broker(tmp_path / "logs", **SHORT) as info:
        yield info.bootstrap


def test_share_groups_are_served_only_once_share_version_is_finalized(bootstrap: str) -> None:
    """share.version is 0 by default (Kafka 4.1): the four APIs are neither advertised nor
    served until an UpdateFeatures raises it; the level is kept across a restart (the
    restart test relies on it)."""
    def advertised() -> set[int]:
        r = RawConnection(bootstrap).request(ApiKey.API_VERSIONS, 3, {
            "client_software_name": "t", "client_software_version": "1"})
        return {a.api_key for a in r.api_keys}
    share_apis = {ApiKey.SHARE_GROUP_HEARTBEAT, ApiKey.SHARE_GROUP_DESCRIBE,
                  ApiKey.SHARE_FETCH, ApiKey.SHARE_ACKNOWLEDGE}
    create_topic(bootstrap, "q")
    assert not share_apis & advertised()
    assert Member(bootstrap).heartbeat(0, ["q"]).error_code == ErrorCode.UNSUPPORTED_VERSION
    enable_share_groups(bootstrap)
    assert share_apis <= advertised()
    assert Member(bootstrap).heartbeat(0, ["q"]).error_code == ErrorCode.NONE


def test_group_share_enable_serves_share_groups_without_share_version(tmp_path: Path) -> None:
    """Kafka 4.1.1 takes its internal key group.share.enable=true (checked: it starts, and a
    ShareGroupHeartbeat is served with share.version 0) and leaves share.version unfinalized:
    so does pybroker, where the key was unknown and ignored with a warning."""
    with serving_broker(tmp_path / "logs", **{**SHORT, "group.share.enable": "true"}) as info:
        create_topic(info.bootstrap, "q")
        r = RawConnection(info.bootstrap).request(ApiKey.API_VERSIONS, 3, {
            "client_software_name": "t", "client_software_version": "1"})
        assert ApiKey.SHARE_FETCH in {a.api_key for a in r.api_keys}
        assert "share.version" not in {f.name for f in r.finalized_features}
        assert Member(info.bootstrap).heartbeat(0, ["q"]).error_code == ErrorCode.NONE


def test_acquire_accept_and_nothing_left(bootstrap: str) -> None:
    m = started(bootstrap)
    r = m.fetch(max_wait_ms=5000)
    assert r.acquisition_lock_timeout_ms == LOCK_MS
    assert acquired(r) == [(0, 4, 1)]
    part = r.responses[0].partitions[0]
    assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (-1, -1)
    r = m.fetch([(0, 4, ACCEPT)])
    assert ack_codes(r) == [0] and acquired(r) == []
    # the acknowledgement's partition carries empty records, as Kafka 4.1.1's (checked), not
    # null: librdkafka 2.16 drops a whole response with a null Records
    assert r.responses[0].partitions[0].records == b""


def test_release_redelivers_and_the_delivery_limit_archives(bootstrap: str) -> None:
    m = started(bootstrap, 2)
    assert acquired(m.fetch(max_wait_ms=5000)) == [(0, 1, 1)]
    r = m.fetch([(0, 0, RELEASE), (1, 1, ACCEPT)])
    assert ack_codes(r) == [0]
    assert acquired(r) == [(0, 0, 2)]
    # released at the limit (2): archived, never handed out again
    r = m.fetch([(0, 0, RELEASE)], max_wait_ms=300)
    assert ack_codes(r) == [0] and acquired(r) == []


def test_reject_archives(bootstrap: str) -> None:
    m = started(bootstrap, 1)
    assert acquired(m.fetch(max_wait_ms=5000)) == [(0, 0, 1)]
    assert ack_codes(m.fetch([(0, 0, REJECT)], max_wait_ms=300)) == [0]
    other = Member(bootstrap)
    other.join()
    assert acquired(other.fetch(max_wait_ms=300)) == []


def test_a_silent_members_records_come_back_after_the_lock(bootstrap: str) -> None:
    m = started(bootstrap, 3)
    assert acquired(m.fetch(max_wait_ms=5000)) == [(0, 2, 1)]
    # silent from now on, holding 0-2, its connection open
    other = Member(bootstrap)
    other.join()
    assert acquired(other.fetch()) == []  # still locked
    start = time.monotonic()
    r = other.fetch(max_wait_ms=30_000)
    assert acquired(r) == [(0, 2, 2)]
    # woken by the expiry (after 1 s), long before the 30 s wait would run out
    assert time.monotonic() - start < 15


def test_a_closed_connection_gives_its_sessions_records_back_at_once(bootstrap: str) -> None:
    """As Kafka's ConnectionDisconnectListener: the connection's share session closes and
    what it held is Available again at once, the delivery taken back (count 1 again)."""
    m = started(bootstrap, 3)
    assert acquired(m.fetch(max_wait_ms=5000)) == [(0, 2, 1)]
    other = Member(bootstrap)
    other.join()
    assert acquired(other.fetch()) == []  # locked by m
    m.data.close()  # the connection its share session is on (its fetches')
    deadline = time.monotonic() + 10
    got: list = []
    while not got and time.monotonic() < deadline:
        got = acquired(other.fetch(max_wait_ms=500))
    assert got == [(0, 2, 1)]


def test_acknowledging_what_one_does_not_hold_is_invalid_record_state(bootstrap: str) -> None:
    m = started(bootstrap, 2)
    assert acquired(m.fetch(max_wait_ms=5000)) == [(0, 1, 1)]
    other = Member(bootstrap)
    other.join()
    other.fetch()
    assert ack_codes(other.acknowledge([(0, 0, ACCEPT)])) == [ErrorCode.INVALID_RECORD_STATE]
    assert ack_codes(m.acknowledge([(5, 5, ACCEPT)])) == [ErrorCode.INVALID_RECORD_STATE]
    assert ack_codes(m.acknowledge([(0, 1, ACCEPT)])) == [0]


def test_session_epochs(bootstrap: str) -> None:
    m = started(bootstrap, 1)
    r = m.fetch(epoch=7)
    # a refused request carries no lock duration (Kafka's getErrorResponse: 0)
    assert (r.error_code, r.acquisition_lock_timeout_ms) == (
        ErrorCode.INVALID_SHARE_SESSION_EPOCH, 0)
    assert m.acknowledge([(0, 0, ACCEPT)], epoch=0).error_code \
        == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    stranger = Member(bootstrap)
    stranger.topic_id = m.topic_id
    assert stranger.fetch(epoch=1).error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
    assert m.fetch([(0, 0, ACCEPT)], epoch=0).error_code == ErrorCode.INVALID_REQUEST
    # the session still expects its epoch: none of the refused requests moved it
    assert acquired(m.fetch(max_wait_ms=5000)) == [(0, 0, 1)]


def test_closing_the_session_releases_at_once(bootstrap: str) -> None:
    m = started(bootstrap, 2)
    assert acquired(m.fetch(max_wait_ms=5000)) == [(0, 1, 1)]
    r = m.acknowledge([(0, 0, ACCEPT)], epoch=-1)
    assert r.error_code == 0 and ack_codes(r) == [0]
    other = Member(bootstrap)
    other.join()
    # released with its delivery taken back, as Kafka's releaseAcquiredRecords
    assert acquired(other.fetch(max_wait_ms=2000)) == [(1, 1, 1)]


def test_heartbeat_errors_and_describe(bootstrap: str) -> None:
    m = started(bootstrap, 0)
    assert m.heartbeat(m.heartbeat(0, ["q"]).member_epoch).heartbeat_interval_ms == 1234
    assert m.heartbeat(99).error_code == ErrorCode.FENCED_MEMBER_EPOCH
    assert Member(bootstrap).heartbeat(3).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    r = Member(bootstrap).heartbeat(0, None)
    assert (r.error_code, r.error_message) == (
        ErrorCode.INVALID_REQUEST, "SubscribedTopicNames must be set in first request.")
    nope = group_beside(bootstrap, "sg", "nope")  # on a node, one its coordinator has too
    d = m.conn.request(ApiKey.SHARE_GROUP_DESCRIBE, 1, {
        "group_ids": ["sg", nope], "include_authorized_operations": False})
    sg, missing = d.groups
    assert (sg.error_code, sg.group_state, sg.assignor_name) == (0, "Stable", "simple")
    assert [(x.member_id, x.assignment.topic_partitions[0].topic_name) for x in sg.members] \
        == [(m.member_id, "q")]
    assert missing.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert m.heartbeat(-1).member_epoch == -1


def test_a_restart_keeps_acknowledged_done_and_acquired_available(tmp_path: Path) -> None:
    with serving_broker(tmp_path / "logs", **SHORT) as info:
        m = started(info.bootstrap, 4)
        assert acquired(m.fetch(max_wait_ms=5000)) == [(0, 3, 1)]
        assert ack_codes(m.acknowledge([(0, 0, ACCEPT), (2, 2, REJECT)])) == [0]
        topic_id = m.topic_id
        # the state's own topic, with the partitions it was configured with
        r = m.conn.request(ApiKey.METADATA, 12, {
            "topics": [{"topic_id": None, "name": "__share_group_state"}],
            "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
        assert len(r.topics[0].partitions) == 3
        r = m.conn.request(ApiKey.DESCRIBE_CONFIGS, 1, {"resources": [{
            "resource_type": 2, "resource_name": "__share_group_state",
            "configuration_keys": ["min.insync.replicas", "cleanup.policy"]}],
            "include_synonyms": False})
        assert {c.name: c.value for c in r.results[0].configs} == {
            "min.insync.replicas": "1", "cleanup.policy": "compact"}
        # m's connection stays open to the end: closed, it would give 1 and 3 back with
        # their delivery taken back (test_a_closed_connection_gives_...)
    m.close()
    with serving_broker(tmp_path / "logs", **SHORT) as info:
        again = Member(info.bootstrap)
        again.join()
        assert again.topic_id == topic_id
        r = again.fetch(max_wait_ms=5000)
        # 1 and 3 were acquired, not acknowledged: back, and delivered a second time
        assert acquired(r) == [(1, 1, 2), (3, 3, 2)]


def test_limits(tmp_path: Path) -> None:
    """The record-lock cap, the session cache and the group size, at their edges."""
    limits = {"group.share.partition.max.record.locks": "100",
              "group.share.max.share.sessions": "1", "group.share.max.size": "1"}
    with serving_broker(tmp_path / "logs", **limits) as info:
        m = started(info.bootstrap, 0)
        for _ in range(3):  # three batches: 0-49, 50-99, 100-149
            produce(info.bootstrap, 50)
        r = m.fetch(max_wait_ms=5000)
        assert acquired(r) == [(0, 99, 1)]  # the cap stops before the third batch
        assert acquired(m.fetch()) == []
        assert acquired(m.fetch([(0, 49, ACCEPT)])) == [(100, 149, 1)]
        other = Member(info.bootstrap)
        assert other.heartbeat(0, ["q"]).error_code == ErrorCode.GROUP_MAX_SIZE_REACHED
        other.topic_id = m.topic_id
        assert other.fetch().error_code == ErrorCode.SHARE_SESSION_LIMIT_REACHED


def test_a_silent_member_is_removed_and_its_records_come_back_with_their_lock(
        tmp_path: Path) -> None:
    """A member whose session runs out leaves the group, but what it holds comes back only
    when the acquisition lock runs out, delivery counted, as Kafka 4.1.1 does (checked
    against it: membership and share-partitions are apart, the latter maybe on another
    broker; only the share session's end releases at once)."""
    lock_ms = 4000
    with serving_broker(tmp_path / "logs", **{"group.share.session.timeout.ms": "1000",
                                                   "group.share.min.session.timeout.ms": "1000",
                                                   "group.share.heartbeat.interval.ms": "500",
                                                   "group.share.min.heartbeat.interval.ms": "500",
                                                   "group.share.record.lock.duration.ms":
                                                       str(lock_ms),
                                                   "group.share.min.record.lock.duration.ms":
                                                       str(lock_ms)}
                          ) as info:
        m = started(info.bootstrap, 1)
        asked_at = time.monotonic()  # the lock starts after this
        assert acquired(m.fetch(max_wait_ms=5000)) == [(0, 0, 1)]
        other = Member(info.bootstrap)
        other.join()
        other.fetch()
        deadline = time.monotonic() + 10
        got: list = []
        while not got and time.monotonic() < deadline:
            other.heartbeat(other_epoch(other))
            got = acquired(other.fetch(max_wait_ms=200))
        assert got == [(0, 0, 2)]
        assert time.monotonic() - asked_at >= lock_ms / 1000  # the lock's end, no sooner
        d = other.conn.request(ApiKey.SHARE_GROUP_DESCRIBE, 1, {
            "group_ids": ["sg"], "include_authorized_operations": False})
        assert [x.member_id for x in d.groups[0].members] == [other.member_id]


def other_epoch(member: Member) -> int:
    """The member's current epoch, from a describe (the group epoch moves as members go)."""
    d = member.conn.request(ApiKey.SHARE_GROUP_DESCRIBE, 1, {
        "group_ids": [member.group], "include_authorized_operations": False})
    return next(x.member_epoch for x in d.groups[0].members if x.member_id == member.member_id)


def test_delete_groups_drops_a_share_groups_state_for_good(tmp_path: Path) -> None:
    with serving_broker(tmp_path / "logs", **SHORT) as info:
        m = started(info.bootstrap, 2)
        assert acquired(m.fetch(max_wait_ms=5000)) == [(0, 1, 1)]
        assert ack_codes(m.acknowledge([(0, 1, ACCEPT)])) == [0]

        def delete() -> int:
            r = m.conn.request(ApiKey.DELETE_GROUPS, 2, {"groups_names": ["sg"]})
            return r.results[0].error_code

        assert delete() == ErrorCode.NON_EMPTY_GROUP
        assert m.heartbeat(-1).error_code == 0
        assert delete() == 0
        assert delete() == ErrorCode.GROUP_ID_NOT_FOUND
        m.close()
    with serving_broker(tmp_path / "logs", **SHORT) as info:
        produce(info.bootstrap, 1)  # offset 2; a new group starts at the end (latest)
        again = Member(info.bootstrap)
        again.join()
        assert again.fetch(max_wait_ms=300).error_code == 0
        produce(info.bootstrap, 1)
        assert acquired(again.fetch(max_wait_ms=5000)) == [(3, 3, 1)]


def test_kill_9_after_an_acknowledgement_is_answered_redelivers_only_the_rest(
        tmp_path: Path) -> None:
    """The acknowledgement is in the log before its answer: a kill -9 right after the answer
    loses none of it, and what was only acquired comes back."""
    from pybroker.testing import BrokerProcess
    log_dir = tmp_path / "logs"
    bp = BrokerProcess(log_dir, **SHORT).start()
    try:
        m = started(bp.bootstrap, 10)
        assert acquired(m.fetch(max_wait_ms=5000)) == [(0, 9, 1)]
        assert ack_codes(m.acknowledge([(0, 4, ACCEPT), (5, 5, REJECT)])) == [0]
        topic_id = m.topic_id
        bp.kill()
        m.close()
        bp = BrokerProcess(log_dir, **SHORT).start()
        again = Member(bp.bootstrap)
        again.join()
        assert again.topic_id == topic_id
        assert acquired(again.fetch(max_wait_ms=5000)) == [(6, 9, 2)]
    finally:
        if bp.proc is not None and bp.proc.poll() is None:
            bp.kill()


def test_kill_9_right_after_the_first_delivery_keeps_the_start_it_was_delivered_from(
        tmp_path: Path) -> None:
    """The share-partition's start (latest: the high watermark when first fetched) is
    written before the first record is handed out from it. A ShareFetch that starts the
    share-partition and long-polls gets records produced meanwhile; killed -9 right after,
    with nothing acknowledged and no lock expired (a long lock), the broker must find that
    start again: else it starts at the new high watermark and the delivered records never
    come back (CI, 2026-12-06: confluent's ShareConsumer got nothing after a restart)."""
    import threading

    from pybroker.testing import BrokerProcess
    log_dir = tmp_path / "logs"
    settings = {**SHORT, "group.share.record.lock.duration.ms": "60000"}
    bp = BrokerProcess(log_dir, **settings).start()
    try:
        enable_share_groups(bp.bootstrap)
        create_topic(bp.bootstrap, "q")
        m = Member(bp.bootstrap)
        m.join()
        answers: list[object] = []
        waiting = threading.Thread(
            target=lambda: answers.append(m.fetch(max_wait_ms=30_000)), daemon=True)
        waiting.start()  # epoch 0: this fetch starts the share-partition, then waits
        produced, deadline = 0, time.monotonic() + 30
        while waiting.is_alive() and time.monotonic() < deadline:
            produce(bp.bootstrap, 1)  # one record at a time, until the fetch has some
            produced += 1
        waiting.join(1)
        assert answers and acquired(answers[0]), "the waiting ShareFetch got nothing"
        first, _, count = acquired(answers[0])[0]  # first: the high watermark it started at
        assert count == 1
        bp.kill()
        m.close()
        bp = BrokerProcess(log_dir, **settings).start()
        again = Member(bp.bootstrap)
        again.join()
        # nothing was acknowledged: every record from the start first chosen comes back
        assert acquired(again.fetch(max_wait_ms=5000)) == [(first, produced - 1, 1)]
    finally:
        if bp.proc is not None and bp.proc.poll() is None:
            bp.kill()


def describe_members(member: Member) -> tuple[str, int, dict[str, tuple[int, list[int]]]]:
    """(state, group epoch, member id -> (member epoch, partitions)) as ShareGroupDescribe
    tells it."""
    d = member.conn.request(ApiKey.SHARE_GROUP_DESCRIBE, 1, {
        "group_ids": [member.group], "include_authorized_operations": False}).groups[0]
    assert d.error_code == 0, ErrorCode(d.error_code).name
    return d.group_state, d.group_epoch, {
        x.member_id: (x.member_epoch, [p for t in x.assignment.topic_partitions
                                       for p in t.partitions]) for x in d.members}


def test_a_restart_resumes_membership_and_a_member_that_never_returns_expires(
        tmp_path: Path) -> None:
    """Membership is in __consumer_offsets: after a kill -9 the group is described as it was
    (epochs, members, assignments), a member goes on heartbeating at its epoch, and one that
    never comes back is removed a session timeout after the restart."""
    from pybroker.testing import BrokerProcess
    config = {**SHORT, "group.share.session.timeout.ms": "6000",
              "group.share.min.session.timeout.ms": "6000"}
    log_dir = tmp_path / "logs"
    bp = BrokerProcess(log_dir, **config).start()
    try:
        a = started(bp.bootstrap, 0)
        b = Member(bp.bootstrap)
        b.join()
        leaver = Member(bp.bootstrap)
        leaver.join()
        assert leaver.heartbeat(-1).error_code == 0  # the group epoch is 4 now
        assert a.heartbeat(1).member_epoch == 4
        assert b.heartbeat(2).member_epoch == 4
        before = describe_members(a)
        assert before == ("Stable", 4, {a.member_id: (4, [0]), b.member_id: (4, [0])})
        bp.kill()
        bp = BrokerProcess(log_dir, **config).start()
        a.reconnect(bp.bootstrap)
        assert describe_members(a) == before
        r = a.heartbeat(4)
        assert (r.error_code, r.member_epoch) == (0, 4)
        # b never comes back: its session runs out after the restart, a's does not
        deadline = time.monotonic() + 30
        epoch, after = 4, before
        while b.member_id in after[2] and time.monotonic() < deadline:
            r = a.heartbeat(epoch)
            assert r.error_code == 0, ErrorCode(r.error_code).name
            epoch = r.member_epoch
            after = describe_members(a)
            time.sleep(0.2)
        assert after == ("Stable", 5, {a.member_id: (5, [0])})
        # share sessions are not durable (nor in Kafka): the old one is gone, a new one opens
        assert a.fetch().error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
        a.epoch = 0
        assert a.fetch().error_code == 0
    finally:
        if bp.proc is not None and bp.proc.poll() is None:
            bp.kill()
