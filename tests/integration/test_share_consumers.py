"""Share groups (KIP-932) with a stock client: confluent-kafka's ShareConsumer (librdkafka's
share consumer, a preview in 2.16), unmodified, against a real broker."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, Iterator

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer

from compat.differential.share_scenarios import hold, polling, start_holder
from tests.helpers import broker_in_thread
from tests.integration.raw import create_topic, enable_share_groups

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def bootstrap(tmp_path: Path) -> Iterator[str]:
    with broker_in_thread(tmp_path / "logs",
                          **{"group.share.record.lock.duration.ms": "2000",
                             "group.share.min.record.lock.duration.ms": "2000",
                             "group.share.delivery.count.limit": "3"}) as info:
        enable_share_groups(info.bootstrap)
        create_topic(info.bootstrap, "q")
        yield info.bootstrap


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


def test_three_consumers_share_one_partition_and_read_each_record_once(bootstrap: str) -> None:
    consumers = [consumer(bootstrap) for _ in range(3)]
    got: list[list[tuple[int, bytes]]] = [[] for _ in consumers]
    seen: list[bytes] = []
    payload = [f"r{i}".encode() for i in range(300)]
    with polling(consumers, lambda i, m: got[i].append((m.offset(), m.value()))):
        warm_up(bootstrap, lambda: (time.sleep(0.5), any(got))[1])
        for i in range(0, 300, 30):  # several batches, so that all three get some
            produce(bootstrap, payload[i:i + 30])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            seen = [v for g in got for _, v in list(g) if v != b"warm-up"]
            if len(seen) >= 300:
                break
            time.sleep(0.2)
    assert sorted(seen) == sorted(payload)  # every record, none twice
    offsets = [o for g in got for o, _ in g]
    assert len(offsets) == len(set(offsets))


def test_a_released_record_is_redelivered_and_a_rejected_one_is_not(bootstrap: str) -> None:
    c = consumer(bootstrap, **{"share.acknowledgement.mode": "explicit"})
    try:
        def warm() -> bool:
            msgs = [m for m in c.poll(0.5) if m.error() is None]
            for m in msgs:
                c.acknowledge(m, AcknowledgeType.ACCEPT)
            return bool(msgs)
        warm_up(bootstrap, warm)
        produce(bootstrap, [b"release-me", b"reject-me", b"accept-me"])
        deliveries: list[bytes] = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and deliveries.count(b"release-me") < 2:
            for m in c.poll(0.5):
                if m.error() is not None:
                    continue
                deliveries.append(m.value())
                kind = {b"release-me": AcknowledgeType.RELEASE,
                        b"reject-me": AcknowledgeType.REJECT}.get(m.value(),
                                                                   AcknowledgeType.ACCEPT)
                if m.value() == b"release-me" and deliveries.count(b"release-me") > 1:
                    kind = AcknowledgeType.ACCEPT
                c.acknowledge(m, kind)
        # a few more polls: nothing rejected or accepted comes back
        for _ in range(4):
            for m in c.poll(0.5):
                if m.error() is None:
                    deliveries.append(m.value())
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
        c.commit_sync()
    finally:
        c.close()
    assert deliveries.count(b"release-me") == 2
    assert deliveries.count(b"reject-me") == 1
    assert deliveries.count(b"accept-me") == 1


def test_a_poison_record_is_archived_at_the_delivery_limit(bootstrap: str) -> None:
    c = consumer(bootstrap, **{"share.acknowledgement.mode": "explicit"})
    deliveries: list[tuple[bytes, int]] = []
    try:
        def warm() -> bool:
            msgs = [m for m in c.poll(0.5) if m.error() is None]
            for m in msgs:
                c.acknowledge(m, AcknowledgeType.ACCEPT)
            return bool(msgs)
        warm_up(bootstrap, warm)
        produce(bootstrap, [b"poison", b"fine"])
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            for m in c.poll(0.3):
                if m.error() is None:
                    deliveries.append((m.value(), m.delivery_count()))
                    c.acknowledge(m, AcknowledgeType.RELEASE if m.value() == b"poison"
                                  else AcknowledgeType.ACCEPT)
            if [v for v, _ in deliveries].count(b"poison") >= 3:
                break
        for _ in range(4):  # archived now: it never comes back
            for m in c.poll(0.5):
                if m.error() is None:
                    deliveries.append((m.value(), m.delivery_count()))
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
        c.commit_sync()
    finally:
        c.close()
    assert [d for d in deliveries if d[0] == b"poison"] == [
        (b"poison", 1), (b"poison", 2), (b"poison", 3)]
    assert [d for d in deliveries if d[0] == b"fine"] == [(b"fine", 1)]


def test_records_of_a_killed_consumer_come_back_when_its_connection_closes(
        bootstrap: str) -> None:
    """A consumer process holding records is killed -9: its connection closes, and with it
    its share session, so another consumer gets them at once with the delivery taken back
    (count 1), as Kafka 4.1.1 does (compat/DIFFERENTIAL.md's share scenarios)."""
    holder, lines = start_holder(bootstrap, "sg", "q", tries=1, seconds=30)
    c: ShareConsumer | None = None
    try:
        held = hold(bootstrap, "q", lines, [b"a", b"b", b"c"])
        holder.kill()
        holder.wait(10)
        c = consumer(bootstrap)
        got: list[tuple[bytes, int]] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(got) < len(held):
            got += [(m.value(), m.delivery_count()) for m in c.poll(0.3)
                    if m.error() is None and m.value() != b"warm-up"]
        assert sorted(got) == sorted((v.encode(), 1) for v in held)
    finally:
        if holder.poll() is None:
            holder.kill()
        if c is not None:
            c.close()
