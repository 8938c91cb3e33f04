"""The broker's clock for its timers: wall-clock time plus an offset a test can advance.

A test of session expiry, transaction timeouts or time-based retention should not sleep for
`session.timeout.ms` or `retention.ms`. The timers that decide those things read this clock
instead of `time.time()`, so `pybroker.testing`'s `advance_time(ms)` can move them forward
without moving anything else. What reads it: the group coordinator (sessions, rebalance and
sync deadlines, offset retention), the transaction coordinator (transaction timeouts,
transactional-id expiry), log retention, the removal of `.deleted` files, the log
cleaner's lags and the age at which a fetch session may be evicted (`fetch_session.py`, read
once per Fetch that names a session). What does not: record timestamps, segment rolling and
flushing on append, connection idling, fetch waits, ISR lag, the controller — the produce
path and a sessionless fetch never see this clock.

In production nothing advances it and `now_ms()` is `time.time()` in milliseconds. Pure
state: no trio, no listeners; whoever advances it wakes the loops that sleep on it.
"""
from __future__ import annotations

import time
from typing import Callable

__all__ = ["Clock"]


class Clock:
    """Milliseconds since the epoch, `advanced_ms` ahead of the wall clock."""

    def __init__(self, wall: Callable[[], float] = time.time) -> None:
        self._wall = wall
        self.advanced_ms = 0

    def now_ms(self) -> int:
        return int(self._wall() * 1000) + self.advanced_ms

    def advance(self, ms: int) -> int:
        """Move the clock forward by `ms`; returns the new time. Time never runs backwards
        (a timer already fired cannot be unfired), so a negative `ms` is a ValueError."""
        if ms < 0:
            raise ValueError(f"the clock only moves forward (advance by {ms} ms)")
        self.advanced_ms += int(ms)
        return self.now_ms()
