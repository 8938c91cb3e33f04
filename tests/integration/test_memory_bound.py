"""Bounded memory under hostile load (issue #20), against a subprocess broker.

Raw connections declare large frames and push part of them, never completing one; meanwhile a
normal client makes produce→consume round trips, records are produced with acks=all and (in
the second test) a two-member consumer group runs. The broker's RSS is sampled every 100 ms
from /proc. The broker runs with a 64 MiB pool (`queued.max.request.bytes`) rather than its
256 MiB default, so that the bound is reached quickly and the test stays short; the same
measurement at full scale is `tests/bench/bench_memory.py`.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import BrokerProcess
from tests.integration.hostile_load import MB, Measurement, measure, percentiles

POOL = 64 * MB
# What the broker may hold beyond its idle size and its pool. Measured with the pool branch
# (2 CPUs): 400 connections x 2 MiB frames peaked at idle + pool + 2..13 MiB; 40 x 30 MiB
# frames (12 MiB pushed: only the pages written count) at idle + 26 MiB. The extra is each
# waiting connection's one 64 KiB read outside the pool (400 x 64 KiB = 25 MiB at most), the
# connections' trio tasks and sockets, malloc's 4 MiB trim threshold, and the normal clients'
# requests. 48 MiB is that worst case (13) plus the 25 MiB the small reads may add, rounded
# up; without a pool the same floods reach 520 and 842 MiB.
MARGIN = 48 * MB
# The "back within 100 MB of idle in 10 s". With a 64 MiB pool the peak itself is
# within it, so tests 1 and 2 check it only as stated; the third test scales it to the pool
# (100 MB of the default 256 MiB pool: 25 MiB of 64) so that memory kept after a flood shows.
BACK_MARGIN = 100 * MB
SCALED_BACK_MARGIN = 25 * MB
ROUND_TRIP_LIMIT = 2.0  # seconds: a round trip during the flood, each (measured: max 0.18)


@pytest.fixture
def broker(tmp_path: Path):  # type: ignore[no-untyped-def]
    proc = BrokerProcess(tmp_path / "logs", queued_max_request_bytes=str(POOL)).start()
    try:
        yield proc
    finally:
        if proc.proc is not None and proc.proc.poll() is None:
            proc.kill()


def _report(m: Measurement) -> str:
    lat = percentiles(m.latencies)
    return (f"idle {m.idle / MB:.0f} MiB, peak {m.peak / MB:.0f} MiB, pushed "
            f"{m.pushed / MB:.0f} MiB, back in {m.back_in}s, round trips {len(m.latencies)} "
            f"(p50 {lat['p50']:.3f}s p99 {lat['p99']:.3f}s max {lat['max']:.3f}s, "
            f"failures {m.round_trip_failures[:3]}), acked {m.acked} unreadable "
            f"{len(m.unreadable)}, rebalance events {m.rebalance_events}, joins {m.joins}")


def _check_common(m: Measurement) -> None:
    assert m.peak < m.idle + POOL + MARGIN, f"RSS over the pool's bound: {_report(m)}"
    assert m.latencies and not m.round_trip_failures, _report(m)
    assert max(m.latencies) < ROUND_TRIP_LIMIT, _report(m)
    assert m.back_in is not None and m.back_in <= 10.0, _report(m)
    assert m.acked == 1000 and not m.acked_errors, _report(m)
    assert not m.unreadable, f"acknowledged records lost: {m.unreadable[:10]}"


def test_large_declared_frames_stay_within_the_pool(broker: BrokerProcess) -> None:
    """40 connections declare 30 MiB frames (under the pool, so each would be served once
    whole) and push 12 MiB each: 480 MiB pushed against a 64 MiB pool, the issue's 40 x 40 of
    100 MB scaled to the pool. One more declares a frame larger than the pool: refused, as a
    frame over socket.request.max.bytes is, by closing the connection."""
    specs = [(30 * MB, 12 * MB)] * 40 + [(POOL + 1, 1 * MB)]
    m = measure(broker, specs, duration=5.0, stop_when_back=True)
    print(_report(m))
    _check_common(m)
    assert m.closed_by_broker == [40], \
        f"only the frame larger than the pool is refused; closed: {m.closed_by_broker}"


def test_many_small_frames_stay_within_the_pool_and_the_group_holds(
        broker: BrokerProcess) -> None:
    """400 connections declare 2 MiB frames, each of which would fit, and push all but its
    last byte: 800 MiB against a 64 MiB pool. The consumer group (session timeout 6 s,
    heartbeats every 500 ms) keeps its generation: no member evicted, no rejoin."""
    specs = [(2 * MB, 2 * MB - 1)] * 400
    m = measure(broker, specs, duration=7.0, group=True, stop_when_back=True)
    print(_report(m))
    _check_common(m)
    assert not m.closed_by_broker, f"frames within the pool refused: {m.closed_by_broker}"
    assert m.dead_members == [], _report(m)
    assert m.rebalance_events == 0 and m.joins == 0, f"the group rebalanced: {_report(m)}"


def test_memory_is_given_back_after_a_flood(broker: BrokerProcess) -> None:
    """40 connections fill the pool with 2 MiB frames (80 MiB offered) while the normal
    clients work; after they close, RSS returns to idle + 25 MiB (the issue's 100 MB scaled
    to the pool) within 10 s. Measured on the pool branch before a fix: it stays at the peak
    (freed frames stay in malloc's heap, below tune_malloc's 32 MB mmap threshold and not at
    its top); with MALLOC_MMAP_THRESHOLD_=65536 it is back in 0.2 s."""
    specs = [(2 * MB, 2 * MB - 1)] * 40
    m = measure(broker, specs, duration=3.0, stop_when_back=True, back_margin=SCALED_BACK_MARGIN)
    print(_report(m))
    assert m.peak > m.idle + POOL // 2, f"the flood did not fill the pool: {_report(m)}"
    assert m.peak < m.idle + POOL + MARGIN, f"RSS over the pool's bound: {_report(m)}"
    assert m.back_in is not None and m.back_in <= 10.0, \
        f"RSS not back within 25 MiB of idle in 10 s: {m.rss_after}; {_report(m)}"
