"""What the request path counts for /metrics: plain integers in dicts, read at scrape time.

Why not prometheus_client's Counter and Histogram on the hot path: each `inc()` and
`observe()` takes a lock and goes through label lookups, on every request and every partition
of a produce. Here a request costs a dict lookup, a bisect over the latency buckets and a few
integer additions; the collector (`ops/metrics.py`) turns these into metric families only
when /metrics is scraped. Everything runs on the broker's one trio thread, so no lock is
needed, and nothing here imports trio.

Labels are bounded: by API (about seventy), by topic (what the broker hosts) and by listener;
never by client id or address, which any client can make up.
"""
from __future__ import annotations

from bisect import bisect_left

__all__ = ["LATENCY_BUCKETS", "ApiStats", "RequestStats"]

# Upper bounds (seconds) of the request latency histogram: 0.5 ms to 10 s, as Kafka's
# TotalTimeMs spans from a metadata request to a long-poll fetch (max.wait.ms 500 by default).
LATENCY_BUCKETS: tuple[float, ...] = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                      0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class ApiStats:
    """One API's requests, failures and latency histogram (per-bucket, not cumulative)."""

    __slots__ = ("requests", "errors", "buckets", "seconds")

    def __init__(self) -> None:
        self.requests = 0
        self.errors = 0
        # buckets[i]: requests that took at most LATENCY_BUCKETS[i] (and more than the bound
        # before); the last slot counts the slower ones (+Inf).
        self.buckets = [0] * (len(LATENCY_BUCKETS) + 1)
        self.seconds = 0.0

    def cumulative(self) -> list[int]:
        """Prometheus' `le` counts: each bucket with all the faster ones."""
        total, out = 0, []
        for count in self.buckets:
            total += count
            out.append(total)
        return out


class RequestStats:
    """Counters the request path bumps; one per broker (`Services.stats`)."""

    def __init__(self) -> None:
        self.apis: dict[int, ApiStats] = {}
        # Per topic: bytes and records appended by producers (Kafka's BytesInPerSec and
        # MessagesInPerSec), bytes returned to consumers (BytesOutPerSec; replication excluded).
        self.bytes_in: dict[str, int] = {}
        self.records_in: dict[str, int] = {}
        self.bytes_out: dict[str, int] = {}
        # Open client connections per listener name.
        self.connections: dict[str, int] = {}

    def request(self, api_key: int, seconds: float, failed: bool) -> None:
        stats = self.apis.get(api_key)
        if stats is None:
            stats = self.apis[api_key] = ApiStats()
        stats.requests += 1
        if failed:
            stats.errors += 1
        stats.buckets[bisect_left(LATENCY_BUCKETS, seconds)] += 1
        stats.seconds += seconds

    def produced(self, topic: str, size: int, records: int) -> None:
        self.bytes_in[topic] = self.bytes_in.get(topic, 0) + size
        self.records_in[topic] = self.records_in.get(topic, 0) + records

    def fetched(self, topic: str, size: int) -> None:
        self.bytes_out[topic] = self.bytes_out.get(topic, 0) + size

    def connection_opened(self, listener: str) -> None:
        self.connections[listener] = self.connections.get(listener, 0) + 1

    def connection_closed(self, listener: str) -> None:
        self.connections[listener] -= 1

    def forget_topic(self, topic: str) -> None:
        """A deleted topic's series go with it (else labels would only ever grow)."""
        for table in (self.bytes_in, self.records_in, self.bytes_out):
            table.pop(topic, None)
