"""The one task that fires a pure state machine's timers when they fall due.

The group coordinators' machines (classic and KIP-848) keep their deadlines as numbers on the
broker's clock and say which comes next (`next_deadline`); they never sleep. This loop sleeps
until that deadline, calls `fire(now)` and looks again. An operation that may have set a sooner
deadline calls `kick()`; a test that moves the clock calls `wake()`, since the sleep was
measured on the clock as it was. A failing `fire` is logged and the loop goes on: one bad
timer must not stop every group's timers.
"""
from __future__ import annotations

import logging
import math
from typing import Awaitable, Callable

import trio

log = logging.getLogger(__name__)


class DeadlineLoop:
    def __init__(self, name: str, now: Callable[[], int],
                 next_deadline: Callable[[], int | None],
                 fire: Callable[[int], Awaitable[None]]) -> None:
        self.name = name
        self._now = now
        self._next_deadline = next_deadline
        self._fire = fire
        self._wakeup: trio.Event | None = None
        self._sleeping_until = math.inf

    def kick(self) -> None:
        """Wake the loop if a deadline sooner than the one it sleeps for has appeared."""
        if self._wakeup is None:
            return
        deadline = self._next_deadline()
        if deadline is not None and deadline < self._sleeping_until:
            self._wakeup.set()

    def wake(self) -> None:
        """Wake the loop to look again (the clock jumped)."""
        if self._wakeup is not None:
            self._wakeup.set()

    async def run(self) -> None:
        while True:
            self._wakeup = trio.Event()
            now = self._now()
            deadline = self._next_deadline()
            if deadline is not None and deadline <= now:
                self._sleeping_until = math.inf
                try:
                    await self._fire(now)
                except Exception:
                    log.exception("%s timers failed", self.name)
                await trio.sleep(0)
                continue
            self._sleeping_until = math.inf if deadline is None else deadline
            with trio.move_on_after(math.inf if deadline is None else (deadline - now) / 1000):
                await self._wakeup.wait()
