"""Idle replication CPU with and without the followers' fetch sessions (KIP-227).

Three brokers in one process (`pybroker.testing.cluster.Cluster`, in-memory ZooKeeper), one
topic of N partitions at replication factor 3, nothing produced: what the brokers spend over
an interval is the followers' long polls and the leaders' answers. `off` patches the
followers' FetchSessionHandler to send every fetch sessionless (what they did before), so
both runs use the same code otherwise. The process's CPU (getrusage) counts all three.

    .venv/bin/python -m tests.bench.bench_follower_sessions [--partitions 1000] [--seconds 20]
"""
from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time
from typing import Any


def _sessionless() -> None:
    from pybroker.client.fetch_session_handler import FetchSessionHandler

    def build(self: Any, wanted: dict) -> tuple[int, int, dict, dict]:
        send: dict[str, list] = {}
        for (topic, _), entry in wanted.items():
            send.setdefault(topic, []).append(entry)
        return 0, -1, send, {}

    def answered(self: FetchSessionHandler, error_code: int, session_id: int) -> bool:
        return error_code == 0
    # patched on the class: every follower fetcher of this process goes sessionless
    FetchSessionHandler.build = build  # type: ignore[method-assign]
    FetchSessionHandler.answered = answered  # type: ignore[method-assign]


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run(sessions: bool, partitions: int, seconds: float) -> str:
    from pybroker.testing.cluster import Cluster
    if not sessions:
        _sessionless()
    with Cluster(3) as cluster:
        cluster.create_topic("idle", partitions, 3)
        time.sleep(3)
        servers = [cluster.server(i).broker.services for i in cluster.running]
        fetches0 = sum(s.stats.apis[1].requests for s in servers if 1 in s.stats.apis)
        cpu0 = _cpu_s()
        time.sleep(seconds)
        cpu = _cpu_s() - cpu0
        fetches = sum(s.stats.apis[1].requests for s in servers if 1 in s.stats.apis) - fetches0
        held = [len(s.fetch_sessions) for s in servers]
    return (f"{'sessions' if sessions else 'sessionless':12} {cpu:7.2f} {fetches:8d} "
            f"{1000 * cpu / max(1, fetches):12.2f}   {held}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--one", choices=["on", "off"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:  # one side, in a process of its own (the patch must not leak)
        print(run(args.one == "on", args.partitions, args.seconds))
        return
    print(f"\n3 brokers, {args.partitions} partitions RF 3, idle, {args.seconds:g} s")
    print(f"{'followers':12} {'CPU s':>7} {'fetches':>8} {'CPU ms/fetch':>12}   sessions held")
    for side in ("on", "off"):
        out = subprocess.run([sys.executable, "-m", "tests.bench.bench_follower_sessions",
                              "--one", side, "--partitions", str(args.partitions),
                              "--seconds", str(args.seconds)],
                             capture_output=True, text=True, check=True).stdout
        print(out.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
