"""The status page's memory of the last minutes: throughput and consumer-group lag, sampled
every few seconds into fixed-size rings, so the page can draw a chart without a time-series
database and without ever growing.

Bounded twice: every series keeps at most `points` samples (120 by default: ten minutes at
the default 5 s interval), and at most `max_groups` groups have a lag series — those with the
largest lag at the latest sample; a group pushed out, deleted or whose offsets expired loses
its series. Throughput is the difference of the request path's byte and record counters
(`request_stats.py`) between two samples, so the request path pays nothing for it.

`Timeline` is plain state (a test feeds it numbers and times); `run_sampler` is the trio task
the server starts beside the HTTP side door.
"""
from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import trio

__all__ = ["Counters", "Timeline", "run_sampler"]

DEFAULT_POINTS = 120
DEFAULT_MAX_GROUPS = 8
THROUGHPUT = ("bytes in/s", "bytes out/s", "records in/s")


@dataclass(frozen=True)
class Counters:
    """What one sample reads: the broker's running totals and each group's lag now."""

    bytes_in: int
    bytes_out: int
    records_in: int
    group_lag: Mapping[str, int]


class Timeline:
    def __init__(self, points: int = DEFAULT_POINTS,
                 max_groups: int = DEFAULT_MAX_GROUPS) -> None:
        self.points = points
        self.max_groups = max_groups
        # Sample times (seconds, wall clock) and, per series, the value at each of them;
        # a series may be shorter than `times` (a group that appeared later): it is aligned
        # to the right end.
        self.times: deque[float] = deque(maxlen=points)
        self.throughput: dict[str, deque[float]] = {
            name: deque(maxlen=points) for name in THROUGHPUT}
        self.lag: dict[str, deque[float]] = {}
        self._last: tuple[float, Counters] | None = None

    def take(self, now: float, counters: Counters) -> None:
        """Record one sample taken at `now` (seconds). Rates need two samples: the first only
        remembers the totals."""
        last, self._last = self._last, (now, counters)
        if last is None or now <= last[0]:
            return
        elapsed = now - last[0]
        before = last[1]
        self.times.append(now)
        # A counter can fall (a deleted topic's totals are forgotten): no negative rates.
        for name, now_total, then_total in (
                ("bytes in/s", counters.bytes_in, before.bytes_in),
                ("bytes out/s", counters.bytes_out, before.bytes_out),
                ("records in/s", counters.records_in, before.records_in)):
            self.throughput[name].append(max(0, now_total - then_total) / elapsed)
        largest = sorted(counters.group_lag.items(), key=lambda item: (-item[1], item[0]))
        keep = dict(largest[:self.max_groups])
        for group in [g for g in self.lag if g not in keep]:
            del self.lag[group]
        for group, value in keep.items():
            self.lag.setdefault(group, deque(maxlen=self.points)).append(value)

    def series(self, values: deque[float]) -> list[tuple[float, float]]:
        """(time, value) pairs of one series, aligned with the sample times."""
        times = list(self.times)[-len(values):] if values else []
        return list(zip(times, values))


async def run_sampler(timeline: Timeline, read: Callable[[], Counters], interval: float,
                      *, wall_clock: Callable[[], float] | None = None) -> None:
    """Sample every `interval` seconds until cancelled. `read` runs on the event loop and
    must be cheap (it walks the groups' committed offsets, in memory)."""
    clock = wall_clock or time.time
    while True:
        timeline.take(clock(), read())
        await trio.sleep(interval)
