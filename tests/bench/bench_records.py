"""Throughput of the record-batch hot path, and the cost of the tool-side record codec.

Run: PYTHONPATH=. .venv/bin/python tests/bench/bench_records.py

The broker's Produce and recovery paths walk batch headers and check CRC32C over ~1 MB at a
time; the target is >= 2 GB/s. The cost is one fixed amount per batch (header unpack, header
object, one C call for the CRC) plus CRC32C at memory speed, so the figure depends on batch
size: it is printed for the 16 KB batches producers send by default (batch.size = 16384) and
for smaller batches to show the per-batch floor.
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable

from protocol.records import Compression, Record, build_batch, decode_batch, walk_batches

MB = 1 << 20


def _best(fn: Callable[[], object], repeat: int = 7, number: int = 20) -> float:
    """Best-of-`repeat` seconds per call, which filters out scheduler noise."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - start) / number)
    return best


def _blob(records_per_batch: int, record_size: int = 1024, total: int = MB) -> bytes:
    """About `total` bytes of uncompressed batches of 1 KB records."""
    records = [Record(b"key-%06d" % i, os.urandom(record_size), timestamp=1_700_000_000_000 + i)
               for i in range(records_per_batch)]
    batch = build_batch(records)
    return batch * max(1, total // len(batch))


def bench_walk() -> None:
    for per_batch in (16, 4, 1):
        blob = _blob(per_batch)
        batches, valid, reason = walk_batches(blob)
        assert reason is None and valid == len(blob)
        seconds = _best(lambda: walk_batches(blob, verify_crc=True))
        print(f"walk_batches + CRC32C, {len(blob) / MB:.2f} MB in {len(batches)} batches of "
              f"{per_batch} x 1 KB records: {len(blob) / seconds / 1e9:6.2f} GB/s "
              f"({seconds / len(batches) * 1e6:.2f} us/batch)")


def bench_codec() -> None:
    records = [Record(b"key-%04d" % i, os.urandom(100), (("trace", b"abc"),),
                      1_700_000_000_000 + i) for i in range(100)]
    for codec in Compression:
        built = build_batch(records, compression=codec)
        build = _best(lambda: build_batch(records, compression=codec), number=100)
        decode = _best(lambda: decode_batch(built), number=100)
        print(f"100-record batch ({codec.name.lower():6}): build_batch {build * 1e6:7.1f} us, "
              f"decode_batch {decode * 1e6:7.1f} us")


if __name__ == "__main__":
    bench_walk()
    bench_codec()
