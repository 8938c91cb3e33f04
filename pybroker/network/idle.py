"""Closing connections that have waited `connections.max.idle.ms` for a request.

One reaper looks over every open connection a few times per idle period, as Kafka's selector
does, instead of a deadline per receive: setting and clearing a trio deadline for each request
cost more than the rest of the receive path's Python (issue #6). A connection is closed
between one and 1.1 idle periods after it started waiting (at most 5 s late). A negative
connections.max.idle.ms turns idle closing off, as in Kafka's selector.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import trio


class IdleWatch:
    """One connection's side: it marks when it starts and stops waiting for a request."""

    __slots__ = ("_scope", "waiting", "since", "fired")

    def __init__(self, scope: trio.CancelScope) -> None:
        self._scope = scope
        self.waiting = False
        self.since = 0.0
        self.fired = False

    def wait_starts(self) -> None:
        self.since = trio.current_time()
        self.waiting = True

    def fire(self) -> None:
        self.fired = True
        self._scope.cancel()


class IdleConnections:
    def __init__(self, idle_ms: int) -> None:
        self.idle_s = idle_ms / 1000
        self._open: set[IdleWatch] = set()

    def __len__(self) -> int:
        return len(self._open)

    @contextmanager
    def track(self) -> Iterator[IdleWatch]:
        """Serve a connection inside this: the reaper cancels it when it has been idle."""
        with trio.CancelScope() as scope:
            watch = IdleWatch(scope)
            self._open.add(watch)
            try:
                yield watch
            finally:
                self._open.discard(watch)

    async def reap(self) -> None:
        if self.idle_s < 0:
            return
        tick = min(max(self.idle_s / 10, 0.005), 5.0)
        while True:
            await trio.sleep(tick)
            now = trio.current_time()
            for watch in [w for w in self._open if w.waiting and now - w.since >= self.idle_s]:
                watch.fire()
