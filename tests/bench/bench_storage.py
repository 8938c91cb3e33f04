"""Throughput of the partition log: append (Produce) and read (Fetch), from the page cache.

Run: PYTHONPATH=. .venv/bin/python tests/bench/bench_storage.py [--mb 256] [--dir /tmp/x]

Append is what a Produce request costs in storage once decoded: validate the batch (header
walk + CRC32C), producer-state check, patch base offset and leader epoch, one write, index
upkeep; one 16 KB batch of 1 KB records per call, as producers send by default
(batch.size = 16384). Read is a consumer fetching sequentially with max_bytes of 1 MB (one
pread per fetch plus an index lookup), and also with 64 KB fetches to show the per-fetch cost.
No fsync happens on either path (flush.messages / flush.ms unlimited, Kafka's default), so
the figures measure the broker's CPU cost over the page cache, not the disk.
"""
from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from protocol.records import Record, build_batch
from protocol.records.batch import BASE_SEQUENCE, CRC, compute_crc
from pybroker.storage import LogConfig, PartitionLog

MB = 1 << 20


def _batch(records: int = 16, record_size: int = 1024, *, idempotent: bool = False) -> bytes:
    body = [Record(b"key-%06d" % i, os.urandom(record_size), timestamp=1_700_000_000_000 + i)
            for i in range(records)]
    if idempotent:
        return build_batch(body, producer_id=1, producer_epoch=0, base_sequence=0)
    return build_batch(body)


def bench_append(directory: Path, total_mb: int, *, idempotent: bool = False) -> PartitionLog:
    data = _batch(idempotent=idempotent)
    count = total_mb * MB // len(data)
    if idempotent:  # each batch continues the sequence; built before the clock starts
        batches = []
        for i in range(count):
            buf = bytearray(data)
            buf[BASE_SEQUENCE:BASE_SEQUENCE + 4] = (16 * i).to_bytes(4, "big")
            buf[CRC:CRC + 4] = compute_crc(buf, 0, len(buf)).to_bytes(4, "big")
            batches.append(bytes(buf))
    else:
        batches = [data] * count
    plog = PartitionLog(directory / ("idem-0" if idempotent else "bench-0"),
                        LogConfig(segment_bytes=128 * MB))
    start = time.perf_counter()
    for one in batches:
        plog.append(one, leader_epoch=0)
    elapsed = time.perf_counter() - start
    plog.update_high_watermark()
    mb = count * len(data) / MB
    label = "append, idempotent" if idempotent else "append"
    print(f"{label:<22} {len(data) / 1024:5.1f} KB batches: {mb / elapsed:8.1f} MB/s  "
          f"({count / elapsed:8.0f} batches/s, {len(plog.segments)} segments)")
    return plog


def bench_read(plog: PartitionLog, max_bytes: int) -> None:
    offset, total, fetches = 0, 0, 0
    start = time.perf_counter()
    while offset < plog.high_watermark:
        data = plog.read(offset, max_bytes, max_offset=plog.high_watermark)
        total += len(data.records)
        fetches += 1
        offset = data.next_offset
    elapsed = time.perf_counter() - start
    print(f"read, max_bytes {max_bytes // 1024:5d} KB:  {total / MB / elapsed:8.1f} MB/s  "
          f"({fetches / elapsed:8.0f} fetches/s)")


def bench_reopen(plog: PartitionLog) -> None:
    plog.close()
    start = time.perf_counter()
    again = PartitionLog(plog.dir, plog.config)
    clean = time.perf_counter() - start
    again.close()
    start = time.perf_counter()
    PartitionLog(plog.dir, plog.config, had_clean_shutdown=False).close()
    unclean = time.perf_counter() - start
    print(f"reopen {plog.size / MB:.0f} MB: clean {clean * 1000:.1f} ms, unclean (full "
          f"re-validation) {unclean * 1000:.0f} ms = {plog.size / MB / unclean:.0f} MB/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=256, help="data to append (default 256)")
    parser.add_argument("--dir", help="where to write (default: a temporary directory)")
    args = parser.parse_args()
    directory = Path(args.dir or tempfile.mkdtemp(prefix="bench-storage-"))
    directory.mkdir(parents=True, exist_ok=True)
    try:
        plog = bench_append(directory, args.mb)
        bench_append(directory, args.mb // 4, idempotent=True).close()
        bench_read(plog, MB)
        bench_read(plog, 64 * 1024)
        bench_reopen(plog)
    finally:
        if not args.dir:
            shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
