"""A/B of PartitionLog's hot path: append 10,000 1 KB batches, read each back, in CPU time.

Run from the root of each tree to compare (it imports the tree it is run from), alternating:

    .venv/bin/python tests/bench/bench_partition_log_calls.py
    (cd ../other-tree && /path/to/.venv/bin/python tests/bench/bench_partition_log_calls.py)

It prints the best and median CPU time of `--repeat` runs (process time, so other load on the
machine matters less than for wall time) and how many Python calls one produce+fetch pair
makes (cProfile, exact): a split of the log must not add calls per record, only per request.
The log lives in /dev/shm where there is one, so the figures are CPU, not disk.
"""
from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import shutil
import sys
import tempfile
import time
import timeit
from pathlib import Path

sys.path.insert(0, os.getcwd())

from protocol.records import Record, build_batch  # noqa: E402
from pybroker.storage import LogConfig, PartitionLog  # noqa: E402

BATCHES = 10_000


def produce_and_fetch(data: bytes) -> None:
    """Append BATCHES copies of `data` through PartitionLog, then read them back one batch per
    read, as a consumer fetching with max_bytes of 1 KB would."""
    root = Path(tempfile.mkdtemp(dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
    try:
        plog = PartitionLog(root / "bench-0", LogConfig(segment_bytes=4 << 20))  # a few rolls
        for _ in range(BATCHES):
            plog.append(data, leader_epoch=0)
        plog.update_high_watermark()
        offset, reads = 0, 0
        while offset < plog.log_end_offset:
            offset = plog.read(offset, 1024, max_offset=plog.high_watermark).next_offset
            reads += 1
        if reads != BATCHES:
            raise AssertionError(f"read {reads} batches, wrote {BATCHES}")
        plog.close()
    finally:
        shutil.rmtree(root)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    data = build_batch([Record(b"k", os.urandom(1024 - 80), timestamp=1_700_000_000_000)])
    times = sorted(timeit.repeat(lambda: produce_and_fetch(data), number=1, repeat=args.repeat,
                                 timer=time.process_time))
    profile = cProfile.Profile()
    profile.enable()
    produce_and_fetch(data)
    profile.disable()
    calls = pstats.Stats(profile).total_calls / BATCHES  # type: ignore[attr-defined]
    print(f"{BATCHES} x {len(data)} B produce+fetch, CPU: best {min(times) * 1e3:.1f} ms, "
          f"median {times[len(times) // 2] * 1e3:.1f} ms; {calls:.1f} Python calls a pair")


if __name__ == "__main__":
    main()
