"""acks=all waits for the high watermark (Kafka's DelayedProduce), over a real Broker (real
logs, no sockets) with trio's autojump clock. A second replica in the ISR is the test double:
it exists only as the partition's follower state, moved by replica fetches."""
from __future__ import annotations

from pathlib import Path
from typing import Any, AsyncIterator

import pytest
import trio

from protocol.errors import ErrorCode as E
from pybroker.broker import Broker
from pybroker.replica.purgatory import Watch
from pybroker.replica.partition import FollowerState, Partition
from pybroker.replica.manager import AppendResult
from tests.helpers import broker_config
from tests.storage.util import batch


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    b = Broker(broker_config(tmp_path / "logs"))
    await b.topics.create_topic("t", 1, 1, {"min.insync.replicas": "2"})
    yield b
    b.close()


def _with_a_follower(broker: Broker) -> Partition:
    """The partition led here, with replica 1 in its ISR (known to nobody else)."""
    code, part = broker.replicas.leader_partition("t", 0)
    assert code == E.NONE and part is not None
    part.replicas = (0, 1)
    part.followers = {1: FollowerState()}
    part.set_isr([0, 1])
    return part


def _append(broker: Broker, topic: str = "t") -> list[tuple[tuple[str, int], AppendResult]]:
    result = broker.replicas.append(topic, 0, batch(1), acks=-1)
    assert result.error == E.NONE, result
    return [((topic, 0), result)]


async def test_one_broker_answers_at_once_without_yielding(broker: Broker) -> None:
    await broker.topics.create_topic("solo", 1, 1, {})
    appended = _append(broker, "solo")
    with trio.CancelScope() as scope:
        scope.cancel()  # any checkpoint would raise Cancelled
        await broker.replicas.wait_for_commit(appended, 30_000)
    assert appended[0][1].error == E.NONE


async def test_timeout_is_request_timed_out(broker: Broker, autojump_clock: Any) -> None:
    part = _with_a_follower(broker)
    appended = _append(broker)
    start = trio.current_time()
    await broker.replicas.wait_for_commit(appended, 1500)
    assert appended[0][1].error == E.REQUEST_TIMED_OUT
    assert trio.current_time() - start == pytest.approx(1.5)
    assert part.log.log_end_offset == 1  # written all the same, as in Kafka
    assert part.high_watermark == 0


async def test_a_follower_fetch_commits_and_answers(broker: Broker, autojump_clock: Any) -> None:
    _with_a_follower(broker)
    appended = _append(broker)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(broker.replicas.wait_for_commit, appended, 30_000)
        await trio.sleep(1)
        assert appended[0][1].error == E.NONE  # still waiting: not decided yet
        # The follower fetches from the log end: it has the batch, which is now committed.
        broker.replicas.read("t", 0, appended[0][1].end_offset, 1 << 20, replica_id=1)
    assert appended[0][1].error == E.NONE
    assert trio.current_time() == pytest.approx(1)


async def test_an_isr_shrink_below_min_isr_commits_nothing(broker: Broker,
                                                            autojump_clock: Any) -> None:
    """The follower falls out before it has the batch. Before Kafka 3.7 the leader alone
    committed it and answered NOT_ENOUGH_REPLICAS_AFTER_APPEND; since KAFKA-15583 the high
    watermark stays below min.insync.replicas, so the produce waits and times out."""
    part = _with_a_follower(broker)
    appended = _append(broker)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(broker.replicas.wait_for_commit, appended, 5_000)
        await trio.sleep(1)
        part.set_isr([0])  # the follower fell out: the leader alone may not commit
        broker.purgatory.notify(("t", 0), Watch.HIGH_WATERMARK)
    assert appended[0][1].error == E.REQUEST_TIMED_OUT
    assert part.high_watermark == 0


async def test_isr_shrink_after_the_commit_is_not_enough_replicas_after_append(
        broker: Broker) -> None:
    """The batch was committed, then the ISR shrank before the produce was answered."""
    part = _with_a_follower(broker)
    appended = _append(broker)
    broker.replicas.read("t", 0, appended[0][1].end_offset, 1 << 20, replica_id=1)
    assert part.high_watermark == appended[0][1].end_offset
    part.set_isr([0])
    await broker.replicas.wait_for_commit(appended, 5_000)
    assert appended[0][1].error == E.NOT_ENOUGH_REPLICAS_AFTER_APPEND


async def test_too_small_an_isr_writes_nothing(broker: Broker) -> None:
    part = _with_a_follower(broker)
    part.set_isr([0])
    result = broker.replicas.append("t", 0, batch(1), acks=-1)
    assert result.error == E.NOT_ENOUGH_REPLICAS
    assert part.log.log_end_offset == 0
    assert broker.replicas.append("t", 0, batch(1), acks=1).error == E.NONE


async def test_a_consumer_fetch_waits_for_the_high_watermark(broker: Broker,
                                                             autojump_clock: Any) -> None:
    """Consumers wait on commitment, followers on the log end."""
    _with_a_follower(broker)
    woken: dict[Watch, float] = {}

    async def wait(watch: Watch) -> None:
        if await broker.purgatory.wait_any([("t", 0)], 10, watch):
            woken[watch] = trio.current_time()

    async with trio.open_nursery() as nursery:
        for watch in Watch:
            nursery.start_soon(wait, watch)
        await trio.sleep(1)
        broker.replicas.append("t", 0, batch(1), acks=1)  # log end moves, nothing committed
        await trio.sleep(1)
        assert set(woken) == {Watch.LOG_END}
        broker.replicas.read("t", 0, 1, 1 << 20, replica_id=1)
    assert woken == {Watch.LOG_END: pytest.approx(1), Watch.HIGH_WATERMARK: pytest.approx(2)}


async def test_a_stale_followers_fetch_commits_nothing(broker: Broker) -> None:
    """Only a fetch from the current leader epoch whose log agrees with the leader's says
    what the follower holds: one from another epoch (fenced, or unknown here) or one told to
    truncate first (it holds records past the end of its last epoch here) leaves the high
    watermark where it was."""
    part = _with_a_follower(broker)
    epoch = part.leader_epoch
    end = _append(broker)[0][1].end_offset
    future = broker.replicas.read("t", 0, end, 1 << 20, replica_id=1,
                                  current_leader_epoch=epoch + 1, last_fetched_epoch=epoch)
    assert future.error == E.UNKNOWN_LEADER_EPOCH
    assert part.high_watermark == 0
    diverging = broker.replicas.read("t", 0, end + 3, 1 << 20, replica_id=1,
                                     current_leader_epoch=epoch, last_fetched_epoch=epoch)
    assert diverging.diverging_epoch == (epoch, end)
    assert part.high_watermark == 0
    agreed = broker.replicas.read("t", 0, end, 1 << 20, replica_id=1,
                                  current_leader_epoch=epoch, last_fetched_epoch=epoch)
    assert agreed.error == E.NONE and agreed.diverging_epoch is None
    assert part.high_watermark == end
