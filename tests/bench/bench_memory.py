"""The broker's memory under hostile load (issue #20): the issue's measurement, printed.

Not a test (pytest does not collect `bench_*.py`); run it by hand:

    .venv/bin/python tests/bench/bench_memory.py --connections 40 [--connections 400] \
        [--pool BYTES] [--declare BYTES] [--push BYTES] [--duration S]

For each --connections N, a fresh subprocess broker (`python -m pybroker`, default settings
but for `queued.max.request.bytes` when --pool is given) is flooded by N raw connections, each
declaring a 100,000,000-byte frame (under socket.request.max.bytes) and pushing up to 40 MB of
it from one polling thread; a socket whose kernel buffer is full just waits (backpressure).
For --duration seconds (10), the broker's RSS is sampled every 100 ms while a confluent-kafka
client makes produce→consume round trips of one small record on another topic, 1,000 records
are produced with acks=all, and a consumer group of two subprocess members (session timeout
6 s, heartbeats every 500 ms) runs. Then the connections close and RSS is followed for 10 s.

A watchdog kills the broker when its RSS passes --kill-above (4 GiB), so that a broker without
a memory pool (where 40 connections took it to 1.6 GB) cannot take the machine down with 400;
the summary says so. Linux only (/proc). The pieces are tests/integration/hostile_load.py,
shared with tests/integration/test_memory_bound.py.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.helpers import BrokerProcess  # noqa: E402
from tests.integration.hostile_load import MB, Measurement, measure, percentiles, rss  # noqa: E402


def _pool_bound(broker: BrokerProcess) -> str:
    """The broker's queued.max.request.bytes as it reports it (DescribeConfigs), or why not."""
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    try:
        broker_id = next(iter(admin.list_topics(timeout=10).brokers))
        resource = ConfigResource(ResourceType.BROKER, str(broker_id))
        configs = admin.describe_configs([resource])[resource].result(10)
    except Exception as exc:  # reported, not fatal: the measurement stands without it
        return f"unknown ({exc})"
    entry = configs.get("queued.max.request.bytes")
    if entry is None:
        return "none (the broker has no queued.max.request.bytes)"
    return f"{int(entry.value) / MB:.0f} MiB (queued.max.request.bytes={entry.value})"


def _summary(n: int, args: argparse.Namespace, bound: str, idle_start: int,
             m: Measurement) -> str:
    lat = percentiles(m.latencies)
    after = ", ".join(f"{t:.0f} s: {v / MB:.0f} MiB" for t, v in sorted(m.rss_after.items()))
    back = "never (in 10 s)" if m.back_in is None else f"{m.back_in:.1f} s"
    killed = ("" if m.killed_at is None else
              f"\n  KILLED by the watchdog at {m.killed_at / MB:.0f} MiB RSS "
              f"(--kill-above {args.kill_above / MB:.0f} MiB): no bound")
    lines = [
        f"== {n} connections x declared {args.declare:,} B, pushing up to {args.push:,} B "
        f"({n * args.push / MB:,.0f} MiB offered) for {args.duration:.0f} s",
        f"  pool bound           {bound}",
        f"  idle RSS             {idle_start / MB:.0f} MiB at start; {m.idle / MB:.0f} MiB "
        f"with the normal clients and group connected",
        f"  peak RSS             {m.peak / MB:.0f} MiB (pushed into sockets: "
        f"{m.pushed / MB:,.0f} MiB; connections the broker closed: {len(m.closed_by_broker)})",
        f"  RSS after close      {after or 'n/a'}; within 100 MiB of idle after {back}",
        f"  broker's open fds    {m.open_fds[0]} before, {m.open_fds[1]} during, "
        f"{m.open_fds[2]} 10 s after close",
        f"  round trips          {len(m.latencies)} ok, {len(m.round_trip_failures)} failed; "
        f"p50 {lat['p50'] * 1000:.1f} ms, p99 {lat['p99'] * 1000:.1f} ms, "
        f"max {lat['max'] * 1000:.1f} ms",
        f"  consumer group       {m.rebalance_events} rebalance event(s) reported by the "
        f"members, {m.joins} JoinGroup(s) logged by the broker, dead members "
        f"{m.dead_members or 'none'}",
        f"  acks=all records     {m.acked} acknowledged, {m.acked - len(m.unreadable)} read "
        f"back; errors {m.acked_errors[:3] or 'none'}" + killed,
    ]
    if m.round_trip_failures:
        lines.append(f"  first failures       {m.round_trip_failures[:3]}")
    return "\n".join(lines)


def run(n: int, args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        broker = BrokerProcess(Path(tmp) / "logs")
        if args.pool is not None:
            broker.overrides["queued_max_request_bytes"] = str(args.pool)
        proc = broker.start().proc
        assert proc is not None
        try:
            idle_start = rss(proc.pid)
            bound = _pool_bound(broker)
            m = measure(broker, [(args.declare, args.push)] * n, duration=args.duration,
                        after_close=10.0, group=True, kill_above=args.kill_above)
            print(_summary(n, args, bound, idle_start, m), flush=True)
        finally:
            if proc.poll() is None:
                broker.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--connections", type=int, action="append",
                        help="hostile connections (repeatable: one run each; default 40)")
    parser.add_argument("--pool", type=int, help="queued.max.request.bytes for the broker")
    parser.add_argument("--declare", type=int, default=100_000_000,
                        help="frame size each connection declares (default 100,000,000)")
    parser.add_argument("--push", type=int, default=40_000_000,
                        help="bytes of it each connection pushes (default 40,000,000)")
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--kill-above", type=int, default=4 * 2**30,
                        help="RSS at which the watchdog kills the broker (default 4 GiB)")
    args = parser.parse_args()
    load = os.getloadavg()
    print(f"bench_memory: {subprocess.check_output(['nproc']).decode().strip()} CPUs, "
          f"load average {load[0]:.2f}", flush=True)
    for n in args.connections or [40]:
        run(n, args)


if __name__ == "__main__":
    main()
