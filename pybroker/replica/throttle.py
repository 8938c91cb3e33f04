"""What replication needs of a replication quota (quota/replication_quota.py, a layer above):
the leader's Fetch handler and the follower's fetcher ask it, the broker builds it."""
from __future__ import annotations

from typing import Protocol


class ReplicaThrottle(Protocol):
    def is_throttled(self, topic: str, partition: int) -> bool:
        """Whether this broker's replica of the partition is in its topic's throttled list."""

    def is_exceeded(self, now_ms: float) -> bool:
        """Whether the throttled rate is over its bound now."""

    def record(self, size: int, now_ms: float) -> None:
        """Count bytes of throttled partitions sent or fetched."""

    def bytes_per_second(self, now_ms: float) -> float:
        """The rate measured now, for /metrics."""
