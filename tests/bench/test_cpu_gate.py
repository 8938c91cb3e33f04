"""The CPU gate (issue #28): broker CPU per record no more than 15 % above a fixed commit's.

Each feature on the produce and fetch path once cost a little more CPU per record, and a guard
that failed only on a collapse noticed none of it. This is an A/B (tests/bench/ab.py): this
tree and `ab.GATE_REF`, built into its own tree and venv, take turns on one workload (1 KB
records, produce acks=1 and acks=all, consume) for three rounds, in the same minutes on the same
machine, and each CPU figure's median ratio must stay at or below `ab.GATE_LIMIT`. Ratios of
two builds measured together, not a timed unit test: what the machine's speed does to one
build it does to the other.

It skips, saying why, when the machine is too busy to measure (other work using more than a
quarter of its CPU for a minute) and when the reference is not in this clone (a
shallow checkout: `git fetch --unshallow`).
"""
from __future__ import annotations

import os
import statistics
import sys
import time

import pytest

from tests.bench import ab

ROUNDS, COUNT = 3, 300_000
CPU_FIGURES = ("produce acks=1 CPU-s/M", "produce acks=all CPU-s/M", "consume CPU-s/M")


def _busy_share(seconds: float = 2.0) -> float:
    """The share of the machine's CPU time that something was running over the next
    `seconds` (/proc/stat: all CPUs, everything but idle and iowait). Read now, not from the
    load average, which trails the last minute (the tier before this one, say)."""
    def sample() -> tuple[int, int]:
        with open("/proc/stat") as f:
            ticks = [int(x) for x in f.readline().split()[1:]]
        return sum(ticks), ticks[3] + ticks[4]  # total; idle + iowait

    total0, idle0 = sample()
    time.sleep(seconds)
    total1, idle1 = sample()
    return 1 - (idle1 - idle0) / max(1, total1 - total0)


def _quiet_enough(wait_s: float = 60.0, most: float = 0.25) -> str | None:
    """None once other work uses at most `most` of the machine's CPU; else why not."""
    end = time.monotonic() + wait_s
    while True:
        busy = _busy_share()
        if busy <= most:
            return None
        if time.monotonic() > end:
            return (f"{busy:.0%} of {os.cpu_count()} CPUs busy with other work after "
                    f"{wait_s:g} s: too busy to measure CPU per record")


def test_cpu_per_record_stays_within_the_gate(perf_summary: list[str]) -> None:
    if not sys.platform.startswith("linux"):
        pytest.skip("the gate reads broker CPU from the process's CPU clock and /proc")
    try:
        ref = ab.ref_build(ab.GATE_REF)
    except ab.BuildError as exc:
        if "not a commit" in str(exc):
            pytest.skip(f"the gate's reference {ab.GATE_REF[:12]} is not in this clone "
                        f"(git fetch --unshallow): {exc}")
        raise
    busy = _quiet_enough()
    if busy is not None:
        pytest.skip(busy)
    this = ab.this_build()
    comparisons = ab.compare(this, ref, ROUNDS, COUNT, progress=False)
    perf_summary.append(f"CPU gate: this tree against {ref.label} (fails above "
                        f"{ab.GATE_LIMIT:g} x its CPU per record, median of {ROUNDS} rounds)")
    perf_summary.extend(ab.table(comparisons, this, ref).splitlines())
    moved = [f"{c.name}: {c.median_ratio:.3f} x {ref.label}'s "
             f"({statistics.median(c.this):.3f} against {statistics.median(c.ref):.3f}; "
             f"rounds {', '.join(f'{r:.3f}' for r in c.ratios)})"
             for c in comparisons if c.name in CPU_FIGURES and c.median_ratio > ab.GATE_LIMIT]
    assert not moved, "CPU per record rose above the gate: " + "; ".join(moved)
