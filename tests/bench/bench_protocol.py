"""Protocol hot-path benchmark: µs per operation, median of several timeit runs.

Not a test (pytest does not collect `bench_*.py`); run it by hand:

    cd /work/main && PYTHONPATH=. .venv/bin/python tests/bench/bench_protocol.py [--profile]

The four operations are the broker's per-request protocol costs on its busiest paths; records
stay opaque bytes throughout, as DESIGN.md requires. `--profile` runs cProfile on any operation
that misses its target and prints where the time goes.
"""
from __future__ import annotations

import cProfile
import pstats
import statistics
import sys
import timeit
import uuid
from io import BytesIO
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from protocol.headers import (  # noqa: E402
    RequestHeader, decode_request_header, encode_request_header,
)
from protocol.messages import APIS  # noqa: E402
from tests.protocol.samples import record_batch  # noqa: E402

REPEAT = 7


def _header_case() -> Callable[[], object]:
    raw = encode_request_header(RequestHeader(0, 9, 123456, "producer-1"), True) + b"body"
    return lambda: decode_request_header(BytesIO(raw), True)


def _produce_case() -> Callable[[], object]:
    produce = APIS[0].request
    batch = record_batch([b"r" * 1000] * 16)  # ~16 KB per partition
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 30000,
            "topic_data": [{"name": "bench", "partition_data": [
                {"index": i, "records": batch} for i in range(8)]}]}
    data = produce.encode(body, 9)
    return lambda: produce.decode(data, 9)


def _fetch_case() -> Callable[[], object]:
    fetch = APIS[1].response
    records = record_batch([b"f" * 8000] * 16)  # ~128 KB per partition
    body = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [
        {"topic": "bench", "partitions": [
            {"partition_index": i, "error_code": 0, "high_watermark": 1000,
             "last_stable_offset": 1000, "log_start_offset": 0, "aborted_transactions": None,
             "preferred_read_replica": -1, "records": records} for i in range(8)]}]}
    fetch.encode_parts(body, 12)
    # The broker sends Fetch responses as gathered parts: the record sets are not copied.
    return lambda: fetch.encode_parts(body, 12)


def _metadata_case() -> Callable[[], object]:
    metadata = APIS[3].response
    body = {"throttle_time_ms": 0,
            "brokers": [{"node_id": 0, "host": "localhost", "port": 9092, "rack": None}],
            "cluster_id": "bench-cluster", "controller_id": 0,
            "topics": [{"error_code": 0, "name": f"topic-{t}", "topic_id": uuid.uuid4(),
                        "is_internal": False, "topic_authorized_operations": -2147483648,
                        "partitions": [{"error_code": 0, "partition_index": p, "leader_id": 0,
                                        "leader_epoch": 0, "replica_nodes": [0],
                                        "isr_nodes": [0], "offline_replicas": []}
                                       for p in range(8)]} for t in range(100)]}
    metadata.encode(body, 12)
    return lambda: metadata.encode(body, 12)


CASES: list[tuple[str, Callable[[], Callable[[], object]], float]] = [
    ("request header decode (v2)", _header_case, 3.0),
    ("Produce v9 request decode, 8 x 16 KB", _produce_case, 25.0),
    ("Fetch v12 response encode (parts), 8 x 128 KB", _fetch_case, 40.0),
    ("Metadata v12 response encode, 100 x 8", _metadata_case, 2000.0),
]


def measure(fn: Callable[[], object]) -> float:
    """Median µs per call over REPEAT runs, each long enough (~0.2 s) to be stable."""
    fn()
    number, _ = timeit.Timer(fn).autorange()
    number = max(1, number)
    runs = timeit.repeat(fn, number=number, repeat=REPEAT)
    return statistics.median(runs) / number * 1e6


def profile(name: str, fn: Callable[[], object]) -> None:
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(2000 if "header" in name else 300):
        fn()
    profiler.disable()
    print(f"\n--- profile: {name}")
    pstats.Stats(profiler).sort_stats("tottime").print_stats(12)


def main() -> int:
    want_profile = "--profile" in sys.argv
    print(f"{'operation':42} {'µs/op':>10} {'target':>10}")
    missed = []
    for name, setup, target in CASES:
        fn = setup()
        us = measure(fn)
        ok = us <= target
        print(f"{name:42} {us:10.2f} {'≤' + format(target, 'g'):>10}  {'ok' if ok else 'MISSED'}")
        if not ok:
            missed.append((name, fn))
    if want_profile:
        for name, fn in missed:
            profile(name, fn)
    return 0


if __name__ == "__main__":
    sys.exit(main())
