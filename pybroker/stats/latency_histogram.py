"""A latency histogram as plain numbers, for work that is timed off the event loop.

The request path has its own cheaper histogram (`request_stats.ApiStats`: one trio thread,
no lock). This one is for work that runs in worker threads — log flushes (fsync) are timed in
whichever thread runs them, the periodic flush's or the event loop's — so `observe` takes a
lock; at one call per fsync its cost is nothing beside the fsync. The collector
(`ops/metrics.py`) reads it when /metrics is scraped. Pure: no trio, nothing of the broker.
"""
from __future__ import annotations

import threading
from bisect import bisect_left

__all__ = ["FLUSH_BUCKETS", "LatencyHistogram"]

# Upper bounds (seconds) for log flushes: an fsync of a page-cache-warm segment on an SSD
# takes ~0.1-1 ms, one on a busy spinning disk or network volume tens to hundreds of ms.
FLUSH_BUCKETS: tuple[float, ...] = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                    0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class LatencyHistogram:
    """Observations counted per bucket of `bounds` (seconds), with their count and sum."""

    def __init__(self, bounds: tuple[float, ...] = FLUSH_BUCKETS) -> None:
        self.bounds = bounds
        self._buckets = [0] * (len(bounds) + 1)  # the last slot: slower than every bound
        self.count = 0
        self.sum = 0.0
        self._lock = threading.Lock()

    def observe(self, seconds: float) -> None:
        with self._lock:
            self._buckets[bisect_left(self.bounds, seconds)] += 1
            self.count += 1
            self.sum += seconds

    def cumulative(self) -> list[tuple[str, int]]:
        """Prometheus' (`le`, count) pairs: each bucket with all the faster ones, +Inf last."""
        with self._lock:
            buckets = list(self._buckets)
        total, out = 0, []
        for bound, count in zip([repr(b) for b in self.bounds] + ["+Inf"], buckets):
            total += count
            out.append((bound, total))
        return out
