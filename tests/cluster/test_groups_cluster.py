"""Consumer groups on a three-broker cluster with `__consumer_offsets` at replication factor 3
(issue #35 §1): members leave, join and die while a rebalance's group snapshot is being
written, and the members left must end up owning every partition.

On a cluster the coordinator's write of a group snapshot waits for every in-sync replica, so
membership can move on while it is in flight; a written snapshot once put a departed member
back for good. The window is held open on purpose: a follower of the group's partition is
paused (SIGSTOP) while the round's snapshot is written, the change under test lands, and the
follower resumes. DescribeGroups, answered from memory, says when the write has started (the
leader's SyncGroup made the group Stable, with the round's members) and when the leave has
landed. No stock client's leave lands inside the write (see `in_window`), so the raw-protocol
tests place the leave exactly, and the stock clients' tests guard the rounds around it.
"""
from __future__ import annotations

import struct
import threading
from contextlib import contextmanager
from typing import Any, Iterator

import pytest

from protocol.api_keys import ApiKey as K
from protocol.codec import decode_response
from protocol.errors import ErrorCode as E
from pybroker.coordinator.internal_topic import partition_for
from tests.cluster.brokers import Cluster, create_topic, running_cluster
from tests.integration.group_harness import Member
from tests.integration.raw import RawConnection

OFFSETS = "__consumer_offsets"
OFFSETS_PARTITIONS = 5
PARTITIONS = 6
JOIN_V, SYNC_V, HEARTBEAT_V, LEAVE_V, DESCRIBE_V, FIND_V, COMMIT_V = 7, 5, 4, 4, 5, 3, 8


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, zk_server: Any) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("groups"), zk_server.connect, **{
            "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
            "group.min.session.timeout.ms": "1000",
            # A paused follower holds a write open: neither dropped from the ISR nor timed
            # out, nor its ZooKeeper session lost (10 s: the test server's most), while a
            # round starts and the change under test lands (a few seconds).
            "replica.lag.time.max.ms": "20000",
            "offsets.commit.timeout.ms": "30000",
            "zookeeper.session.timeout.ms": "10000",
            "group.initial.rebalance.delay.ms": "0"}) as c:
        create_topic(c, "gt", partitions=PARTITIONS)
        yield c


# -- talking to the coordinator -------------------------------------------------------------------

def _string(text: str) -> bytes:
    return struct.pack(">h", len(text)) + text.encode()


def _subscription(topic: str) -> bytes:
    return struct.pack(">hi", 0, 1) + _string(topic) + struct.pack(">i", -1)


def coordinator(cluster: Cluster, group: str) -> tuple[str, int]:
    """(bootstrap of the group's coordinator, its follower to pause), once the coordinator
    serves (a new __consumer_offsets answers COORDINATOR_NOT_AVAILABLE while it is created)
    and the group's partition has its full ISR."""
    def found() -> Any:
        with RawConnection(cluster.bootstrap().split(",")[0]) as conn:
            answer = conn.request(K.FIND_COORDINATOR, FIND_V, {"key": group, "key_type": 0})
        return answer if answer is not None and answer.error_code == E.NONE else None
    answer = cluster.wait_until(found, 30, f"a coordinator for {group}")
    partition = partition_for(group, OFFSETS_PARTITIONS)
    cluster.wait_isr(OFFSETS, partition, set(cluster.ids))
    assert cluster.state(OFFSETS, partition)["leader"] == answer.node_id
    leader = cluster.leader(OFFSETS, partition)  # its node
    follower = next(n for n in cluster.ids if n != leader)
    bootstrap = f"{answer.host}:{answer.port}"
    # Named before it has loaded the partition, a coordinator answers NOT_COORDINATOR for a
    # moment (issue #35 §2): wait until it describes the group.
    cluster.wait_until(lambda: describe(bootstrap, group), 30, f"{group}'s coordinator to serve")
    return bootstrap, follower


def describe(bootstrap: str, group: str) -> tuple[str, list[str]]:
    with RawConnection(bootstrap) as conn:
        answer = conn.request(K.DESCRIBE_GROUPS, DESCRIBE_V,
                              {"groups": [group], "include_authorized_operations": False})
    assert answer is not None
    g = answer.groups[0]
    assert g.error_code == E.NONE, g
    return g.group_state, sorted(m.member_id for m in g.members)


@contextmanager
def follower_paused(cluster: Cluster, node: int) -> Iterator[None]:
    """A follower of the group's partition stopped: a snapshot write waits until it resumes
    (well within replica.lag.time.max.ms and offsets.commit.timeout.ms, raised for this)."""
    cluster.pause(node)
    try:
        yield
    finally:
        cluster.resume(node)


class RawMember:
    """One member speaking the group protocol itself, on two connections: one for requests
    that wait (JoinGroup, SyncGroup), one for those answered at once."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.group, self.topic = group, topic
        self.waiting = RawConnection(bootstrap, timeout=30, client_id="raw-member")
        self.prompt = RawConnection(bootstrap, timeout=30, client_id="raw-member")
        self.spare = RawConnection(bootstrap, timeout=30, client_id="raw-member")
        self.member_id = ""
        self.generation = -1

    def close(self) -> None:
        self.waiting.close()
        self.prompt.close()
        self.spare.close()

    def _join_body(self) -> dict[str, Any]:
        return {"group_id": self.group, "session_timeout_ms": 10000,
                "rebalance_timeout_ms": 10000, "member_id": self.member_id,
                "group_instance_id": None, "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": _subscription(self.topic)}],
                "reason": None}

    def send_join(self, conn: RawConnection | None = None) -> None:
        """JoinGroup on `conn` (the waiting connection unless another request waits there)."""
        conn = conn or self.waiting
        if not self.member_id:  # JoinGroup v4+: the member id first (MEMBER_ID_REQUIRED)
            first = conn.request(K.JOIN_GROUP, JOIN_V, self._join_body())
            assert first is not None and first.error_code == E.MEMBER_ID_REQUIRED
            self.member_id = first.member_id
        conn.request(K.JOIN_GROUP, JOIN_V, self._join_body(), expect_response=False)

    def joined(self, conn: RawConnection | None = None) -> Any:
        answer = self._receive(K.JOIN_GROUP, JOIN_V, conn)
        assert answer.error_code == E.NONE, answer
        self.generation = answer.generation_id
        return answer

    def send_sync(self, assignments: dict[str, bytes]) -> None:
        self.waiting.request(K.SYNC_GROUP, SYNC_V, {
            "group_id": self.group, "generation_id": self.generation,
            "member_id": self.member_id, "group_instance_id": None,
            "protocol_type": "consumer", "protocol_name": "range",
            "assignments": [{"member_id": m, "assignment": a}
                            for m, a in assignments.items()]}, expect_response=False)

    def synced(self) -> Any:
        return self._receive(K.SYNC_GROUP, SYNC_V)

    def _receive(self, api: int, version: int, conn: RawConnection | None = None) -> Any:
        _, answer = decode_response(api, version, (conn or self.waiting).read_frame())
        return answer

    def commit(self, generation: int, offset: int) -> E:
        answer = self.prompt.request(K.OFFSET_COMMIT, COMMIT_V, {
            "group_id": self.group, "generation_id_or_member_epoch": generation,
            "member_id": self.member_id, "group_instance_id": None,
            "topics": [{"name": self.topic, "partitions": [{
                "partition_index": 0, "committed_offset": offset,
                "committed_leader_epoch": -1, "committed_metadata": ""}]}]})
        assert answer is not None
        return E(answer.topics[0].partitions[0].error_code)

    def heartbeat(self) -> E:
        answer = self.prompt.request(K.HEARTBEAT, HEARTBEAT_V, {
            "group_id": self.group, "generation_id": self.generation,
            "member_id": self.member_id, "group_instance_id": None})
        assert answer is not None
        return E(answer.error_code)

    def leave(self) -> E:
        answer = self.prompt.request(K.LEAVE_GROUP, LEAVE_V, {
            "group_id": self.group,
            "members": [{"member_id": self.member_id, "group_instance_id": None,
                         "reason": None}]})
        assert answer is not None
        assert answer.error_code == E.NONE, answer
        return E(answer.members[0].error_code)


def two_joined(cluster: Cluster, bootstrap: str, a: RawMember, b: RawMember) -> None:
    """`a` alone in a first generation, then `a` (leader) and `b` joined into the next:
    the group in CompletingRebalance, no SyncGroup sent yet."""
    a.send_join()
    a.joined()
    a.send_sync({a.member_id: b""})
    assert a.synced().error_code == E.NONE
    b.send_join()  # parks until the leader rejoins
    cluster.wait_until(lambda: describe(bootstrap, a.group)[0] == "PreparingRebalance", 10,
                       "the second member's join to start a rebalance")
    a.send_join()
    assert a.joined().leader == a.member_id
    b.joined()
    assert a.generation == b.generation


# -- the window, held open with raw requests ------------------------------------------------------

def test_a_leave_during_the_snapshot_write_starts_a_rebalance(cluster: Cluster) -> None:
    """Two members in generation N; the leader's SyncGroup writes the snapshot (the follower
    paused, so it waits); the other member leaves meanwhile. Once the write completes, the
    leader must hear REBALANCE_IN_PROGRESS and rejoin alone: without the fix the written
    snapshot put the departed member back and the heartbeat said NONE for ever."""
    group = "raw-window"
    bootstrap, follower = coordinator(cluster, group)
    a, b = RawMember(bootstrap, group, "gt"), RawMember(bootstrap, group, "gt")
    try:
        two_joined(cluster, bootstrap, a, b)
        b.send_sync({})
        with follower_paused(cluster, follower):
            a.send_sync({a.member_id: b"a", b.member_id: b"b"})
            cluster.wait_until(lambda: describe(bootstrap, group)[0] == "Stable", 10,
                               "the leader's SyncGroup (its snapshot now being written)")
            assert b.leave() == E.NONE
            assert describe(bootstrap, group) == ("PreparingRebalance", [a.member_id])
        # Both syncs were decided before the leave and are released once the write
        # completes, as Kafka 4's coordinator defers its responses to the commit.
        assert a.synced().error_code == E.NONE
        assert b.synced().error_code == E.NONE
        assert describe(bootstrap, group) == ("PreparingRebalance", [a.member_id])
        assert a.heartbeat() == E.REBALANCE_IN_PROGRESS
        before = a.generation
        a.send_join()
        rejoined = a.joined()
        assert rejoined.generation_id == before + 1
        assert [m.member_id for m in rejoined.members] == [a.member_id]
    finally:
        a.close()
        b.close()


def test_a_rebalance_completed_during_the_snapshot_write_judges_commits(
        cluster: Cluster) -> None:
    """Issue #35 §3 on a cluster: while generation N's snapshot is written, the leader
    rejoins and the group completes generation N+1. Commits are then judged by N+1, as
    Kafka does: N is ILLEGAL_GENERATION, N+1 before its SyncGroup REBALANCE_IN_PROGRESS.
    Without the fix the written snapshot took the group back to Stable at N, and a closing
    member's commit at N was accepted."""
    group = "raw-commits"
    bootstrap, follower = coordinator(cluster, group)
    a, b = RawMember(bootstrap, group, "gt"), RawMember(bootstrap, group, "gt")
    try:
        two_joined(cluster, bootstrap, a, b)
        old = a.generation
        with follower_paused(cluster, follower):
            a.send_sync({a.member_id: b"a", b.member_id: b"b"})
            cluster.wait_until(lambda: describe(bootstrap, group)[0] == "Stable", 10,
                               "the leader's SyncGroup (its snapshot now being written)")
            a.send_join(a.spare)  # the leader rejoins: a rebalance
            cluster.wait_until(
                lambda: describe(bootstrap, group)[0] == "PreparingRebalance", 10,
                "the leader's rejoin to start a rebalance")
            b.send_join()
            assert a.joined(a.spare).generation_id == old + 1
            assert b.joined().generation_id == old + 1
        assert a.synced().error_code == E.NONE  # decided before the rejoin, released now
        assert describe(bootstrap, group)[0] == "CompletingRebalance"
        assert b.commit(old, 1) == E.ILLEGAL_GENERATION
        assert b.commit(old + 1, 2) == E.REBALANCE_IN_PROGRESS
        assert b.heartbeat() == E.NONE
    finally:
        a.close()
        b.close()


# -- stock clients leaving, joining and dying during rounds ---------------------------------------

def owned(members: list[Member]) -> list[int]:
    return sorted(p for m in members for p in m.assignment)


def settled(cluster: Cluster, bootstrap: str, group: str, members: list[Member]) -> None:
    """Every partition owned by exactly one of `members`, and the coordinator agrees on who
    is in the group."""
    def done() -> bool:
        state, ids = describe(bootstrap, group)
        return (state == "Stable" and len(ids) == len(members)
                and owned(members) == list(range(PARTITIONS)))
    try:
        cluster.wait_until(done, 30, f"{len(members)} member(s) owning every partition")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; coordinator: {describe(bootstrap, group)}; "
                             f"{[m.debug() for m in members]}") from None


def stable_with(bootstrap: str, group: str, members: int) -> bool:
    state, ids = describe(bootstrap, group)
    return state == "Stable" and len(ids) == members


def in_window(cluster: Cluster, bootstrap: str, group: str, follower: int,
              trigger: Any, during: Any, joined: int) -> None:
    """With the follower paused, start a round with `trigger` and wait until its snapshot
    is being written (the leader's SyncGroup made the group Stable with `joined` members;
    the write cannot complete); run `during`, then resume.

    A stock client's close cannot be counted on to land inside the write. The harness's
    kafka-python member sees SIGTERM only once its poll (5 s, see group_member.py) returns;
    kgo's Close waits for its group loop, in the SyncGroup. librdkafka sends its LeaveGroup
    at once, but on its coordinator connection, behind its own SyncGroup, and a broker reads
    a connection's next request only once it has answered the one before (Kafka mutes the
    channel). A follower's SyncGroup usually comes before the leader's (the leader fetches
    metadata and assigns first) and so waits for the write. Waiting here for the confluent
    member's leave (issue #31), 8 runs under load: it landed inside the write once (its
    SyncGroup had come after the leader's, and was answered at once), 5 times only after
    5.0 to 6.0 s, when the members, expired meanwhile (a defect since fixed: their sessions
    ran while their SyncGroup answers waited for the write), rejoined after librdkafka's
    SyncGroup timeout (session.timeout.ms + 3 s), and twice not within the 10 s."""
    with follower_paused(cluster, follower):
        trigger()
        cluster.wait_until(lambda: stable_with(bootstrap, group, joined), 30,
                           f"the round's SyncGroup with {joined} members (its snapshot now "
                           "being written)")
        during()


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_members_leave_join_and_die_during_rounds(cluster: Cluster, client: str) -> None:
    group = f"rounds-{client}"
    bootstrap, follower = coordinator(cluster, group)
    started: list[Member] = []

    def start() -> Member:
        # Not through the paused follower: a client's first connection there would hang.
        m = Member(client, cluster.bootstrap(exclude=(follower,)), "gt", group,
                   session_ms=2000, heartbeat_ms=200)
        started.append(m)
        return m
    try:
        live = [start(), start(), start()]
        settled(cluster, bootstrap, group, live)
        # A fourth joins; one of the three closes while that round is written (its LeaveGroup
        # lands once the write completes).
        leaving = live[0]
        stopping = threading.Thread(target=leaving.stop)
        newcomer: list[Member] = []
        in_window(cluster, bootstrap, group, follower,
                  trigger=lambda: newcomer.append(start()),
                  during=stopping.start, joined=4)
        stopping.join(30)
        live = live[1:] + newcomer
        settled(cluster, bootstrap, group, live)
        # Another joins and one dies (SIGKILL, no LeaveGroup) while that round is written:
        # its session expires, and the rest take its partitions.
        dying = live[0]
        newcomer.clear()
        in_window(cluster, bootstrap, group, follower,
                  trigger=lambda: newcomer.append(start()),
                  during=dying.kill, joined=4)
        live = live[1:] + newcomer
        settled(cluster, bootstrap, group, live)
    finally:
        for m in started:
            m.ensure_dead()


# -- franz-go, through compat/go's helper -----------------------------------------------------------

def _assignment(data: bytes) -> list[int]:
    """The partitions of a ConsumerProtocol Assignment (any version: topics come first)."""
    partitions: list[int] = []
    (topics,) = struct.unpack_from(">i", data, 2)
    at = 6
    for _ in range(max(topics, 0)):
        (length,) = struct.unpack_from(">h", data, at)
        at += 2 + length
        (count,) = struct.unpack_from(">i", data, at)
        at += 4
        partitions += struct.unpack_from(f">{count}i", data, at)
        at += 4 * count
    return partitions


def assigned_by_coordinator(bootstrap: str, group: str) -> tuple[str, int, list[int]]:
    """(state, members, the partitions the coordinator's stored assignments give them)."""
    with RawConnection(bootstrap) as conn:
        answer = conn.request(K.DESCRIBE_GROUPS, DESCRIBE_V,
                              {"groups": [group], "include_authorized_operations": False})
    assert answer is not None
    g = answer.groups[0]
    parts = sorted(p for m in g.members if m.member_assignment
                   for p in _assignment(m.member_assignment))
    return g.group_state, len(g.members), parts


def test_franz_go_members_leave_and_join_during_rounds(cluster: Cluster) -> None:
    """franz-go (kgo, cooperative-sticky) members: a fourth joins and one closes (kgo's Close
    leaves, once its SyncGroup is answered) as the round is written. The helper runs every member in one process, so none
    can be killed alone and kgo's session is fixed at 10 s: deaths are the Python clients'.
    Ownership is read from the coordinator's stored assignments (the helper reports values
    taken, not assignments). Its leave lands after the write, so this guards the rounds; the
    raw-protocol test catches the defect itself."""
    from compat.clients.franz_go import ADAPTER
    if ADAPTER.missing():
        pytest.skip(f"franz-go needs compat/go: {ADAPTER.missing()}")
    group = "rounds-franz-go"
    bootstrap, follower = coordinator(cluster, group)
    started: list[Any] = []

    def start() -> Any:
        m = ADAPTER.start_member(cluster.bootstrap(exclude=(follower,)), "gt", group)
        started.append(m)
        return m

    def settled(members: int) -> None:
        cluster.wait_until(
            lambda: assigned_by_coordinator(bootstrap, group)
            == ("Stable", members, list(range(PARTITIONS))), 30,
            f"{members} franz-go member(s) assigned every partition")
    try:
        live = [start(), start(), start()]
        settled(3)
        started.remove(live[0])
        stopping = threading.Thread(target=live[0].stop)
        in_window(cluster, bootstrap, group, follower, trigger=lambda: live.append(start()),
                  during=stopping.start, joined=4)
        stopping.join(30)
        settled(3)
    finally:
        for m in started:
            m.stop()
