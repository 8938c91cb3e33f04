"""The partition layer alone (a real log, no broker, no clock): leadership, the ISR, the high
watermark, epoch fencing and what an acks=all produce is told."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from protocol.errors import ErrorCode as E
from pybroker.cluster.image import BrokerInfo, MetadataImage
from pybroker.replica.isr import IsrUpkeep
from pybroker.replica.partition import Partition
from pybroker.storage.partition_log import PartitionLog
from tests.storage.util import SMALL, batch

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def plog(tmp_path: Path) -> PartitionLog:
    log = PartitionLog(tmp_path / "t-0", SMALL)
    yield log
    log.close()


def _append(part: Partition, n: int = 1) -> int:
    """Append n one-record batches as the leader; the log end after them."""
    for _ in range(n):
        part.log.append(batch(1), leader_epoch=part.leader_epoch)
    return part.log.log_end_offset


def test_alone_in_the_isr_the_high_watermark_follows_the_log_end(plog: PartitionLog) -> None:
    part = Partition("t", 0, plog, local_id=0)
    assert part.make_leader(0, [0], [0])
    end = _append(part, 3)
    assert plog.high_watermark == 0  # the log alone never moves it
    assert part.maybe_increment_high_watermark()
    assert plog.high_watermark == end
    assert not part.maybe_increment_high_watermark()  # nothing new


def test_the_high_watermark_is_the_smallest_log_end_over_the_isr(plog: PartitionLog) -> None:
    part = Partition("t", 0, plog, local_id=0)
    part.make_leader(0, [0, 1, 2], [0, 1, 2])
    end = _append(part, 4)
    assert not part.maybe_increment_high_watermark()  # followers unknown: nothing committed
    assert plog.high_watermark == 0
    assert not part.update_follower_fetch(1, 2, now_ms=10)  # 2 still unknown
    assert part.update_follower_fetch(2, 3, now_ms=10)
    assert plog.high_watermark == 2
    part.set_isr([0, 2])  # 1 dropped out: 2 alone decides with the leader
    assert plog.high_watermark == 3
    assert part.update_follower_fetch(2, end, now_ms=20)
    assert plog.high_watermark == end
    assert part.followers[2].last_caught_up_ms == 20
    assert part.followers[1].last_caught_up_ms == -1
    assert not part.update_follower_fetch(9, end, now_ms=30)  # not a replica: ignored


def test_the_high_watermark_never_moves_back(plog: PartitionLog) -> None:
    part = Partition("t", 0, plog, local_id=0)
    part.make_leader(0, [0, 1], [0])
    end = _append(part, 2)
    part.maybe_increment_high_watermark()
    part.set_isr([0, 1])  # a follower joins the ISR behind: the high watermark stays
    part.update_follower_fetch(1, 0, now_ms=1)
    assert plog.high_watermark == end


def test_a_new_epoch_is_recorded_where_it_starts_and_only_once(plog: PartitionLog) -> None:
    part = Partition("t", 0, plog, local_id=0)
    part.make_leader(0, [0], [0])
    end = _append(part, 2)
    assert not part.make_leader(0, [0], [0])  # the same leadership again: nothing new
    assert part.make_leader(3, [0], [0])
    assert plog.latest_epoch == 3
    assert plog.end_offset_for_epoch(0) == (0, end)


def test_epoch_fencing(plog: PartitionLog) -> None:
    part = Partition("t", 0, plog, local_id=0)
    part.make_leader(5, [0], [0])
    assert part.check_leader_epoch(-1) == E.NONE
    assert part.check_leader_epoch(5) == E.NONE
    assert part.check_leader_epoch(4) == E.FENCED_LEADER_EPOCH
    assert part.check_leader_epoch(6) == E.UNKNOWN_LEADER_EPOCH


def test_a_follower_does_not_move_its_high_watermark(plog: PartitionLog) -> None:
    part = Partition("t", 0, plog, local_id=0)
    part.make_leader(0, [0, 1], [0, 1])
    assert part.make_follower(1, 1, [0, 1])
    assert not part.is_leader
    _append(part)
    assert not part.maybe_increment_high_watermark()
    assert part.check_enough_replicas_reach_offset(1, 1) == (True, E.NOT_LEADER_OR_FOLLOWER)


def test_min_isr_before_and_after_the_append(plog: PartitionLog) -> None:
    part = Partition("t", 0, plog, local_id=0)
    part.make_leader(0, [0, 1], [0, 1])
    assert part.check_min_isr(2) == (E.NONE, None)
    code, message = part.check_min_isr(3)
    assert code == E.NOT_ENOUGH_REPLICAS and "Set(0, 1)" in message
    end = _append(part)
    assert part.check_enough_replicas_reach_offset(end, 2) == (False, E.NONE)
    part.update_follower_fetch(1, end, now_ms=1)
    assert part.check_enough_replicas_reach_offset(end, 2) == (True, E.NONE)
    end = _append(part)
    part.set_isr([0])  # the follower fell out before it had the new batch
    assert plog.high_watermark == end  # committed by the smaller ISR...
    # ...but no longer by min.insync.replicas of them, as Kafka answers
    assert part.check_enough_replicas_reach_offset(end, 2) == \
        (True, E.NOT_ENOUGH_REPLICAS_AFTER_APPEND)


def test_under_min_isr_the_high_watermark_stays(plog: PartitionLog) -> None:
    """KAFKA-15583: a leader alone in the ISR of three with min.insync.replicas 2 commits
    nothing, not even acks=1 writes; once a follower is back in the ISR the high watermark
    moves to what both hold."""
    min_isr = {"t": 2}
    part = Partition("t", 0, plog, local_id=0, min_isr_of=min_isr.__getitem__)
    part.make_leader(0, [0, 1, 2], [0, 1, 2])
    committed = _append(part, 2)
    part.update_follower_fetch(1, committed, now_ms=1)
    part.update_follower_fetch(2, committed, now_ms=1)
    assert plog.high_watermark == committed
    part.set_isr([0])  # both followers dropped out
    assert part.under_min_isr
    end = _append(part, 3)
    assert not part.maybe_increment_high_watermark()
    assert plog.high_watermark == committed
    assert not part.update_follower_fetch(1, end, now_ms=2)  # not in the ISR: no say
    assert plog.high_watermark == committed
    part.set_isr([0, 1])  # the leader's ISR expansion
    assert not part.under_min_isr and plog.high_watermark == end
    min_isr["t"] = 1  # a dynamic change: the ISR of the leader alone suffices again
    part.set_isr([0])
    assert plog.high_watermark == end
    assert part.maybe_increment_high_watermark() is False
    end = _append(part)
    assert part.maybe_increment_high_watermark() and plog.high_watermark == end


def test_min_isr_is_capped_at_the_replica_count(plog: PartitionLog) -> None:
    """min.insync.replicas 2 on a topic of one replica (Kafka's effectiveMinIsr): the leader
    alone commits."""
    part = Partition("t", 0, plog, local_id=0, min_isr_of=lambda topic: 2)
    part.make_leader(0, [0], [0])
    end = _append(part, 2)
    assert part.maybe_increment_high_watermark() and plog.high_watermark == end


def test_only_the_partition_layer_moves_a_leaders_high_watermark() -> None:
    """`update_high_watermark` is storage's; above storage only replica/partition.py calls it
    (one place where the high watermark moves)."""
    callers = []
    for path in (ROOT / "pybroker").rglob("*.py"):
        if path.parent.name == "storage":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr == "update_high_watermark":
                callers.append(str(path.relative_to(ROOT)))
    assert sorted(set(callers)) == ["pybroker/replica/partition.py"]


def _upkeep(part: Partition) -> tuple[IsrUpkeep, list[tuple[int, ...]]]:
    """The leader's ISR upkeep over `part` alone, with a store that takes every ISR write
    (the list it returns)."""
    writes: list[tuple[int, ...]] = []

    class Store:
        # Brokers 0 and 1 registered, neither shutting down (the ISR's eligibility reads it).
        image = MetadataImage("c", 0, {b: BrokerInfo(b, "127.0.0.1", 9092 + b) for b in (0, 1)},
                              {})

        async def alter_isr(self, topic: str, partition: int, epoch: int,
                            isr: tuple[int, ...], version: int) -> int:
            writes.append(isr)
            return version + 1

    upkeep = IsrUpkeep()
    upkeep.metadata = Store()  # type: ignore[assignment]
    upkeep._partitions = {("t", 0): part}
    upkeep.isr_shrinks = upkeep.isr_expands = 0
    return upkeep, writes


def test_a_written_isr_change_is_adopted_at_once_and_counted_once(plog: PartitionLog) -> None:
    """The store's image comes back through another task; a second wakeup before it arrives
    must not write the same expansion again (it did: pybroker_isr_expands_total read 2)."""
    import trio

    part = Partition("t", 0, plog, local_id=0)
    part.make_leader(0, [0, 1], [0])
    part.update_follower_fetch(1, plog.log_end_offset, now_ms=10)
    upkeep, writes = _upkeep(part)

    async def twice() -> None:
        await upkeep._maybe_change_isr(("t", 0), 30_000, expand=True)
        await upkeep._maybe_change_isr(("t", 0), 30_000, expand=True)

    trio.run(twice)
    assert writes == [(0, 1)]
    assert part.isr == frozenset({0, 1})
    assert (upkeep.isr_expands, upkeep.isr_shrinks) == (1, 0)


@pytest.mark.parametrize("fetched", [False, True])
def test_only_a_followers_fetch_readmits_it_to_the_isr(plog: PartitionLog,
                                                       fetched: bool) -> None:
    """Follower 1's last fetch reached the high watermark, which then stopped moving (the
    leader's dir failed, or the ISR fell below min.insync.replicas), and it has not fetched
    since. The periodic round must leave it out, as Kafka expands the ISR only from a
    follower's fetch (Partition.maybeExpandIsr); it readmitted it, which made a replica that
    was not fetching electable. A fetch since the last round (the request path marks the
    partition a candidate) readmits it."""
    import trio
    import trio.testing

    part = Partition("t", 0, plog, local_id=0)
    part.make_leader(0, [0, 1], [0])
    _append(part, 3)
    part.update_follower_fetch(1, plog.log_end_offset, now_ms=10)
    assert part.can_join_isr(1)
    upkeep, writes = _upkeep(part)
    upkeep._isr_candidates = {("t", 0)} if fetched else set()
    upkeep._isr_wakeup = trio.Event()

    async def three_periodic_rounds() -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(upkeep.run_isr_maintenance, 4000)
            await trio.sleep(3 * 2.0 + 0.5)  # rounds every 2 s (half of 4000 ms)
            nursery.cancel_scope.cancel()

    trio.run(three_periodic_rounds, clock=trio.testing.MockClock(autojump_threshold=0))
    if fetched:
        assert writes == [(0, 1)] and part.isr == frozenset({0, 1})
    else:
        assert writes == [] and part.isr == frozenset({0})
