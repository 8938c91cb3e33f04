"""Delayed operations: requests waiting for a partition to move, woken rather than polling.

Two things move: the log end offset (an append) and the high watermark (data committed).
Consumers' fetches and `acks=all` produces wait for the high watermark — a consumer may only
see committed data, and a produce is acknowledged once its batch is committed — while
followers' fetches wait for the log end offset, since they are what moves the high watermark.
On one broker both move at every append.

A waiter registers one `trio.Event` under every partition it watches, for one of the two
kinds; a move of that kind on any of them sets it. The waiter then checks again and either
answers or waits again until its deadline.
"""
from __future__ import annotations

import enum
from collections import defaultdict

import trio

from protocol.topic_partition import TopicPartition

__all__ = ["Purgatory", "Watch"]


class Watch(enum.Enum):
    LOG_END = "log end offset"
    HIGH_WATERMARK = "high watermark"


class Purgatory:
    def __init__(self) -> None:
        self._waiters: dict[tuple[Watch, TopicPartition], set[trio.Event]] = defaultdict(set)
        # Operations waiting now, by kind ("Fetch", "Produce"): Kafka's PurgatorySize per
        # delayedOperation, for /metrics.
        self.waiting: dict[str, int] = {"Fetch": 0, "Produce": 0}

    def notify(self, tp: TopicPartition, watch: Watch) -> None:
        waiters = self._waiters.pop((watch, tp), None)
        if waiters:
            for event in waiters:
                event.set()

    def notify_all(self, tp: TopicPartition) -> None:
        """Wake every waiter of the partition (it was deleted, or it moved both ways)."""
        for watch in Watch:
            self.notify(tp, watch)

    async def wait_any(self, partitions: list[TopicPartition], timeout_s: float,
                       watch: Watch = Watch.HIGH_WATERMARK, operation: str = "Fetch") -> bool:
        """Wait until one of `partitions` moves (`watch`), or the timeout; True if woken.
        `operation` names what waits, for the purgatory's size in /metrics."""
        if timeout_s <= 0:
            return False
        event = trio.Event()
        keys = [(watch, tp) for tp in partitions]
        for key in keys:
            self._waiters[key].add(event)
        waiting = self.waiting
        waiting[operation] = waiting.get(operation, 0) + 1
        try:
            with trio.move_on_after(timeout_s):
                await event.wait()
                return True
            return False
        finally:
            waiting[operation] -= 1
            for key in keys:
                waiters = self._waiters.get(key)
                if waiters is not None:
                    waiters.discard(event)
                    if not waiters:
                        del self._waiters[key]
