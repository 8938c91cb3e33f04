"""The follower side of a replication quota (replica/fetcher.py, Kafka's
shouldFollowerThrottle): which partitions a fetcher leaves out of its next request."""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import trio

from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition
from pybroker.client.fetch_session_handler import FetchSessionHandler
from pybroker.replica.fetcher import FetchSettings, ReplicaFetchers

LEADER = 2


class Logs:
    """Every followed partition at offset 10."""

    def fetch_position(self, tp: TopicPartition) -> tuple[int, int, int] | None:
        return (10, 0, 0)

    def apply_fetched(self, tp: TopicPartition, leader_epoch: int, data: Any) -> ErrorCode:
        return ErrorCode.NONE


class Quota:
    def __init__(self, throttled: set[TopicPartition]) -> None:
        self.throttled = throttled
        self.exceeded = False
        self.recorded = 0

    def is_throttled(self, topic: str, partition: int) -> bool:
        return (topic, partition) in self.throttled

    def is_exceeded(self, now_ms: float) -> bool:
        return self.exceeded

    def record(self, size: int, now_ms: float) -> None:
        self.recorded += size

    def bytes_per_second(self, now_ms: float) -> float:
        return 0.0


def _asked(fetchers: ReplicaFetchers) -> set[TopicPartition]:
    _, asked = fetchers._request(fetchers._partitions_of(LEADER), FetchSessionHandler())
    return set(asked)


def _answer(high_watermark: int, records: bytes = b"") -> Any:
    return SimpleNamespace(error_code=0, high_watermark=high_watermark, records=records)


async def _scenario() -> None:
    moving, other = ("t", 0), ("t", 1)
    quota = Quota({moving})
    fetchers = ReplicaFetchers(Logs(), FetchSettings(1), lambda node: None, quota)
    for tp in (moving, other):
        fetchers.follow(tp, LEADER, 0)
    assert _asked(fetchers) == {moving, other}  # under the rate: everything
    quota.exceeded = True
    assert _asked(fetchers) == {other}  # never answered yet: not known to be caught up
    # Behind the leader's high watermark: still held back; its bytes are counted.
    fetchers._account(moving, _answer(50, b"x" * 100))
    fetchers._account(other, _answer(50, b"x" * 7))
    assert quota.recorded == 100
    assert _asked(fetchers) == {other}
    # Caught up with the leader (in sync): never held back.
    fetchers._account(moving, _answer(10))
    assert _asked(fetchers) == {moving, other}
    # Following anew (a new epoch) forgets that it was caught up.
    fetchers.follow(moving, LEADER, 1)
    assert _asked(fetchers) == {other}


def test_a_throttled_partition_behind_is_left_out_while_the_rate_is_over() -> None:
    trio.run(_scenario)
