"""Delayed operations: fetches waiting for data, woken by appends rather than by polling.

A waiting fetch registers one `trio.Event` under every partition it reads; an append to any of
them sets it. The fetch then re-reads and either answers or waits again until its deadline.
"""
from __future__ import annotations

from collections import defaultdict

import trio

TopicPartition = tuple[str, int]


class Purgatory:
    def __init__(self) -> None:
        self._waiters: dict[TopicPartition, set[trio.Event]] = defaultdict(set)

    def notify(self, tp: TopicPartition) -> None:
        waiters = self._waiters.pop(tp, None)
        if waiters:
            for event in waiters:
                event.set()

    async def wait_any(self, partitions: list[TopicPartition], timeout_s: float) -> bool:
        """Wait until one of `partitions` gets an append, or the timeout; True if woken."""
        if timeout_s <= 0:
            return False
        event = trio.Event()
        for tp in partitions:
            self._waiters[tp].add(event)
        try:
            with trio.move_on_after(timeout_s):
                await event.wait()
                return True
            return False
        finally:
            for tp in partitions:
                waiters = self._waiters.get(tp)
                if waiters is not None:
                    waiters.discard(event)
                    if not waiters:
                        del self._waiters[tp]
