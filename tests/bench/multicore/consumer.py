"""One consumer process of the `multicore` workload: confluent-kafka, reading every partition
of its producer's topic from the start while that producer writes it (no group: assigned
partitions, so a rebalance cannot stall one consumer and not another). It says `ready` once
connected, waits for `go` on stdin, and prints one JSON line: its wall-clock start, the time
its last record arrived, and the records read.

    python -m tests.bench.multicore.consumer BOOTSTRAP TOPIC PARTITIONS COUNT
"""
from __future__ import annotations

import json
import sys
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

TIMEOUT_S = 300.0  # a consumer that sees nothing new for this long gives up and says so


def main(bootstrap: str, topic: str, partitions: int, count: int) -> None:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"multicore-{topic}",
                  "enable.auto.commit": False, "fetch.max.bytes": 52_428_800,
                  "max.partition.fetch.bytes": 10_485_760, "log_level": 3})
    c.list_topics(topic, timeout=30)
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        return
    t0 = time.time()
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    read = 0
    errors: list[str] = []
    last = time.monotonic()
    end = t0
    while read < count and time.monotonic() - last < TIMEOUT_S:
        msgs = c.consume(10_000, 0.5)
        for m in msgs:
            if m.error() is not None:
                if len(errors) < 5:
                    errors.append(str(m.error()))
                continue
            read += 1
        if msgs:
            last = time.monotonic()
            end = time.time()
    c.close()
    print(json.dumps({"start": t0, "end": end, "records": read, "errors": errors}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
