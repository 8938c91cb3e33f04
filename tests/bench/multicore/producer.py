"""One producer process of the `multicore` workload: confluent-kafka, 1 KB records, acks=1,
round-robin over its own topic's partitions. It connects and learns the topic's metadata, says
`ready`, waits for `go` on stdin (so that all producers start together), produces, and prints
one JSON line: its wall-clock start and end (time.time(), comparable across processes), the
records acknowledged, and the produce-to-ack latency of every SAMPLE-th record, in ms.

    python -m tests.bench.multicore.producer BOOTSTRAP TOPIC PARTITIONS COUNT
"""
from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from confluent_kafka import Producer

SIZE = 1024
SAMPLE = 50  # one record in SAMPLE carries a delivery callback timing its ack


def main(bootstrap: str, topic: str, partitions: int, count: int) -> None:
    failed: list[str] = []
    latencies: list[float] = []

    p = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5,
                  "batch.size": 1_000_000, "compression.type": "none",
                  "queue.buffering.max.messages": 1_000_000,
                  "queue.buffering.max.kbytes": 1_048_576, "log_level": 3,
                  # Every record's report comes back (a sampled one's success runs its
                  # callback); the rest are dropped in C. The bench counts what the topic
                  # holds afterwards, so a failure is seen without a Python call per record.
                  "delivery.report.only.error": False})
    p.list_topics(topic, timeout=30)
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        return
    payload = os.urandom(SIZE)
    send = p.produce
    t0 = time.time()
    for i in range(count):
        callback = None
        if i % SAMPLE == 0:
            sent = time.perf_counter()

            def callback(err: Any, msg: Any, sent: float = sent) -> None:
                if err is None:
                    latencies.append((time.perf_counter() - sent) * 1000)
                elif len(failed) < 5:
                    failed.append(str(err))
        while True:
            try:
                if callback is None:
                    send(topic, payload, partition=i % partitions)
                else:
                    send(topic, payload, partition=i % partitions, on_delivery=callback)
                break
            except BufferError:
                p.poll(0.005)
    left = p.flush(300)
    t1 = time.time()
    print(json.dumps({"start": t0, "end": t1, "records": count - left, "left": left,
                      "failed": failed, "latencies_ms": latencies}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
