"""confluent-kafka's ShareConsumer (librdkafka's, unmodified) in group `sg` on topic `q`, a
producer to `q`, and a warm-up that makes a new share-partition start before what follows;
for the share consumer tests (tests/integration/test_share_consumers.py) and the share group
tools' against Kafka's."""
from __future__ import annotations

import time
from typing import Callable

from confluent_kafka import Producer, ShareConsumer


def consumer(bootstrap: str, **config: str) -> ShareConsumer:
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": "sg", **config})
    c.subscribe(["q"])
    return c


def produce(bootstrap: str, values: list[bytes]) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for v in values:
        p.produce("q", v)
    assert p.flush(10) == 0


def warm_up(bootstrap: str, poll: Callable[[], bool]) -> None:
    """The share-partition starts where the group first fetches (share.auto.offset.reset is
    latest): produce a warm-up record until a consumer gets one, so what follows is seen."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        produce(bootstrap, [b"warm-up"])
        if poll():
            return
    raise AssertionError("no consumer got a warm-up record in 30 s")
