"""The trio façade over a real Broker (real logs, no sockets), with trio's autojump clock.

The coordinator's clock is pointed at trio's, so session timeouts pass in virtual time.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, AsyncIterator

import pytest
import trio

from protocol.errors import ErrorCode as E
from pybroker.broker import Broker
from pybroker.coordinator.group_coordinator import OFFSETS_TOPIC
from pybroker.coordinator.group_records import OffsetAndMetadata
from pybroker.coordinator.group_state import JoinRequest, JoinResult, SyncRequest
from pybroker.replica.partition import FollowerState
from pybroker.replica.manager import AppendResult
from tests.helpers import broker_config

RANGE = (("range", b"meta"),)


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path / "logs"


@pytest.fixture
async def broker(log_dir: Path) -> AsyncIterator[Broker]:
    b = Broker(broker_config(log_dir, group_min_session_timeout_ms="1000"))
    b.groups._clock = lambda: int(trio.current_time() * 1000)
    await b.topics.create_topic("t", 2, 1, {})
    yield b
    b.close()


def join_request(member_id: str = "", **kw: Any) -> JoinRequest:
    return JoinRequest("g", member_id, "consumer", RANGE, kw.pop("session", 2000),
                       kw.pop("rebalance", 5000), client_id="c", **kw)


async def test_join_waits_for_the_rebalance_and_sessions_expire(broker: Broker,
                                                                autojump_clock: Any) -> None:
    groups = broker.groups
    async with trio.open_nursery() as nursery:
        await nursery.start(groups.run)
        a = await groups.join(join_request())
        assert (a.error, a.generation_id) == (E.NONE, 1)
        assert (await groups.sync(SyncRequest("g", a.member_id, 1, {a.member_id: b"A"}))
                ).assignment == b"A"
        results: dict[str, JoinResult] = {}

        async def join(name: str, member_id: str = "") -> None:
            results[name] = await groups.join(join_request(member_id))

        nursery.start_soon(join, "b")
        await trio.sleep(0.5)
        assert "b" not in results  # waiting for a to rejoin
        assert await groups.heartbeat("g", a.member_id, None, 1) == E.REBALANCE_IN_PROGRESS
        nursery.start_soon(join, "a", a.member_id)
        await trio.sleep(0.1)
        assert results["a"].generation_id == results["b"].generation_id == 2
        assert results["a"].leader_id == a.member_id and len(results["a"].members) == 2
        # Nobody syncs or heartbeats: after the rebalance timeout both are gone, the group
        # is Empty, and that state was written to the log.
        await trio.sleep(6)
        group = groups.state.groups["g"]
        assert group.state.value == "Empty" and not group.members
        plog = broker.logs.get(OFFSETS_TOPIC, groups.partition_for("g"))
        assert plog is not None and plog.log_end_offset >= 2
        nursery.cancel_scope.cancel()


async def test_records_are_written_before_anyone_is_answered(broker: Broker,
                                                             autojump_clock: Any,
                                                             monkeypatch: Any) -> None:
    groups = broker.groups
    seen: list[list[bool]] = []
    append = broker.replicas.append

    def watching_append(*args: Any, **kwargs: Any) -> AppendResult:
        seen.append([w.event.is_set() for w in groups._waiters.values()])
        return append(*args, **kwargs)

    monkeypatch.setattr(broker.replicas, "append", watching_append)
    async with trio.open_nursery() as nursery:
        await nursery.start(groups.run)
        a = await groups.join(join_request())
        await groups.sync(SyncRequest("g", a.member_id, 1, {a.member_id: b"A"}))
        nursery.cancel_scope.cancel()
    assert seen and not any(any(flags) for flags in seen)


async def test_a_member_answered_after_a_slow_write_gets_its_session_from_the_answer(
        broker: Broker, autojump_clock: Any, monkeypatch: Any) -> None:
    """The leader's SyncGroup is answered once its snapshot is written; on a cluster a slow
    follower can hold that write past session.timeout.ms (here 5 s against 2 s). The member
    cannot heartbeat meanwhile, so it must not expire, and its session runs from the answer."""
    groups = broker.groups
    append = groups._append

    async def slow_append(partition: int, batch: bytes) -> Any:
        await trio.sleep(5)
        return await append(partition, batch)

    async with trio.open_nursery() as nursery:
        await nursery.start(groups.run)
        a = await groups.join(join_request())
        monkeypatch.setattr(groups, "_append", slow_append)
        synced = await groups.sync(SyncRequest("g", a.member_id, 1, {a.member_id: b"A"}))
        assert (synced.error, synced.assignment) == (E.NONE, b"A")
        members = groups.state.groups["g"].members
        assert a.member_id in members
        await trio.sleep(1.9)
        assert a.member_id in members
        await trio.sleep(0.2)  # 2 s after the answer, with no heartbeat: gone
        assert a.member_id not in members
        nursery.cancel_scope.cancel()


async def test_failed_append_is_reported_and_not_applied(broker: Broker, autojump_clock: Any,
                                                         monkeypatch: Any) -> None:
    groups = broker.groups
    monkeypatch.setattr(broker.replicas, "append",
                        lambda *a, **k: AppendResult(E.NOT_LEADER_OR_FOLLOWER))
    value = OffsetAndMetadata(5, "", 0)
    assert await groups.commit_offsets("g", "", None, -1, {("t", 0): value}) == \
        {("t", 0): E.NOT_COORDINATOR}
    assert groups.fetch_offsets("g", None) == (E.NONE, [])
    async with trio.open_nursery() as nursery:
        await nursery.start(groups.run)
        a = await groups.join(join_request())
        synced = await groups.sync(SyncRequest("g", a.member_id, 1, {a.member_id: b"A"}))
        assert synced.error == E.NOT_COORDINATOR
        # The group could not be stored as Stable, so it rebalances.
        assert groups.state.groups["g"].state.value == "PreparingRebalance"
        nursery.cancel_scope.cancel()


async def test_restart_loads_offsets_and_groups(broker: Broker, log_dir: Path) -> None:
    groups = broker.groups
    value = OffsetAndMetadata(42, "meta", 1)
    assert await groups.commit_offsets("solo", "", None, -1, {("t", 1): value}) == \
        {("t", 1): E.NONE}
    await groups.commit_offsets("solo", "", None, -1, {("t", 0): OffsetAndMetadata(7, "", 1)})
    assert await groups.delete_groups(["solo"]) == {"solo": E.NONE}
    await groups.commit_offsets("kept", "", None, -1, {("t", 0): value})
    broker.close()
    again = Broker(broker_config(log_dir))
    try:
        assert again.groups.fetch_offsets("kept", None) == (E.NONE, [("t", 0, value)])
        assert "solo" not in again.groups.state.groups
        assert [g.group_id for g in again.groups.list_groups()] == ["kept"]
    finally:
        again.close()


async def test_offsets_topic_is_created_on_first_use(broker: Broker) -> None:
    """The first ask answers at once that there is no coordinator yet, and has the topic
    created in the background (Kafka 4.1.1's FindCoordinator); the next names the leader."""
    assert OFFSETS_TOPIC not in broker.metadata.image.topics
    async with trio.open_nursery() as nursery:
        code, node, _, _ = await broker.groups.coordinator_for("g")
        assert (code, node) == (E.COORDINATOR_NOT_AVAILABLE, -1)
        assert OFFSETS_TOPIC not in broker.metadata.image.topics
        await nursery.start(broker.groups.topic.run)
        with trio.fail_after(10):
            while OFFSETS_TOPIC not in broker.metadata.image.topics:
                await trio.sleep(0.01)
        nursery.cancel_scope.cancel()
    code, node, host, port = await broker.groups.coordinator_for("g")
    assert code == E.NONE and node == broker.node_id
    info = broker.metadata.image.topics[OFFSETS_TOPIC]
    assert info.internal and len(info.partitions) == broker.config.offsets_topic_num_partitions
    assert info.configs["cleanup.policy"] == "compact"


async def test_deleting_a_topic_drops_its_offsets(broker: Broker) -> None:
    groups = broker.groups
    await groups.commit_offsets("g", "", None, -1, {("t", 0): OffsetAndMetadata(3, "", 0)})
    assert await broker.topics.delete_topic("t") == E.NONE
    assert groups.fetch_offsets("g", None) == (E.NONE, [])


async def test_a_commit_is_answered_and_applied_only_once_committed(
        broker: Broker, autojump_clock: Any) -> None:
    """The coordinator waits for the high watermark of __consumer_offsets (a follower in the
    ISR is the test double): until it passes the records, nothing is answered or applied;
    after offsets.commit.timeout.ms the commit fails, retriably, and is not applied."""
    groups = broker.groups
    assert await groups.ensure_topic() == E.NONE
    partition = groups.partition_for("g")
    code, part = broker.replicas.leader_partition(OFFSETS_TOPIC, partition)
    assert code == E.NONE and part is not None
    part.replicas, part.followers = (0, 1), {1: FollowerState()}
    part.set_isr([0, 1])
    value = OffsetAndMetadata(5, "", 0)

    start = trio.current_time()
    assert await groups.commit_offsets("g", "", None, -1, {("t", 0): value}) == \
        {("t", 0): E.COORDINATOR_NOT_AVAILABLE}
    assert trio.current_time() - start == pytest.approx(
        broker.config.offsets_commit_timeout_ms / 1000)
    assert groups.fetch_offsets("g", None) == (E.NONE, [])

    answered: dict = {}

    async def commit() -> None:
        answered.update(await groups.commit_offsets("g", "", None, -1, {("t", 0): value}))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(commit)
        await trio.sleep(1)
        assert not answered and groups.fetch_offsets("g", None) == (E.NONE, [])
        broker.replicas.read(OFFSETS_TOPIC, partition, part.log.log_end_offset, 1 << 20,
                             replica_id=1)  # the follower has it all: committed
    assert answered == {("t", 0): E.NONE}
    assert groups.fetch_offsets("g", None) == (E.NONE, [("t", 0, value)])


def _group_on_another_partition(groups: Any, other_than: int) -> str:
    return next(g for g in (f"other-{i}" for i in range(1000))
                if groups.partition_for(g) != other_than)


async def test_the_coordinator_follows_the_leadership_of_its_partitions(broker: Broker) -> None:
    """Another broker elected leader of the group's __consumer_offsets partition (the store's
    delta): the group is unloaded and its requests answered NOT_COORDINATOR; leadership back:
    the group is loaded again from the log. Groups of other partitions never notice."""
    groups = broker.groups
    value = OffsetAndMetadata(5, "", 0)
    assert await groups.commit_offsets("g", "", None, -1, {("t", 0): value}) == \
        {("t", 0): E.NONE}
    index = groups.partition_for("g")
    other = _group_on_another_partition(groups, index)
    assert await groups.commit_offsets(other, "", None, -1, {("t", 1): value}) == \
        {("t", 1): E.NONE}

    await broker.metadata.alter_partition(OFFSETS_TOPIC, index, leader=1, leader_epoch=1)
    assert index not in groups.owned
    assert groups.fetch_offsets("g", None) == (E.NOT_COORDINATOR, [])
    assert await groups.commit_offsets("g", "", None, -1, {("t", 0): value}) == \
        {("t", 0): E.NOT_COORDINATOR}
    assert (await groups.join(join_request())).error == E.NOT_COORDINATOR
    assert await groups.heartbeat("g", "m", None, 1) == E.NOT_COORDINATOR
    assert groups.describe_group("g").error == E.NOT_COORDINATOR
    assert groups.fetch_offsets(other, None) == (E.NONE, [("t", 1, value)])

    await broker.metadata.alter_partition(OFFSETS_TOPIC, index, leader=0, leader_epoch=2)
    assert index in groups.owned
    assert groups.fetch_offsets("g", None) == (E.NONE, [("t", 0, value)])  # from the log
