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
# What the broker may hold beyond its idle size and its pool: the 64 KiB frames served outside
# the pool (one per connection at most, 440 connections: under 28 MiB if all were mid-frame),
# the per-connection state of 441 connections (trio task, socket, buffers: ~20 KiB each, ~9 MiB),
# malloc's slack (up to 4 MiB of trimmable top, M_TRIM_THRESHOLD, per arena) and the normal
# clients' requests and responses; calibrated in test runs below that.
MARGIN = 96 * MB
BACK_MARGIN = 100 * MB  # "back within 100 MB of idle in 10 s" (issue #20's Done when)
ROUND_TRIP_LIMIT = 2.0  # seconds: a round trip during the flood, each


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
