"""Deadlines by key, for the group state machine: data, not sleeping tasks.

The machine schedules a key (a member's session, a group's rebalance deadline, ...) at an
absolute time in ms; rescheduling a key replaces its deadline. The owner asks
`next_deadline()` and, once the clock passes it, pops due keys. Rescheduling and cancelling are
O(log n) thanks to lazy deletion: stale heap entries are dropped when they reach the top.
"""
from __future__ import annotations

import heapq
import itertools
from enum import Enum

__all__ = ["TimerKind", "TimerKey", "Timers"]


class TimerKind(str, Enum):
    HEARTBEAT = "heartbeat"  # a member's session
    PENDING = "pending"  # a member told MEMBER_ID_REQUIRED that has not come back
    JOIN = "join"  # the rebalance (or initial delay) deadline of a group
    SYNC = "sync"  # members that joined but have not sent SyncGroup


TimerKey = tuple[TimerKind, str, str]  # kind, group id, member id ("" for group timers)


class Timers:
    """Deadlines by key; rescheduling or cancelling is O(log n) with lazy heap deletion."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, TimerKey]] = []
        self._due: dict[TimerKey, int] = {}
        self._seq = itertools.count()

    def schedule(self, key: TimerKey, deadline_ms: int) -> None:
        self._due[key] = deadline_ms
        heapq.heappush(self._heap, (deadline_ms, next(self._seq), key))

    def cancel(self, key: TimerKey) -> None:
        self._due.pop(key, None)

    def deadline(self, key: TimerKey) -> int | None:
        return self._due.get(key)

    def _drop_stale(self) -> None:
        heap = self._heap
        while heap and self._due.get(heap[0][2]) != heap[0][0]:
            heapq.heappop(heap)

    def next_deadline(self) -> int | None:
        self._drop_stale()
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now_ms: int) -> TimerKey | None:
        self._drop_stale()
        if self._heap and self._heap[0][0] <= now_ms:
            _, _, key = heapq.heappop(self._heap)
            del self._due[key]
            return key
        return None
